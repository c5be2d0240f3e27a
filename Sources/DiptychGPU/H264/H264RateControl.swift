import Foundation

/// Frame-level rate control of the GPU encoder (docs/ARCHITECTURE.md, "The
/// GPU encoder"): one QP a picture, chosen before its passes are recorded
/// from what the pictures already collected cost. Constant QP, or a target
/// bit rate with an optional VBV buffer (`maxrate`, `bufsize`) that live
/// outputs need: no picture may take more than the buffer holds.
///
/// The model is x264's: bits ≈ complexity / qscale, qscale = 0.85 · 2^((QP − 12) / 6),
/// with the complexity of P and IDR pictures followed apart (a moving
/// average that forgets in a few pictures, so a scene change is caught in
/// one or two). The bits of pictures still on the GPU are counted at their
/// prediction until they are collected.
struct H264RateControl {
    enum Mode: Hashable, Sendable {
        case constantQP(Int)
        case bitrate(target: Int, maxrate: Int?, bufsize: Int?)
    }

    let mode: Mode
    let fps: Double
    let pixels: Int
    static let minQP = 10, maxQP = 51
    /// The QP of IDR pictures below that of P pictures (x264's ipratio 1.4).
    static let keyframeOffset = 3

    private var complexityP: Double?
    private var complexityI: Double?
    private var lastQP: Int?
    /// Bits written minus bits budgeted, over the pictures collected.
    private(set) var debt = 0.0
    /// Bits the VBV buffer holds now (counting pictures in flight at their prediction).
    private(set) var buffer = 0.0
    private var inFlight: [Int: Double] = [:]
    private var nextTicket = 0

    init(mode: Mode, fps: Double, pixels: Int) {
        self.mode = mode; self.fps = max(1, fps); self.pixels = max(1, pixels)
        if case .bitrate(_, _, let bufsize?) = mode { buffer = 0.9 * Double(bufsize) }
    }

    static func qscale(_ qp: Int) -> Double { 0.85 * pow(2, Double(qp - 12) / 6) }
    static func qp(forQscale q: Double) -> Double { 12 + 6 * log2(q / 0.85) }

    /// A picture about to be encoded: its QP, and the ticket `encoded` is told with.
    mutating func plan(keyframe: Bool) -> (qp: Int, ticket: Int) {
        let ticket = nextTicket
        nextTicket += 1
        guard case .bitrate(let target, let maxrate, let bufsize) = mode else {
            if case .constantQP(let q) = mode { return (keyframe ? max(0, q - Self.keyframeOffset) : q, ticket) }
            return (26, ticket)
        }
        let perPicture = Double(target) / fps
        // Pay back what earlier pictures overspent over two seconds, within reason.
        let budget = min(max(perPicture - debt / (2 * fps), 0.3 * perPicture), 3 * perPicture)
        var qp: Double
        if let c = keyframe ? (complexityI ?? complexityP.map { $0 * 4 }) : complexityP {
            qp = Self.qp(forQscale: c / (keyframe ? budget * 3 : budget))
        } else {
            // No history: from the bits a pixel may take (0.1 bit a pixel is about QP 27 for camera video).
            let bpp = perPicture * (keyframe ? 3 : 1) / Double(pixels)
            qp = 27 - 6 * log2(max(bpp, 1e-4) / 0.1)
        }
        var q = Int(qp.rounded())
        if !keyframe, let last = lastQP { q = min(max(q, last - 4), last + 4) }
        q = min(max(q, Self.minQP), Self.maxQP)
        let c = keyframe ? (complexityI ?? complexityP.map { $0 * 4 }) : complexityP
        if let maxrate, let bufsize {
            // The buffer fills at maxrate; keep a tenth of it after this picture at its predicted size.
            buffer = min(Double(bufsize), buffer + Double(maxrate) / fps)
            if let c {
                while q < Self.maxQP && c / Self.qscale(q) > buffer - 0.1 * Double(bufsize) { q += 1 }
            }
        }
        if !keyframe { lastQP = q }
        let predicted = c.map { $0 / Self.qscale(q) } ?? perPicture * (keyframe ? 3 : 1)
        inFlight[ticket] = predicted
        if maxrate != nil, bufsize != nil { buffer -= predicted }
        return (q, ticket)
    }

    /// A collected picture: what it cost at the QP it was planned with.
    mutating func encoded(ticket: Int, bits: Int, qp: Int, keyframe: Bool) {
        guard case .bitrate(let target, let maxrate, let bufsize) = mode else { return }
        let predicted = inFlight.removeValue(forKey: ticket) ?? Double(bits)
        let c = Double(bits) * Self.qscale(qp)
        if keyframe { complexityI = complexityI.map { 0.5 * $0 + 0.5 * c } ?? c }
        else { complexityP = complexityP.map { 0.6 * $0 + 0.4 * c } ?? c }
        debt += Double(bits) - Double(target) / fps
        if maxrate != nil, let bufsize {
            buffer = min(Double(bufsize), buffer + predicted - Double(bits))
        }
    }
}
