import DiptychCore
import Foundation
import Synchronization

/// Where a GPU-encoded output's reconstructed pictures go when
/// `DIPTYCH_GPU_ENCODER_RECONSTRUCTION` names a folder: one file an output,
/// `N-WxH.nv12` (N counting the process's GPU-encoded outputs from 1 in the
/// order they were opened), each picture as NV12 at the stream's size, in
/// decoding order. A decoder's pictures of that output must equal it byte for
/// byte (docs/ARCHITECTURE.md, "The GPU encoder"). Owns the file; never
/// writes over one that exists.
final class ReconstructionDump {
    private let handle: FileHandle
    let path: String

    private static let opened = Atomic<Int>(0)

    init(folder: String, width: Int, height: Int) throws(GPUError) {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder), isFolder.boolValue else {
            throw Self.refused(folder, "no such folder")
        }
        let n = Self.opened.add(1, ordering: .relaxed).newValue
        path = URL(fileURLWithPath: folder).appendingPathComponent("\(n)-\(width)x\(height).nv12").path
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw Self.refused(folder, "\(path): \(String(cString: strerror(errno)))")
        }
        handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
    }

    private static func refused(_ folder: String, _ reason: String) -> GPUError {
        .badSetting(ConfigurationError(field: "DIPTYCH_GPU_ENCODER_RECONSTRUCTION", value: folder, reason: reason))
    }

    /// Appends one picture.
    func append(_ picture: [UInt8]) throws(GPUError) {
        do { try handle.write(contentsOf: picture) } catch {
            throw .encode("writing the reconstruction to \(path): \(error.localizedDescription)")
        }
    }
}
