/// The machine's thermal pressure, mildest first (as operating systems report it).
public enum ThermalState: String, Hashable, Sendable, Codable, CaseIterable, Comparable, CustomStringConvertible {
    case nominal, fair, serious, critical

    public static func < (a: Self, b: Self) -> Bool { a.level < b.level }
    private var level: Int {
        switch self { case .nominal: 0; case .fair: 1; case .serious: 2; case .critical: 3 }
    }
    /// Parses a `--thermal-state` value.
    public static func parse(_ text: String, field: String = "--thermal-state") throws(ConfigurationError) -> ThermalState {
        guard let s = ThermalState(rawValue: text.lowercased()) else {
            throw ConfigurationError(field: field, value: text, reason: "expected nominal, fair, serious or critical")
        }
        return s
    }
    public var description: String { rawValue }
}

/// What to do about heat.
public enum ThermalAction: String, Hashable, Sendable, Codable, CaseIterable {
    /// Carry on.
    case none
    /// Before the take: record at 720p instead of 1080p or above
    /// (`ThermalPolicy.reducedCanvas(for:)`).
    case dropTo720p
    /// Log a warning; change nothing (never change resolution mid-file).
    case warn
    /// Stop the take through the normal finalize path.
    case stopRecording
    /// Do not start a take (critical before starting).
    case refuseToStart
    /// During a live stream with both streams: go on with the primary alone
    /// (fewer cameras rather than a resolution change mid-stream).
    case dropToOneStream
}

/// docs/ARCHITECTURE.md, "Failure paths", overheating. A pure function:
///
/// | state            | recording | ≥1080p | action          |
/// |------------------|-----------|--------|-----------------|
/// | nominal, fair    | any       | any    | none            |
/// | serious          | no        | yes    | dropTo720p      |
/// | serious          | no        | no     | warn            |
/// | serious          | yes       | any    | warn            |
/// | critical         | yes       | any    | stopRecording   |
/// | critical         | no        | any    | refuseToStart   |
///
/// Decisions: *serious* before a sub-1080p take has nothing left to drop, so
/// it only warns. *Critical* before a take refuses to start (starting only
/// to stop at once would write an empty file); the caller exits with a
/// runtime failure naming the thermal state.
public enum ThermalPolicy {
    public static func decide(state: ThermalState, recording: Bool, is1080pOrAbove: Bool) -> ThermalAction {
        switch (state, recording) {
        case (.nominal, _), (.fair, _): return .none
        case (.serious, false): return is1080pOrAbove ? .dropTo720p : .warn
        case (.serious, true): return .warn
        case (.critical, true): return .stopRecording
        case (.critical, false): return .refuseToStart
        }
    }

    /// During a take that has a live output:
    ///
    /// | state            | both streams | action          |
    /// |------------------|--------------|-----------------|
    /// | nominal, fair    | any          | none            |
    /// | serious          | yes          | dropToOneStream |
    /// | serious          | no           | warn            |
    /// | critical         | any          | stopRecording   |
    public static func decideLive(state: ThermalState, bothStreams: Bool) -> ThermalAction {
        switch state {
        case .nominal, .fair: return .none
        case .serious: return bothStreams ? .dropToOneStream : .warn
        case .critical: return .stopRecording
        }
    }

    /// Convenience: `decide` with `is1080pOrAbove` taken from `canvas`.
    public static func decide(state: ThermalState, recording: Bool, canvas: PixelSize) -> ThermalAction {
        decide(state: state, recording: recording, is1080pOrAbove: isHighResolution(canvas))
    }

    /// 1080p or above: the canvas's shorter side is at least 1080 pixels
    /// (1920×1080 and 1080×1920 both count).
    public static func isHighResolution(_ canvas: PixelSize) -> Bool { canvas.shorterSide >= 1080 }

    /// The 720p canvas for `canvas`: shorter side 720, the same aspect,
    /// rounded to even (1920×1080 → 1280×720, 1080×1920 → 720×1280).
    /// Canvases already at or below 720 are returned unchanged.
    public static func reducedCanvas(for canvas: PixelSize) -> PixelSize {
        guard canvas.shorterSide > 720 else { return canvas }
        let scale = 720 / Double(canvas.shorterSide)
        let w = canvas.width == canvas.shorterSide ? 720 : PixelRect.evenEdge(Double(canvas.width) * scale)
        let h = canvas.height == canvas.shorterSide ? 720 : PixelRect.evenEdge(Double(canvas.height) * scale)
        return PixelSize(width: w, height: h)
    }
}
