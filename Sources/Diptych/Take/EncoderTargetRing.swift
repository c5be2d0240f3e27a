import Foundation
import DiptychCore
import DiptychGPU
import DiptychMedia

/// One buffer of an output's encoder-target ring: an NV12 dma-buf, known to
/// its device by `id`.
struct EncoderTargetBuffer: Hashable, Sendable {
    var id: Int
    var frame: DmaBufFrame
}

/// Every GBM, EGL and VA-API call of the zero-copy path, in the order of a
/// frame's life (docs/ARCHITECTURE.md, "Encoder paths"): allocate → import →
/// render → fence → hand to the encoder → release → (reuse or) free. The real
/// one is `GBMVATargets`; tests drive the ring against fakes.
protocol ZeroCopyDevice: AnyObject, Sendable {
    /// GBM: an NV12 buffer of `size` laid out with `modifier`.
    func allocate(size: PixelSize, modifier: UInt64) throws(GPUError) -> EncoderTargetBuffer
    /// EGL: the buffer's planes (R8 and GR88 images) as render targets of the output.
    func importTarget(_ buffer: EncoderTargetBuffer) throws(GPUError)
    /// VA-API: the encoder's driver takes the buffer as a surface and encodes it (setup's trial).
    func checkEncoder(_ buffer: EncoderTargetBuffer) throws(MediaError)
    /// GL: converts the output's render target into the buffer and fences it;
    /// returns the fence's submission serial.
    func render(into buffer: EncoderTargetBuffer) throws(GPUError) -> UInt64
    /// GL: whether the fence has signalled; `wait` blocks until it has.
    func fenceSignalled(_ fence: UInt64, wait: Bool) throws(GPUError) -> Bool
    /// VA-API: hands the buffer to the encoder; `release` runs once it no longer reads it.
    func encode(_ buffer: EncoderTargetBuffer, pts: MediaTime, release: EncoderRelease)
    /// EGL, then GBM: forgets the render targets, frees the buffer.
    func free(_ buffer: EncoderTargetBuffer)
}

/// The encoder's "done with this buffer": runs its action exactly once, from
/// whichever thread calls it first, or when the last reference goes (a frame
/// dropped on any path still gives its buffer back).
final class EncoderRelease: @unchecked Sendable {
    private let lock = NSLock()
    private var action: (() -> Void)?
    init(_ action: @escaping () -> Void) { self.action = action }
    func callAsFunction() {
        lock.lock(); let a = action; action = nil; lock.unlock()
        a?()
    }
    deinit { action?() }
}

/// One output's ring of encoder targets (docs/ARCHITECTURE.md, "Encoder
/// paths"). Each frame is converted into a free buffer and fenced; once the
/// fence has signalled the buffer goes to the encoder, in submission order;
/// it is free again only when the encoder has released it. So no buffer is
/// written while the GPU or the encoder may still read it. `render` and
/// `deliver` run on the take's thread; releases come from the encoder's.
final class EncoderTargetRing: @unchecked Sendable {
    enum SlotState: Equatable {
        case free
        /// Being converted into (between `acquire` and its fence).
        case rendering
        case fenced(UInt64, MediaTime)
        /// Handed to the encoder, not yet released.
        case encoding
    }

    let device: any ZeroCopyDevice
    let buffers: [EncoderTargetBuffer]
    private let cond = NSCondition()
    private var states: [SlotState]
    /// Fenced slots, oldest first.
    private var order: [Int] = []
    private var closing = false
    private var freed: Set<Int> = []
    private var _handedOver = 0

    /// Buffers for `queueDepth` frames waiting in the encoder's queue, the
    /// `encoderHold` frames the encoder reads at once (VA-API: its
    /// `async_depth` plus the picture being encoded and any B-frames held back)
    /// and `gpuInFlight` frames fenced but not yet handed over.
    static func size(queueDepth: Int, encoderHold: Int, gpuInFlight: Int) -> Int {
        max(2, queueDepth + encoderHold + gpuInFlight)
    }

    /// Allocates and imports `count` buffers; on a failure, frees those made.
    init(device: any ZeroCopyDevice, size: PixelSize, modifier: UInt64, count: Int) throws(GPUError) {
        self.device = device
        var made: [EncoderTargetBuffer] = []
        do throws(GPUError) {
            for _ in 0..<count {
                let b = try device.allocate(size: size, modifier: modifier)
                made.append(b)
                try device.importTarget(b)
            }
        } catch {
            for b in made { device.free(b) }
            throw error
        }
        buffers = made
        states = Array(repeating: .free, count: count)
    }

    var count: Int { buffers.count }

    /// Frames handed to the encoder so far (by `deliver`, or by `render` making room).
    var handedOver: Int { cond.lock(); defer { cond.unlock() }; return _handedOver }

    /// Slots in each state (tests, diagnostics).
    var snapshot: [SlotState] { cond.lock(); defer { cond.unlock() }; return states }

    /// Converts the output's render target into a free buffer and fences it.
    /// While none is free it hands over frames whose fence has signalled,
    /// then waits for the oldest fence, then for the encoder to release one.
    func render(pts: MediaTime) throws(GPUError) {
        let slot = try acquire()
        let fence: UInt64
        do { fence = try device.render(into: buffers[slot]) } catch {
            cond.lock(); states[slot] = .free; cond.unlock()
            throw error
        }
        cond.lock()
        states[slot] = .fenced(fence, pts)
        order.append(slot)
        cond.unlock()
    }

    private func acquire() throws(GPUError) -> Int {
        while true {
            cond.lock()
            if let i = states.firstIndex(of: .free) { states[i] = .rendering; cond.unlock(); return i }
            let anyFenced = !order.isEmpty
            cond.unlock()
            if anyFenced {
                if try deliver(wait: false) == 0 { _ = try deliverOldest(wait: true) }
                continue
            }
            cond.lock()
            while !states.contains(.free) { cond.wait() }
            cond.unlock()
        }
    }

    /// Hands every frame whose fence has signalled to the encoder, oldest
    /// first (with `wait`, every fenced frame). Returns how many went.
    @discardableResult
    func deliver(wait: Bool) throws(GPUError) -> Int {
        var n = 0
        while try deliverOldest(wait: wait) { n += 1 }
        return n
    }

    private func deliverOldest(wait: Bool) throws(GPUError) -> Bool {
        cond.lock()
        guard let slot = order.first, case .fenced(let fence, let pts) = states[slot] else { cond.unlock(); return false }
        cond.unlock()
        guard try device.fenceSignalled(fence, wait: wait) else { return false }
        cond.lock()
        order.removeFirst()
        states[slot] = .encoding
        _handedOver += 1
        cond.unlock()
        device.encode(buffers[slot], pts: pts, release: EncoderRelease { [weak self] in self?.released(slot) })
        return true
    }

    private func released(_ slot: Int) {
        cond.lock()
        precondition(states[slot] == .encoding, "encoder released buffer \(slot) it did not hold")
        states[slot] = .free
        let free = closing && freed.insert(slot).inserted
        cond.broadcast()
        cond.unlock()
        if free { device.free(buffers[slot]) }
    }

    /// Frames rendered but not handed over: dropped (after a lost context
    /// they are rendered again). Their buffers are free at once; the GPU
    /// that could still write them is gone.
    func abandonUndelivered() -> [MediaTime] {
        cond.lock(); defer { cond.unlock() }
        var dropped: [MediaTime] = []
        for slot in order {
            if case .fenced(_, let pts) = states[slot] { dropped.append(pts) }
            states[slot] = .free
        }
        order.removeAll()
        cond.broadcast()
        return dropped
    }

    /// Imports every buffer again (a rebuilt context has none of the old images).
    func reimport() throws(GPUError) {
        for b in buffers { try device.importTarget(b) }
    }

    /// Frees every buffer the encoder does not hold now, and each other one
    /// when the encoder releases it. Call once the output's frames are
    /// delivered (or abandoned).
    func shutdown() {
        cond.lock()
        closing = true
        var now: [Int] = []
        for (i, s) in states.enumerated() where s != .encoding && freed.insert(i).inserted { now.append(i) }
        order.removeAll()
        cond.unlock()
        for i in now { device.free(buffers[i]) }
    }
}
