import CFFmpeg
import DiptychCore
import Foundation

/// FFmpeg's own messages about one object while it is being opened (an
/// encoder says why it did not open in its log, not in its error code),
/// kept besides going where FFmpeg's messages always go. One at a time in a
/// process (a second waits for the first to end); `end` stops it (a capture
/// of no object keeps nothing).
final class FFLogCapture {
    private let capture: UnsafeMutablePointer<diptych_log_capture>?
    private let buffer: UnsafeMutablePointer<CChar>?
    private var capturing: Bool
    private static let size = 4096
    /// The one capture slot of the process, true while taken (no thread affinity: ended on any thread).
    private static let slot = Condition(false)

    init(object: UnsafeRawPointer?) {
        guard let object else { capture = nil; buffer = nil; capturing = false; return }
        let c = UnsafeMutablePointer<diptych_log_capture>.allocate(capacity: 1)
        let b = UnsafeMutablePointer<CChar>.allocate(capacity: FFLogCapture.size)
        FFLogCapture.slot.wait(until: { !$0 }) { taken, _ in taken = true }
        diptych_log_capture_begin(c, object, b, FFLogCapture.size)
        capture = c; buffer = b; capturing = true
    }

    /// Stops keeping messages (again: nothing).
    func end() {
        guard capturing else { return }
        capturing = false
        diptych_log_capture_end()
        FFLogCapture.slot.update { $0 = false }
    }

    /// What was kept, one message a line.
    var text: String { buffer.map { String(cString: $0) }?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "" }

    deinit {
        end()
        capture?.deallocate()
        buffer?.deallocate()
    }
}
