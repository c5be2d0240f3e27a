import CEGL
#if canImport(Glibc)
import Glibc
#endif

extension DisplayLadder {
    /// `GPUError.noSuchDevice` when `selection` names a device this machine
    /// does not have: a render node that does not exist, an index past the
    /// EGL devices (or, with `gbm:N`, past the render nodes). A device that
    /// exists but fails to open is the ladder's to report (`noDisplay`).
    static func missingDevice(_ selection: GPUSelection) -> GPUError? {
        let named = selection.description
        switch selection.device {
        case .auto, .software:
            return nil
        case .renderNode(let path):
            var st = stat()
            guard stat(path, &st) != 0, errno == ENOENT || errno == ENOTDIR else { return nil }
            let nodes = drmRenderNodes()
            return .noSuchDevice(selection: named, reason: "no such render node ("
                                 + (nodes.isEmpty ? "this machine has none" : "this machine has \(nodes.joined(separator: ", "))") + ")")
        case .index(let n):
            switch selection.platform {
            case .gbm:
                let count = drmRenderNodes().count
                guard n >= count else { return nil }
                return .noSuchDevice(selection: named, reason: "no render node \(n) (\(listed(count, "render node")))")
            case .surfaceless:
                return nil  // surfaceless picks its own device
            case .device, nil:
                let client = EGLClientProcs.load()
                guard client.extensions.contains("EGL_EXT_platform_device"), let query = client.queryDevices else { return nil }
                var count: EGLint = 0
                guard query(0, nil, &count) == EGLBoolean(EGL_TRUE), n >= Int(count) else { return nil }
                return .noSuchDevice(selection: named, reason: "no EGL device \(n) (\(listed(Int(count), "EGL device")))")
            }
        }
    }

    /// "2 EGL devices: 0 to 1", "1 render node: 0", "no EGL device".
    private static func listed(_ count: Int, _ what: String) -> String {
        switch count {
        case 0: return "this machine has no \(what)"
        case 1: return "this machine has 1 \(what): 0"
        default: return "this machine has \(count) \(what)s: 0 to \(count - 1)"
        }
    }
}
