import CFFmpeg
#if canImport(Glibc)
import Glibc
#endif

/// An FFmpeg call that returned an error: which call, and its `AVERROR` code.
/// The owner types in this folder throw it; the media types turn it into a
/// `MediaError` that names the input or output.
struct FFmpegError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The FFmpeg function that failed (`avcodec_open2`, ...).
    let call: String
    /// The negative code it returned.
    let code: Int32

    init(_ call: String, code: Int32) { self.call = call; self.code = code }
    /// An allocation that returned NULL.
    static func outOfMemory(_ call: String) -> FFmpegError { FFmpegError(call, code: diptych_averror(ENOMEM)) }

    /// `avcodec_open2: Invalid argument`.
    var description: String { "\(call): \(message)" }
    /// What `av_strerror` says about `code`.
    var message: String { avErrorString(code) }
    var isEndOfFile: Bool { code == averrorEOF }
    var isTryAgain: Bool { code == averrorEAGAIN }
}

/// The one place an FFmpeg return code becomes an error: a negative `code`
/// throws an `FFmpegError` naming `call`; otherwise `code` is returned.
@discardableResult
func ffCheck(_ code: Int32, _ call: String) throws(FFmpegError) -> Int32 {
    guard code < 0 else { return code }
    throw FFmpegError(call, code: code)
}

/// FFmpeg error code → readable text (`av_strerror`).
func avErrorString(_ code: Int32) -> String {
    var buf = [CChar](repeating: 0, count: 256)
    return buf.withUnsafeMutableBufferPointer { b in
        av_strerror(code, b.baseAddress, b.count)
        return String(cString: b.baseAddress!)
    }
}

let averrorEAGAIN = diptych_averror(EAGAIN)
let averrorEOF = diptych_averror_eof()
let averrorENOSPC = diptych_averror(ENOSPC)
let averrorENOENT = diptych_averror(ENOENT)
let averrorEINVAL = diptych_averror(EINVAL)
let averrorENOSYS = diptych_averror(ENOSYS)
let averrorENOMEM = diptych_averror(ENOMEM)
let averrorETIMEDOUT = diptych_averror(ETIMEDOUT)
let averrorExit = diptych_averror_exit()
let averrorInvalidData = diptych_averror_invaliddata()
let avNoPTS = diptych_av_nopts_value()
