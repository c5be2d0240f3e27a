import Testing
@testable import DiptychCore

@Suite struct ThermalPolicyTests {
    /// Every row of docs/ARCHITECTURE.md, "Failure paths" (overheating): 4 states × recording × resolution.
    @Test(arguments: [
        (ThermalState.nominal, false, false, ThermalAction.none), (.nominal, false, true, .none),
        (.nominal, true, false, .none), (.nominal, true, true, .none),
        (.fair, false, false, .none), (.fair, false, true, .none),
        (.fair, true, false, .none), (.fair, true, true, .none),
        (.serious, false, true, .dropTo720p), (.serious, false, false, .warn),
        (.serious, true, true, .warn), (.serious, true, false, .warn),       // never change resolution mid-file
        (.critical, true, true, .stopRecording), (.critical, true, false, .stopRecording),
        (.critical, false, true, .refuseToStart), (.critical, false, false, .refuseToStart),
    ])
    func table(state: ThermalState, recording: Bool, hd: Bool, expected: ThermalAction) {
        #expect(ThermalPolicy.decide(state: state, recording: recording, is1080pOrAbove: hd) == expected)
    }

    /// A take with a live output: serious with both streams drops the secondary.
    @Test(arguments: [
        (ThermalState.nominal, true, ThermalAction.none), (.nominal, false, .none), (.fair, true, .none), (.fair, false, .none),
        (.serious, true, .dropToOneStream), (.serious, false, .warn), (.critical, true, .stopRecording), (.critical, false, .stopRecording),
    ])
    func liveTable(state: ThermalState, both: Bool, expected: ThermalAction) {
        #expect(ThermalPolicy.decideLive(state: state, bothStreams: both) == expected)
    }

    @Test(arguments: [
        (size(1920, 1080), true, size(1280, 720)), (size(1080, 1920), true, size(720, 1280)),
        (size(3840, 2160), true, size(1280, 720)), (size(1440, 1080), true, size(960, 720)),
        (size(1280, 720), false, size(1280, 720)), (size(1920, 1078), false, size(1282, 720)), (size(960, 540), false, size(960, 540)),
    ])
    func resolutionHelpers(canvas: PixelSize, high: Bool, reduced: PixelSize) {
        #expect(ThermalPolicy.isHighResolution(canvas) == high)
        let r = ThermalPolicy.reducedCanvas(for: canvas)
        #expect(r == reduced && r.isEven)
    }

    @Test func decideFromCanvasAndParse() throws {
        #expect(ThermalPolicy.decide(state: .serious, recording: false, canvas: size(1080, 1920)) == .dropTo720p)
        #expect(ThermalPolicy.decide(state: .serious, recording: false, canvas: size(1280, 720)) == .warn)
        #expect(try ThermalState.parse("Serious") == .serious)
        #expect(ThermalState.nominal < .fair && .fair < .serious && .serious < .critical)
        #expect(throws: ConfigurationError.self) { try ThermalState.parse("hot") }
    }
}

@Suite struct StoragePolicyTests {
    static let mib = StoragePolicy.mebibyte
    /// docs/ARCHITECTURE.md, "Failure paths" (storage): 200 MiB to start, stop below 100 MiB; boundaries included.
    @Test(arguments: [
        (Int64?(500 * mib), false, "start allowed"), (200 * mib, false, "start allowed"),
        (200 * mib - 1, false, "start refused"), (0, false, "start refused"),
        (150 * mib, true, "continue"), (100 * mib, true, "continue"),
        (100 * mib - 1, true, "stop"), (0, true, "stop"),
        (nil, false, "start allowed"), (nil, true, "continue"),
    ])
    func table(free: Int64?, recording: Bool, expected: String) {
        let d = StoragePolicy.standard.decide(freeBytes: free, recording: recording)
        #expect(d.description.hasPrefix(expected), "\(d)")
        #expect(d.mayRecord == (expected == "start allowed" || expected == "continue"))
    }

    @Test func reasonsNameTheNumbers() {
        #expect(StoragePolicy.standard.decide(freeBytes: 150 * Self.mib, recording: false)
            == .startRefused(reason: "free space 150.0 MiB is below the 200.0 MiB needed to start"))
        #expect(StoragePolicy.standard.decide(freeBytes: 99 * Self.mib, recording: true)
            == .stop(reason: "free space 99.0 MiB is below 100.0 MiB"))
        let custom = StoragePolicy(startMinimum: 10 * Self.mib, stopBelow: 5 * Self.mib)
        #expect(custom.decide(freeBytes: 10 * Self.mib, recording: false) == .startAllowed)
        #expect(custom.decide(freeBytes: 6 * Self.mib, recording: true) == .continue)
    }
}

@Suite struct CostBudgetTests {
    @Test(arguments: [
        // samples (ms), expected verdict kind — 60 fps, headroom 0.8 → limit 13.333 ms, window 20, p95 = 19th smallest
        (Array(repeating: 5.0, count: 20), "accept"),
        (Array(repeating: 13.0, count: 20), "accept"),
        (Array(repeating: 14.0, count: 20), "rollBack"),
        (Array(repeating: 5.0, count: 19) + [40.0], "accept"),          // one spike: p95 ignores it
        (Array(repeating: 5.0, count: 18) + [40.0, 40.0], "rollBack"),  // two spikes reach p95
        (Array(repeating: 5.0, count: 19), "measuring"),
    ])
    func verdicts(samplesMs: [Double], expected: String) {
        var b = CostBudget(frameRate: FrameRate(60), headroom: 0.8, window: 20, percentile: 0.95)
        for s in samplesMs { b.record(s / 1000) }
        switch b.verdict {
        case .measuring(let have, let need): #expect(expected == "measuring" && have == 19 && need == 20)
        case .accept(let p, let limit): #expect(expected == "accept" && p <= limit)
        case .rollBack(let p, let limit): #expect(expected == "rollBack" && p > limit)
        }
    }

    @Test func nearestRankPercentileIsExact() {
        let values = (1...100).map(Double.init).shuffled()
        #expect(CostBudget.nearestRankPercentile(values, 0.95) == 95)
        #expect(CostBudget.nearestRankPercentile(values, 1) == 100)
        #expect(CostBudget.nearestRankPercentile([3, 1, 2], 0.5) == 2)
        #expect(CostBudget.nearestRankPercentile([7], 0.95) == 7)
    }

    @Test func windowKeepsTheMostRecentSamples() {
        var b = CostBudget(frameInterval: 0.010, headroom: 1, window: 4, percentile: 1)
        for s in [0.5, 0.5, 0.5, 0.5, 0.001, 0.002, 0.003, 0.004] { b.record(s) }
        #expect(b.sampleCount == 4)
        #expect(b.verdict == .accept(percentileCost: 0.004, limit: 0.010))
        b.reset()
        #expect(b.verdict == .measuring(samples: 0, needed: 4))
    }

    /// docs/ARCHITECTURE.md, "Cost budget and rollback": apply, measure, roll back when over budget; never kill the session.
    @Test func budgetedChangeRollsBackOrCommits() {
        let budget = CostBudget(frameRate: FrameRate(30), headroom: 0.8, window: 10, percentile: 0.95)
        var over = BudgetedChange(previous: PixelSize.hd720, candidate: PixelSize.hd1080, budget: budget)
        #expect(over.active == .hd1080 && over.state == .trial)
        for _ in 0..<10 { over.record(0.040) }
        #expect(over.state == .rolledBack && over.active == .hd720)
        over.record(0.001)                                   // settled: later samples change nothing
        #expect(over.state == .rolledBack)

        var fits = BudgetedChange(previous: PixelSize.hd720, candidate: PixelSize.hd1080, budget: budget)
        for i in 0..<10 {
            let v = fits.record(0.010)
            if i < 9 { #expect(v == .measuring(samples: i + 1, needed: 10)) }
        }
        #expect(fits.state == .committed && fits.active == .hd1080)
    }
}
