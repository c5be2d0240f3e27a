import DiptychCore
import Foundation
import DiptychCUDA

/// A texture set's textures registered with CUDA (`cuGraphicsGLRegisterImage`,
/// once per set), unregistered before the textures are deleted
/// (`StreamPicture.release`). Render thread only.
final class CUDARegistration {
    let calls: any CUDAGLCalls
    let resources: [CUDAGraphicsResource]
    /// Mapped for CUDA now (GL must not touch the textures).
    var mapped = false

    init(textures: [UInt32], calls: any CUDAGLCalls) throws(CUDAError) {
        self.calls = calls
        var done: [CUDAGraphicsResource] = []
        for t in textures {
            do throws(CUDAError) { done.append(try calls.register(texture: t)) } catch {
                for r in done { calls.unregister(r) }
                throw error
            }
        }
        resources = done
    }

    func unregister() {
        let current = (try? calls.begin()) != nil
        if mapped { try? calls.unmap(resources); mapped = false }
        for r in resources { calls.unregister(r) }
        if current { calls.end() }
    }
}

/// CUDA frames waiting to go into stream textures, from every compositor of
/// one GL context (they share its render thread): `flush` copies all of them
/// with one `cuGraphicsMapResources` and one unmap for all their planes, since
/// each map/unmap costs about the same whatever it maps (≈ 0.33 ms on an
/// H200: 3,000 planes a second one at a time, 18,600 eight at a time). The
/// copies are device to device on the interop's stream; the unmap makes the
/// GL work issued after it wait for them, so the fence after the frame's
/// draws also covers the copies (docs/ARCHITECTURE.md, "Lifetimes end at
/// fence completion"). Render thread only.
final class CUDATextureUploads {
    let calls: any CUDAGLCalls
    private var queued: [(set: StreamPicture, frame: CUDAFrame, owner: ObjectIdentifier?)] = []

    init(calls: any CUDAGLCalls) { self.calls = calls }

    /// The driver's interop on CUDA device `ordinal` (its primary context, a stream of its own).
    static func driver(ordinal: Int) throws(GPUError) -> CUDATextureUploads {
        let driver: CUDADriver
        switch CUDADriver.shared {
        case .success(let d): driver = d
        case .failure(let e): throw .cudaInterop(e.reason)
        }
        do {
            return CUDATextureUploads(calls: try CUDAGLInterop(context: try driver.primaryContext(ordinal: ordinal)))
        } catch {
            throw .cudaInterop("\(error)")
        }
    }

    var isEmpty: Bool { queued.isEmpty }

    /// Queues `frame`'s planes for `set`'s textures (registered with CUDA the
    /// first time). The GL context is current.
    func enqueue(_ frame: CUDAFrame, into set: StreamPicture, owner: AnyObject? = nil) throws(GPUError) {
        guard frame.device == calls.ordinal else {
            throw .cudaInterop("the frame is on CUDA device \(frame.device), the compositor's GL context on device \(calls.ordinal)")
        }
        try register(set)
        queued.append((set, frame, owner.map(ObjectIdentifier.init)))
    }

    private func register(_ set: StreamPicture) throws(GPUError) {
        guard set.cuda == nil else { return }
        do throws(CUDAError) {
            try calls.begin()
            defer { calls.end() }
            set.cuda = try CUDARegistration(textures: set.textures, calls: calls)
        } catch {
            throw .cudaInterop("\(error)")
        }
    }

    /// Copies every queued frame: one map of all their textures, a 2D copy
    /// per plane, one unmap. On a failure every copy already issued has
    /// completed before this throws (the frames they read may then go).
    func flush() throws(GPUError) {
        guard !queued.isEmpty else { return }
        let work = queued
        queued.removeAll()
        let sets = work.map(\.set).compactMap(\.cuda)
        let toMap = sets.filter { !$0.mapped }
        do throws(CUDAError) { try calls.begin() } catch { throw .cudaInterop("\(error)") }
        defer { calls.end() }
        do throws(CUDAError) {
            if !toMap.isEmpty {
                try calls.map(toMap.flatMap(\.resources))
                for r in toMap { r.mapped = true }
            }
            for (set, frame, _) in work {
                for (i, r) in (set.cuda?.resources ?? []).enumerated() {
                    let shape = set.planeShape(i)
                    try calls.copy(CUDAPlaneCopy(source: frame.planes[i].address, sourcePitch: frame.planes[i].pitch,
                                                 destination: try calls.array(of: r), widthBytes: shape.rowBytes, rows: shape.height))
                }
            }
            try calls.unmap(sets.flatMap(\.resources))
            for r in sets { r.mapped = false }
        } catch {
            // Whatever this flush left mapped is unmapped: the sets are current now and GL draws them next.
            let mapped = sets.filter(\.mapped)
            if !mapped.isEmpty { try? calls.unmap(mapped.flatMap(\.resources)) }
            for r in mapped { r.mapped = false }
            calls.synchronize()
            throw .cudaInterop("\(error)")
        }
    }

    /// Drops what is queued (a lost context, a shut-down compositor).
    func drop() { queued.removeAll() }

    /// Takes back the copies `owner` queued (its hop failed before the flush).
    func drop(owner: AnyObject) {
        let id = ObjectIdentifier(owner)
        queued.removeAll { $0.owner == id }
    }
}

extension StreamPicture {
    /// Plane `i`'s GL shape (bytes per texel and size), 16-bit planes included.
    func planeShape(_ i: Int) -> PlaneShape {
        var s = (format ?? .nv12).planeShapes(width: width, height: height)[i]
        if sixteenBit { s.bytesPerPixel *= 2 }
        return s
    }
}
