import Foundation
import Synchronization
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
final class EncoderRelease: Sendable {
    private let action: Mutex<(() -> Void)?>
    init(_ action: sending @escaping () -> Void) { self.action = Mutex(action) }
    func callAsFunction() {
        let a = action.withLock { a in defer { a = nil }; return a }
        a?()
    }
    deinit { action.withLock { $0 }?() }
}

/// One output's ring of encoder targets (docs/ARCHITECTURE.md, "Encoder
/// paths"). Each frame is converted into a free buffer and fenced; once the
/// fence has signalled the buffer goes to the encoder, in submission order;
/// it is free again only when the encoder has released it. So no buffer is
/// written while the GPU or the encoder may still read it. `render` and
/// `deliver` run on the take's thread; releases come from the encoder's.
final class EncoderTargetRing: Sendable {
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
    private struct Slots {
        var states: [SlotState]
        /// Fenced slots, oldest first.
        var order: [Int] = []
        var closing = false
        var freed: Set<Int> = []
        var handedOver = 0
    }
    /// Waited on for a free slot (the encoder's releases).
    private let slots: Condition<Slots>

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
        slots = Condition(Slots(states: Array(repeating: .free, count: count)))
    }

    var count: Int { buffers.count }

    /// Frames handed to the encoder so far (by `deliver`, or by `render` making room).
    var handedOver: Int { slots.withLock { $0.handedOver } }

    /// Slots in each state (tests, diagnostics).
    var snapshot: [SlotState] { slots.withLock { $0.states } }

    /// Converts the output's render target into a free buffer and fences it.
    /// While none is free it hands over frames whose fence has signalled,
    /// then waits for the oldest fence, then for the encoder to release one.
    func render(pts: MediaTime) throws(GPUError) {
        let slot = try acquire()
        let fence: UInt64
        do { fence = try device.render(into: buffers[slot]) } catch {
            slots.withLock { $0.states[slot] = .free }
            throw error
        }
        slots.withLock {
            $0.states[slot] = .fenced(fence, pts)
            $0.order.append(slot)
        }
    }

    private func acquire() throws(GPUError) -> Int {
        while true {
            let (taken, anyFenced) = slots.withLock { s -> (Int?, Bool) in
                guard let i = s.states.firstIndex(of: .free) else { return (nil, !s.order.isEmpty) }
                s.states[i] = .rendering
                return (i, false)
            }
            if let taken { return taken }
            if anyFenced {
                if try deliver(wait: false) == 0 { _ = try deliverOldest(wait: true) }
                continue
            }
            slots.wait(until: { $0.states.contains(.free) })
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
        let oldest = slots.withLock { s -> (slot: Int, fence: UInt64, pts: MediaTime)? in
            guard let slot = s.order.first, case .fenced(let fence, let pts) = s.states[slot] else { return nil }
            return (slot, fence, pts)
        }
        guard let (slot, fence, pts) = oldest else { return false }
        guard try device.fenceSignalled(fence, wait: wait) else { return false }
        slots.withLock { s in
            s.order.removeFirst()
            s.states[slot] = .encoding
            s.handedOver += 1
        }
        device.encode(buffers[slot], pts: pts, release: EncoderRelease { [weak self] in self?.released(slot) })
        return true
    }

    private func released(_ slot: Int) {
        let free = slots.update { s in
            precondition(s.states[slot] == .encoding, "encoder released buffer \(slot) it did not hold")
            s.states[slot] = .free
            return s.closing && s.freed.insert(slot).inserted
        }
        if free { device.free(buffers[slot]) }
    }

    /// Frames rendered but not handed over: dropped (after a lost context
    /// they are rendered again). Their buffers are free at once; the GPU
    /// that could still write them is gone.
    func abandonUndelivered() -> [MediaTime] {
        slots.update { s in
            var dropped: [MediaTime] = []
            for slot in s.order {
                if case .fenced(_, let pts) = s.states[slot] { dropped.append(pts) }
                s.states[slot] = .free
            }
            s.order.removeAll()
            return dropped
        }
    }

    /// Imports every buffer again (a rebuilt context has none of the old images).
    func reimport() throws(GPUError) {
        for b in buffers { try device.importTarget(b) }
    }

    /// Frees every buffer the encoder does not hold now, and each other one
    /// when the encoder releases it. Call once the output's frames are
    /// delivered (or abandoned).
    func shutdown() {
        let now = slots.withLock { s -> [Int] in
            s.closing = true
            var now: [Int] = []
            for (i, state) in s.states.enumerated() where state != .encoding && s.freed.insert(i).inserted { now.append(i) }
            s.order.removeAll()
            return now
        }
        for i in now { device.free(buffers[i]) }
    }
}
