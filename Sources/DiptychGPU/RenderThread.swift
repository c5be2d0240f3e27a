import Synchronization
import CGLES
import DiptychCore
import Foundation
import CEGL

/// A dedicated thread that owns the GL context: every GL call runs here.
/// `sync` blocks the caller until the work has run. Thread-safe.
///
/// Work queued by several compositors sharing the context runs back to back
/// in one wake-up, and fenced work is flushed to the GPU once the queue is
/// empty (or every `flushInterval`), not once per call. Output frames queued
/// back to back (`FrameJob`, up to `maxBatch`) run phase by phase.
final class RenderThread: @unchecked Sendable {   // pthread handle; the queue is a `Condition`, the rest render-thread only
    private enum Item {
        /// A call from another thread, and where it was made (`sync`'s `call`).
        case work(String, @Sendable () -> Void)
        case frame(FrameJob)
        var isWork: Bool { if case .work = self { true } else { false } }
    }
    /// What a wake-up found: something to run, nothing (a poll interval passed), or the end.
    private enum Next {
        case run(Item, [FrameJob])
        case idle
        case stopped
    }
    /// The work queued, and whether `stop()` was asked for and has joined the thread.
    private struct Queue {
        var items: [Item] = []
        var stopped = false
        var joined = false
    }
    private let queue = Condition(Queue())
    /// Frames run phase by phase together at most (`GPUTuning.frameBatch`
    /// of the compositor that made the thread; 1 runs each frame on its own).
    let maxBatch: Int
    /// The thread, joined by `stop()`: it has left EGL and the C library's
    /// per-thread state before `stop()` returns, so a process that exits
    /// right after (a take that failed to start) never races its teardown.
    private var handle = pthread_t()
    /// Calls that went to the render thread and waited for it (`sync` from another thread).
    let hopCounter = Counter()
    final class Counter: Sendable {
        private let n = Mutex(0)
        func add() { n.withLock { $0 += 1 } }
        var value: Int { n.withLock { $0 } }
    }
    /// How busy the thread is: time spent running work, items run, wake-ups
    /// (read from any thread; the render thread adds to it).
    let load = LoadCounter()
    final class LoadCounter: Sendable {
        private let value = Mutex(RenderThreadLoad())
        /// Batches whose GPU timestamps arrived: the GPU's time running them, idle before them, running their uploads and
        /// copies, and running their GPU encoder.
        func addGPU(_ c: BatchClock.GPUBatchTimes) {
            value.withLock { v in
                v.gpuBatches += c.batches; v.gpuBatchSeconds += c.busy; v.gpuIdleSeconds += c.idle
                v.gpuUploadSeconds += c.uploads; v.gpuEncoderSeconds += c.encoder; v.gpuEncodedPictures += c.encodedPictures
                v.gpuEncoderIDRBatches += c.idrBatches
                v.gpuEncoderPassSeconds.merge(c.encoderPasses, uniquingKeysWith: +)
            }
        }
        /// `call`: where the item was a call from another thread (`sync`), where it was made and its time.
        func add(busy ns: UInt64, items: Int, phases: inout [UInt64], call: (String, UInt64)? = nil) {
            let seconds = phases.map { Double($0) / 1e9 }
            value.withLock { v in
                v.busySeconds += Double(ns) / 1e9; v.items += items; v.wakeups += 1
                for (i, p) in seconds.enumerated() where p > 0 { v.phaseSeconds[RenderPhase.allCases[i].name, default: 0] += p }
                if let (name, ns) = call { v.calls[name, default: .init()].count += 1; v.calls[name, default: .init()].seconds += Double(ns) / 1e9 }
            }
            for i in phases.indices { phases[i] = 0 }
        }
        var snapshot: RenderThreadLoad { value.withLock { $0 } }
    }
    /// Render thread only: time by phase since the last item ended (nanoseconds, `RenderPhase` order).
    private var phaseNs = [UInt64](repeating: 0, count: RenderPhase.allCases.count)
    /// Render thread only: while a batch's readbacks are recorded, the fence
    /// their submissions share (created at the first, sealed after the last).
    private var sharing = false
    private var shared: SharedFence?
    /// Render thread only: GPU-encoded pictures of the batch being recorded,
    /// encoded together after its last frame (`H264ComputeEncoder.encode`).
    private var encodes: [(OutputEncoder, H264ComputeEncoder.Job)] = []
    /// Render thread only: the watched fences inserted here (`FenceOps.watched`).
    private let watch = FenceWatch()
    /// Render thread only: GPU timestamps around each frame batch, where the
    /// context has timer queries and the first renderer's tuning asks for them.
    private var clock: BatchClock?
    /// Render thread only: whether its GL work takes turns with the other
    /// software render threads of the process (`SoftwareTurn`): until its
    /// context is known to be a GPU's, and for good once it made a software one.
    private var takesTurns = true
    private var madeSoftwareContext = false
    /// Render thread only: a fence was inserted since the last glFlush.
    private var flushWanted = false
    private var lastFlush: UInt64 = 0
    static let flushInterval: UInt64 = 250_000   // ns
    nonisolated(unsafe) private static var currentKey = pthread_key_t()
    private static let keyOnce: Void = { pthread_key_create(&currentKey, nil) }()

    init(name: String, maxBatch: Int = GPUTuning().frameBatch) {
        precondition(maxBatch >= 1)
        self.maxBatch = maxBatch
        _ = RenderThread.keyOnce
        var attr = pthread_attr_t()
        pthread_attr_init(&attr)
        pthread_attr_setstacksize(&attr, 4 << 20)
        let box = Unmanaged.passRetained(StartBox(thread: self, name: name))
        let rc = pthread_create(&handle, &attr, { arg in
            let start = Unmanaged<StartBox>.fromOpaque(arg!).takeRetainedValue()
            start.thread.loop()
            return nil
        }, box.toOpaque())
        pthread_attr_destroy(&attr)
        precondition(rc == 0, "pthread_create failed for the render thread: \(rc)")
    }

    private final class StartBox {
        let thread: RenderThread
        let name: String
        init(thread: RenderThread, name: String) { self.thread = thread; self.name = name }
    }

    /// The thread's CPU time so far, seconds (nil once it has ended or where the clock is missing).
    var cpuSeconds: Double? {
        queue.withLock { q in
            guard !q.joined else { return nil }
            var clock = clockid_t()
            guard pthread_getcpuclockid(handle, &clock) == 0 else { return nil }
            var ts = timespec()
            guard clock_gettime(clock, &ts) == 0 else { return nil }
            return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
        }
    }

    /// True on this render thread.
    var isCurrent: Bool {
        pthread_getspecific(RenderThread.currentKey) == Unmanaged.passUnretained(self).toOpaque()
    }

    private func loop() {
        StageClock.name(.render)
        pthread_setspecific(RenderThread.currentKey, Unmanaged.passUnretained(self).toOpaque())
        while true {
            // The next item (and the frames queued right after a frame), nothing (a poll
            // interval passed), or the end (stopped with nothing left). While watched fences
            // are pending, the wait ends every poll interval to poll them; while
            // `FenceWatch.aheadLimit` are, frames wait for the GPU (calls do not) and gather
            // into one batch.
            let interval = watch.isEmpty ? nil : FenceWatch.pollInterval
            let holding = watch.inFlight >= FenceWatch.aheadLimit
            // Fences must reach the GPU before the thread waits on them (GL's are not flushed when made).
            if holding { flushNow() }
            let runnable = { (q: inout Queue) -> Bool in
                q.stopped || (!q.items.isEmpty && (!holding || q.items.count >= self.maxBatch || q.items.contains { $0.isWork }))
            }
            let next: Next = queue.wait(until: runnable, timeout: interval) { q, ready in
                guard ready, !q.items.isEmpty else { return q.stopped && q.items.isEmpty ? .stopped : .idle }
                let item = q.items.removeFirst()
                var batch: [FrameJob] = []
                if case .frame(let first) = item {
                    batch.append(first)
                    while batch.count < maxBatch, case .frame(let following)? = q.items.first {
                        q.items.removeFirst()
                        batch.append(following)
                    }
                }
                return .run(item, batch)
            }
            guard case .run(let item, let batch) = next else {
                if case .stopped = next { break }
                SoftwareTurn.during(takesTurns) {
                    flushNow()
                    if hasContext { watch.poll() }
                }
                continue
            }
            let began = DispatchTime.now().uptimeNanoseconds
            var call: (String, UInt64)?
            SoftwareTurn.during(takesTurns) {
                if case .work(let name, let work) = item {
                    work()
                    let ns = DispatchTime.now().uptimeNanoseconds - began
                    phaseNs[RenderPhase.work.rawValue] &+= ns
                    call = (name, ns)
                } else {
                    FrameJob.run(batch)
                }
                if flushWanted {
                    let idle = queue.withLock { $0.items.isEmpty }
                    if idle || DispatchTime.now().uptimeNanoseconds - lastFlush >= RenderThread.flushInterval { flushNow() }
                }
                // The item may have ended the context (its last renderer shut down): no GL call then.
                if !watch.isEmpty || clock != nil, hasContext {
                    if !watch.isEmpty { watch.poll() }
                    if let c = clock?.collect(), c.batches > 0 { load.addGPU(c) }
                }
            }
            load.add(busy: DispatchTime.now().uptimeNanoseconds - began, items: max(1, batch.count), phases: &phaseNs, call: call)
        }
        SoftwareTurn.during(takesTurns) {
            watch.abandonAll()
            // EGL's per-thread state goes with the thread, not with the process's exit handlers.
            _ = eglReleaseThread()
        }
    }

    /// On a render thread, as its context is made current: where it is a
    /// software renderer the thread's GL work goes on taking turns with the
    /// process's other software render threads; where it is a GPU's (and the
    /// thread made no software context) it stops taking them after this item.
    /// Off a render thread (a context made on a caller's own thread) nothing.
    static func contextMadeCurrent(software: Bool) {
        guard let t = current else { return }
        if software { t.madeSoftwareContext = true }
        t.takesTurns = t.madeSoftwareContext
    }

    /// Render thread: flushes now if a fence was inserted since the last flush.
    private func flushNow() {
        guard flushWanted, hasContext else { return }
        let now = DispatchTime.now().uptimeNanoseconds
        glFlush()
        flushWanted = false
        lastFlush = now
        RenderThread.add(.flush, since: now)
    }

    /// Render thread: whether a GL context is current (none once its last renderer ended it).
    private var hasContext: Bool { eglGetCurrentContext() != diptych_egl_no_context() }

    /// On a render thread: flush the context once the queued work is done
    /// (fences must reach the GPU before anyone can see them signal).
    static func requestFlush() {
        current?.flushWanted = true
    }

    /// On a render thread: GPU timestamps around its frame batches from now
    /// on (the first caller's procs; later calls change nothing).
    static func installBatchClock(counter: PFNGLQUERYCOUNTEREXTPROC, getResult: PFNGLGETQUERYOBJECTUI64VEXTPROC) {
        guard let t = current, t.clock == nil else { return }
        t.clock = BatchClock(counter: counter, getResult: getResult)
    }

    /// On a render thread: a frame batch's first command comes next.
    static func batchStarts() { current?.clock?.start() }

    /// On a render thread: the frame batch's first dispatch comes next (its uploads and copies are recorded).
    static func batchDispatchesStart() { current?.clock?.dispatchesStart() }

    /// On a render thread recording a frame batch's GPU encoder: its pass
    /// `name` was recorded, a barrier after it (`RenderThreadLoad.encoderPasses`).
    static func encoderPassEnds(_ name: String) { current?.clock?.encoderPassEnds(name) }

    /// The watched fences of the render thread running this code (traps elsewhere).
    static var currentWatch: FenceWatch {
        guard let t = current else { preconditionFailure("a watched fence off the render thread") }
        return t.watch
    }

    /// The watch polling `fence` where this is its render thread; nil on any
    /// other thread (which waits for the flag that render thread sets).
    static func watchOf(_ fence: WatchedFence) -> FenceWatch? {
        guard let t = current, ObjectIdentifier(t.watch) == fence.watch else { return nil }
        return t.watch
    }

    /// On a render thread waiting for a lock a caller may hold while it waits
    /// for a watched fence: flushes and polls the fences; where some are still
    /// pending, yields a moment and returns true (else nobody can be waiting
    /// on one, and the lock may be waited for).
    static func pollWatchedFences() -> Bool {
        guard let t = current, !t.watch.isEmpty else { return false }
        t.flushNow()
        t.watch.poll()
        guard !t.watch.isEmpty else { return false }
        usleep(20)
        return true
    }

    /// On a render thread: counts the time since `t0` (`PassTimer.now()`) toward `phase`.
    static func add(_ phase: RenderPhase, since t0: UInt64) {
        guard let t = current else { return }
        t.phaseNs[phase.rawValue] &+= DispatchTime.now().uptimeNanoseconds &- t0
    }

    /// On a render thread: runs `body` with every submission fenced by one
    /// fence inserted after it (`SharedFence`); elsewhere just runs it.
    /// Nested (a frame run inline on the render thread inside a batch), the
    /// outermost call seals.
    static func sharingOneFence(_ body: () -> Void) {
        guard let t = current else { body(); return }
        let outer = t.sharing
        t.sharing = true
        body()
        guard !outer else { return }
        t.sharing = false
        if !t.encodes.isEmpty {
            let batch = t.encodes
            t.encodes = []
            t.clock?.encoderStarts(pictures: batch.count)
            let started = DispatchTime.now().uptimeNanoseconds
            OutputEncoder.encode(batch)
            add(.encoderRecord, since: started)
        }
        t.clock?.end()
        let t0 = DispatchTime.now().uptimeNanoseconds
        t.shared?.seal()
        add(.fence, since: t0)
        t.shared = nil
    }

    /// On a render thread recording a batch: keeps `job` to be encoded with
    /// the batch's other pictures before its fence; false elsewhere (encode now).
    static func deferEncode(_ encoder: OutputEncoder, _ job: H264ComputeEncoder.Job) -> Bool {
        guard let t = current, t.sharing else { return false }
        t.encodes.append((encoder, job))
        return true
    }

    /// The fence a submission made now shares (retained for it), or nil
    /// outside `sharingOneFence`. Fences of another kind than the batch's
    /// (`FenceOps.kind`) end it: it is sealed there and a new one begins.
    static func batchFence(_ ops: FenceOps) -> SharedFence? {
        guard let t = current, t.sharing else { return nil }
        if let f = t.shared, f.isSealed || f.ops.kind != ops.kind {
            f.seal()
            t.shared = nil
        }
        let f = t.shared ?? SharedFence(ops: ops)
        t.shared = f
        f.retain()
        return f
    }

    /// The render thread running this code, if any.
    private static var current: RenderThread? {
        _ = keyOnce
        guard let p = pthread_getspecific(currentKey) else { return nil }
        return Unmanaged<RenderThread>.fromOpaque(p).takeUnretainedValue()
    }

    /// True on any render thread.
    static var onRenderThread: Bool { current != nil }

    /// Traps unless called on a render thread: GL calls are made there only.
    static func assertCurrent(file: StaticString = #fileID, line: UInt = #line) {
        precondition(current != nil, "a GL call off the render thread", file: file, line: line)
    }

    /// Runs `work` on the render thread and returns its result. Blocks.
    /// Reentrant: on the render thread itself it runs inline.
    /// `call`: where the call was made, for the thread's time by caller (`RenderThreadLoad.callSeconds`).
    func sync<T>(call: String = #function, _ work: () throws(GPUError) -> T) throws(GPUError) -> T {
        if isCurrent { return try work() }
        hopCounter.add()
        let slot = Slot<T>()
        let done = Condition(false)
        withoutActuallyEscaping(work) { work in
            let box = WorkBox(work)
            let accepted = queue.update { q in
                guard !q.stopped else { return false }
                q.items.append(.work(call) {
                    do throws(GPUError) { slot.result = .success(try box.run()) } catch { slot.result = .failure(error) }
                    done.update { $0 = true }
                })
                return true
            }
            if accepted { done.wait(until: { $0 }) } else { box.drop(); slot.result = .failure(.shutDown) }
        }
        return try slot.result!.get()
    }

    /// Runs `job`'s phases on the render thread, batched with the frames queued
    /// beside it. Blocks until its last phase has run; throws its error.
    func syncFrame(_ job: FrameJob) throws(GPUError) {
        if isCurrent {
            FrameJob.run([job])
        } else {
            hopCounter.add()
            let accepted = queue.update { q in
                guard !q.stopped else { return false }
                q.items.append(.frame(job))
                return true
            }
            guard accepted else { throw .shutDown }
            job.waitUntilDone()
        }
        if let e = job.error { throw e }
    }

    /// Runs what is queued, then ends the thread. Blocks until it has ended.
    func stop() {
        let join = queue.update { q in
            q.stopped = true
            defer { q.joined = true }
            return !q.joined
        }
        guard join else { return }
        // Called from the render thread itself (a release queued there): it ends after this work item.
        if isCurrent { pthread_detach(handle); return }
        pthread_join(handle, nil)
    }

    private final class Slot<T>: @unchecked Sendable { var result: Result<T, GPUError>? }   // written by the render thread before the caller's wait ends

    /// Holds the caller's closure until the render thread takes it, so no
    /// reference outlives `withoutActuallyEscaping`.
    private final class WorkBox<T>: @unchecked Sendable {   // the blocking hop: the caller waits until the render thread is done with it
        private var work: (() throws(GPUError) -> T)?
        init(_ work: @escaping () throws(GPUError) -> T) { self.work = work }
        /// Runs the closure and lets go of it before returning.
        func run() throws(GPUError) -> T {
            let w = work!
            work = nil
            return try w()
        }
        func drop() { work = nil }
    }
}

/// Mesa's llvmpipe reads the pending work of every context of the process
/// when a buffer or texture is mapped in one of them, while each context's
/// own thread changes its own (docs/ARCHITECTURE.md, "Threads"). So the
/// render threads of software contexts take turns, process-wide: each runs
/// an item, and its flushes and fence polls between items, inside its turn.
/// No render thread's item waits for another render thread, so a turn
/// always ends. On a GPU no turn is taken.
enum SoftwareTurn {
    private static let turn = Mutex(())

    static func during(_ taking: Bool, _ body: () -> Void) {
        guard taking else { body(); return }
        turn.withLock { _ in body() }
    }
}
