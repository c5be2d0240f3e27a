import CCUDA
import CVulkan
import Glibc

/// Vulkan on a CUDA context's device, there only to make the binary
/// semaphores GL signals and CUDA waits on when GL writes memory CUDA reads
/// (GL_EXT_external_objects: a fence orders GL's own work; handing memory to
/// another API takes a semaphore naming it, and neither GL nor CUDA can make
/// one). Opened once per device; kept while any of its semaphores lives
/// (docs/ARCHITECTURE.md, "NV12 read back through CUDA").
public final class VulkanSemaphoreDevice: @unchecked Sendable {
    public let context: CUDAPrimaryContext
    fileprivate var vk = diptych_vk()

    /// Vulkan on the physical device whose UUID is the context's device's.
    public init(context: CUDAPrimaryContext) throws(CUDAError) {
        self.context = context
        let api = context.driver.api.pointee
        guard let getUUID = api.cuDeviceGetUuid else {
            throw CUDAError(call: "cuDeviceGetUuid", code: -1, name: "missing from this driver")
        }
        var uuid = CUuuid()
        try context.driver.check(getUUID(&uuid, context.device), "cuDeviceGetUuid")
        var why = [CChar](repeating: 0, count: 256)
        let r = withUnsafeBytes(of: &uuid) { u in diptych_vk_open(&vk, u.baseAddress!.assumingMemoryBound(to: UInt8.self), &why) }
        guard r == 0 else { throw CUDAError(call: "Vulkan", code: -1, name: text(why)) }
    }

    /// A new semaphore: its Vulkan object, a descriptor for GL's import, and CUDA's import.
    public func makeSemaphore() throws(CUDAError) -> SharedSemaphore {
        var handle: UnsafeMutableRawPointer?
        var fds: [Int32] = [-1, -1]
        var why = [CChar](repeating: 0, count: 256)
        guard diptych_vk_semaphore(&vk, &handle, &fds, &why) == 0 else { throw CUDAError(call: "Vulkan", code: -1, name: text(why)) }
        let made = VulkanSemaphore(device: self, handle: handle)
        let cuda: CUDAExternalSemaphore
        do throws(CUDAError) { cuda = try CUDAExternalSemaphore(context: context, descriptor: fds[1]) } catch {
            close(fds[0])
            throw error
        }
        return SharedSemaphore(vulkan: made, glDescriptor: fds[0], cuda: cuda)
    }

    deinit { diptych_vk_close(&vk) }
}

/// One binary semaphore as its makers and users hold it: Vulkan's object, a
/// descriptor for GL's import (whoever imports it owns it), CUDA's import.
public struct SharedSemaphore: @unchecked Sendable {
    public let vulkan: VulkanSemaphore
    public let glDescriptor: Int32
    public let cuda: CUDAExternalSemaphore
}

/// A Vulkan semaphore made to be exported (destroyed when it goes; the
/// imports keep the payload).
public final class VulkanSemaphore: @unchecked Sendable {
    let device: VulkanSemaphoreDevice
    private let handle: UnsafeMutableRawPointer?

    fileprivate init(device: VulkanSemaphoreDevice, handle: UnsafeMutableRawPointer?) { self.device = device; self.handle = handle }

    deinit { diptych_vk_semaphore_free(&device.vk, handle) }
}

/// CUDA's import of a semaphore (an opaque descriptor), waited on by the
/// copies that read what GL wrote before signalling it.
public final class CUDAExternalSemaphore: @unchecked Sendable {
    let context: CUDAPrimaryContext
    let raw: CUexternalSemaphore

    /// Imports `descriptor`; CUDA owns it once this succeeds (closed here if it fails).
    init(context: CUDAPrimaryContext, descriptor: Int32) throws(CUDAError) {
        self.context = context
        let api = context.driver.api.pointee
        guard let importSemaphore = api.cuImportExternalSemaphore, api.cuDestroyExternalSemaphore != nil,
              api.cuWaitExternalSemaphoresAsync != nil else {
            close(descriptor)
            throw CUDAError(call: "cuImportExternalSemaphore", code: -1, name: "missing from this driver")
        }
        var desc = CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC()
        desc.type = CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD
        desc.handle.fd = descriptor
        var s: CUexternalSemaphore?
        do throws(CUDAError) {
            try context.push()
            defer { context.pop() }
            try context.driver.check(importSemaphore(&s, &desc), "cuImportExternalSemaphore")
        } catch {
            close(descriptor)
            throw error
        }
        raw = s!
    }

    /// Queues a wait for the semaphore on `stream` (the context current).
    func queueWait(on stream: CUstream?) throws(CUDAError) {
        var params = CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS()
        var s: CUexternalSemaphore? = raw
        try context.driver.check(context.driver.api.pointee.cuWaitExternalSemaphoresAsync(&s, &params, 1, stream),
                                 "cuWaitExternalSemaphoresAsync")
    }

    deinit {
        guard (try? context.push()) != nil else { return }
        _ = context.driver.api.pointee.cuDestroyExternalSemaphore(raw)
        context.pop()
    }
}
