/// How progress through a transition is shaped. The eased curves are CSS's
/// (`cubic-bezier` with the control points CSS Transitions names: ease-in
/// (0.42, 0, 1, 1), ease-out (0, 0, 0.58, 1), ease-in-out (0.42, 0, 0.58, 1)),
/// solved for x to within 1e-7.
public enum Easing: String, Hashable, Sendable, Codable, CaseIterable {
    case linear
    case easeIn = "ease-in"
    case easeOut = "ease-out"
    case easeInOut = "ease-in-out"

    /// The eased progress for linear progress `p` (clamped to 0...1); 0 and 1 map to themselves.
    public func apply(_ p: Double) -> Double {
        let x = min(1, max(0, p.isNaN ? 0 : p))
        switch self {
        case .linear: return x
        case .easeIn: return Easing.cubicBezier(x, 0.42, 0, 1, 1)
        case .easeOut: return Easing.cubicBezier(x, 0, 0, 0.58, 1)
        case .easeInOut: return Easing.cubicBezier(x, 0.42, 0, 0.58, 1)
        }
    }

    /// y at `x` of the curve from (0, 0) to (1, 1) with control points
    /// (x1, y1) and (x2, y2): x(s) is increasing for x1, x2 in 0...1, so
    /// bisection finds s.
    static func cubicBezier(_ x: Double, _ x1: Double, _ y1: Double, _ x2: Double, _ y2: Double) -> Double {
        if x <= 0 { return 0 }
        if x >= 1 { return 1 }
        func bezier(_ s: Double, _ a: Double, _ b: Double) -> Double {
            let u = 1 - s
            return 3 * u * u * s * a + 3 * u * s * s * b + s * s * s
        }
        var lo = 0.0, hi = 1.0
        for _ in 0..<48 {
            let mid = (lo + hi) / 2
            if bezier(mid, x1, x2) < x { lo = mid } else { hi = mid }
        }
        return bezier((lo + hi) / 2, y1, y2)
    }

    static let names = Easing.allCases.map(\.rawValue).joined(separator: ", ")
}

/// How a layout change animates: over `milliseconds` of the take's clock,
/// shaped by `easing`. Zero milliseconds is a cut.
///
/// Frames (docs/ARCHITECTURE.md, "Layout transitions"): a transition of D
/// at a frame duration f is N = ⌈D / f⌉ frames, the first being the frame at
/// which the change applies. The frame at time t after that first frame's t0
/// is drawn at progress (t − t0) / ((N − 1)·f), eased: the first is the
/// picture as it was, the N-th the new layout, the frames in between
/// interpolated. 400 ms at 60 fps is 24 frames, whatever the take's speed.
public struct LayoutTransition: Hashable, Sendable, CustomStringConvertible {
    public var milliseconds: Double
    public var easing: Easing
    public init(milliseconds: Double, easing: Easing = .easeInOut) {
        self.milliseconds = milliseconds; self.easing = easing
    }

    /// Longest transition accepted (ten seconds).
    public static let maximumMilliseconds = 10_000.0

    public var description: String { "\(Self.format(milliseconds)):\(easing.rawValue)" }

    public static func format(_ ms: Double) -> String {
        ms.rounded() == ms && abs(ms) < 1e15 ? String(Int64(ms)) : String(ms)
    }

    /// Parses `MS[:EASING]` (`400`, `400ms`, `400:ease-in-out`); the easing defaults to ease-in-out.
    public static func parse(_ text: String, field: String = "--transition") throws(ConfigurationError) -> LayoutTransition {
        let parts = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        var msText = parts.first.map(String.init) ?? ""
        if msText.lowercased().hasSuffix("ms") { msText = String(msText.dropLast(2)) }
        guard let ms = Double(msText), ms.isFinite else {
            throw ConfigurationError(field: field, value: text, reason: "expected MS[:EASING], e.g. 400 or 400:ease-in-out (easing \(Easing.names))")
        }
        var easing = Easing.easeInOut
        if parts.count == 2 {
            guard let e = Easing(rawValue: parts[1].lowercased()) else {
                throw ConfigurationError(field: field, value: text, reason: "unknown easing '\(parts[1])'; expected \(Easing.names)")
            }
            easing = e
        }
        let t = LayoutTransition(milliseconds: ms, easing: easing)
        if let e = t.validationError(field: field) { throw e }
        return t
    }

    /// Nil when valid, else the reason naming `field`.
    public func validationError(field: String) -> ConfigurationError? {
        if !(milliseconds >= 0 && milliseconds <= Self.maximumMilliseconds) {
            return ConfigurationError(field: field, value: description,
                                      reason: "the duration must be 0 to \(Int(Self.maximumMilliseconds)) ms")
        }
        return nil
    }

    /// The frames it takes at `frameDuration` (1 for a cut).
    public func frames(at frameDuration: MediaTime) -> Int {
        let f = frameDuration.seconds
        guard f > 0, milliseconds > 0 else { return 1 }
        return max(1, Int((milliseconds / 1000 / f - 1e-9).rounded(.up)))
    }
}

/// A layout change and how it animates (nil: at once).
public struct LayoutChange: Hashable, Sendable {
    public var layout: Layout
    public var transition: LayoutTransition?
    public init(layout: Layout, transition: LayoutTransition? = nil) {
        self.layout = layout; self.transition = transition
    }
}

/// A layout change at a time of the take (`--layout-at SECONDS=KIND`,
/// JSON `layoutSchedule`): from the first primary frame at or after `at`.
/// `layout` is complete (JSON entries are merged over the layout before them
/// when read); `transition` nil takes the take's `--transition`.
public struct ScheduledLayout: Hashable, Sendable {
    public var at: Double
    public var layout: Layout
    public var transition: LayoutTransition?
    public init(at: Double, layout: Layout, transition: LayoutTransition? = nil) {
        self.at = at; self.layout = layout; self.transition = transition
    }
}

// MARK: - Interpolation

extension CompositionPlan {
    /// The plan `progress` (0...1, already eased) of the way from `self` to
    /// `target`, on `target`'s canvas. Draws of the same role are
    /// interpolated: destination edges (rounded to even), crop, corner radius,
    /// border width and colour, opacity; orientation is `target`'s, the
    /// stacking `self`'s until halfway, then `target`'s. A role
    /// only one side has fades (opacity from or to 0) where it is. The
    /// background colour is interpolated. Progress 0 is `self`'s draws, 1
    /// exactly `target`.
    public func interpolated(to target: CompositionPlan, progress p: Double) -> CompositionPlan {
        if p >= 1 { return target }
        let p = max(0, p)
        func lerp(_ a: Double, _ b: Double) -> Double { a + (b - a) * p }
        func lerpRect(_ a: PixelRect, _ b: PixelRect) -> PixelRect {
            PixelRect(evenEdgesMinX: lerp(Double(a.x), Double(b.x)), minY: lerp(Double(a.y), Double(b.y)),
                      maxX: lerp(Double(a.maxX), Double(b.maxX)), maxY: lerp(Double(a.maxY), Double(b.maxY)))
        }
        func lerpColor(_ a: RGBAColor, _ b: RGBAColor) -> RGBAColor {
            RGBAColor(r: lerp(a.r, b.r), g: lerp(a.g, b.g), b: lerp(a.b, b.b), a: lerp(a.a, b.a))
        }
        var draws: [DrawDescription] = []
        for to in target.draws {
            guard let from = self.draws.first(where: { $0.role == to.role }) else {
                var d = to
                d.opacity = to.opacity * p
                draws.append(d)
                continue
            }
            var d = to
            d.destination = lerpRect(from.destination, to.destination)
            d.crop = NormalizedRect(x: lerp(from.crop.x, to.crop.x), y: lerp(from.crop.y, to.crop.y),
                                    width: lerp(from.crop.width, to.crop.width), height: lerp(from.crop.height, to.crop.height))
            d.opacity = lerp(from.opacity, to.opacity)
            d.cornerRadius = lerp(from.cornerRadius, to.cornerRadius)
            d.borderWidth = lerp(from.borderWidth, to.borderWidth)
            d.borderColor = lerpColor(from.borderColor, to.borderColor)
            d.zIndex = p < 0.5 ? from.zIndex : to.zIndex
            draws.append(d)
        }
        for from in self.draws where !target.draws.contains(where: { $0.role == from.role }) {
            var d = from
            d.opacity = from.opacity * (1 - p)
            draws.append(d)
        }
        return CompositionPlan(canvas: target.canvas, background: lerpColor(background, target.background),
                               draws: draws.filter { !$0.destination.isEmpty })
    }
}

/// One output's layout over time: the layout it shows, and the transition
/// under way (docs/ARCHITECTURE.md, "Layout transitions"). A value owned by
/// the render loop; times are the take's clock (the primary's timestamps),
/// never the wall clock, so a transition has as many frames at any speed.
public struct LayoutAnimator: Sendable {
    public private(set) var layout: Layout
    let frameDuration: MediaTime
    /// The plan last drawn: where the picture is.
    public private(set) var lastPlan: CompositionPlan?
    private var active: (from: CompositionPlan, start: MediaTime?, span: Double, easing: Easing)?

    public init(layout: Layout, frameDuration: MediaTime) {
        self.layout = layout; self.frameDuration = frameDuration
    }

    /// Whether a transition is under way (or starts at the next frame).
    public var isAnimating: Bool { active != nil }

    /// Changes the layout; with a transition, the next frame starts it from
    /// the picture last drawn (in the middle of another transition too).
    public mutating func change(to newLayout: Layout, transition: LayoutTransition?) {
        layout = newLayout
        guard let t = transition, t.milliseconds > 0, let from = lastPlan else { active = nil; return }
        let frames = t.frames(at: frameDuration)
        guard frames > 1 else { active = nil; return }
        active = (from, nil, Double(frames - 1) * frameDuration.seconds, t.easing)
    }

    /// The plan for the frame at `t`, remembered as where the picture is.
    public mutating func plan(at t: MediaTime, canvas: PixelSize, primary: StreamGeometry?, secondary: StreamGeometry?) -> CompositionPlan {
        let target = layout.resolve(canvas: canvas, primary: primary, secondary: secondary)
        var plan = target
        if var a = active {
            let start = a.start ?? t
            a.start = start
            let linear = (t - start).seconds / a.span
            if linear >= 1 - 1e-9 {
                active = nil
            } else {
                active = a
                plan = a.from.interpolated(to: target, progress: a.easing.apply(linear))
            }
        }
        lastPlan = plan
        return plan
    }
}
