import CGLES
import DiptychCore
import DiptychCUDA
import Foundation
import Testing
@testable import DiptychGPU

/// `CUDATextureUploads.premap`: each flush maps the set the stream's next
/// frame goes into, after this batch's copies and before its GL work; the next
/// frame's copy then needs no map of its own. The pictures are those of the
/// path without it, no GL upload or draw touches a mapped set, and every
/// mapped set is unmapped before it is unregistered.
extension GPU {
    @Suite struct CUDAPremap {
        static let canvas = PixelSize(width: 64, height: 48)
        static let plan = CompositionPlan(canvas: canvas, draws: [DrawDescription(role: .primary, destination: PixelRect(size: canvas))])

        private func frames(premap: Bool, count: Int, interop: HostInterop) throws -> [VideoFrame] {
            let released = HostCUDAFrame.Released()
            let c = try makeCompositor(hooks: GPUTestHooks(cudaCalls: { _ in interop }, cudaPremap: premap), readbackDepth: 2)
            defer { c.shutdown() }
            #expect(c.paths.description.contains("CUDA frames' texture sets mapped ahead") == premap, "the path is named: \(c.paths)")
            let out = try c.addOutput(canvas: Self.canvas)
            var got: [VideoFrame] = []
            for i in 0..<count {
                let f = HostCUDAFrame(GPU.CUDAUploads.nv12(64, 48, seed: i), released: released)
                try c.upload(f.frame, holder: f, role: .primary)
                try c.render(output: out, plan: Self.plan, pts: MediaTime(value: Int64(i), timescale: 30))
                if premap && i > 0 {
                    let reserved = try c.withRenderer { r in r.textures.streams[.primary]!.reserved.map(\.textures) }
                    #expect(reserved.map { Set($0).isSubset(of: interop.mappedTextures) } == true, "frame \(i): the next set is mapped")
                    let current = try c.withRenderer { r in r.textures.streams[.primary]!.current!.textures }
                    #expect(interop.mappedTextures.isDisjoint(with: current), "frame \(i): the set drawn is mapped")
                }
                got += try c.flush()
            }
            return got
        }

        @Test func theNextFramesSetIsMappedAheadAndThePicturesAreTheSame() throws {
            let plain = HostInterop(), ahead = HostInterop()
            let a = try frames(premap: false, count: 5, interop: plain)
            let b = try frames(premap: true, count: 5, interop: ahead)
            #expect(a.count == 5 && b.count == 5)
            for (i, (x, y)) in zip(a, b).enumerated() {
                let same = GPU.CUDAUploads.nv12Bytes(x) == GPU.CUDAUploads.nv12Bytes(y)
                #expect(same, "frame \(i) differs")
            }
            #expect(plain.maps == [2, 2, 2, 2, 2] && plain.unmaps == [2, 2, 2, 2, 2])
            // The first flush maps its own set and the next one; every later one only the next.
            #expect(ahead.maps == [2, 2, 2, 2, 2, 2], "\(ahead.calls)")
            #expect(Array(ahead.calls.prefix(5)) == ["map 2", "copy", "copy", "unmap 2", "map 2"])
            #expect(Array(ahead.calls.dropFirst(5).prefix(4)) == ["copy", "copy", "unmap 2", "map 2"], "no map before the second frame's copies")
            #expect(ahead.mappedTextures.isEmpty, "the set mapped ahead was unmapped at shutdown")
            #expect(Set(ahead.unregistered) == Set(ahead.registered))
        }

        /// A frame from host memory after CUDA frames goes into a set that is
        /// not mapped; the set mapped ahead waits, mapped, for the next CUDA frame.
        /// What the compositor makes of `frame` uploaded from host memory.
        private func reference(_ frame: VideoFrame) throws -> [UInt8] {
            let c = try makeCompositor()
            defer { c.shutdown() }
            let out = try c.addOutput(canvas: Self.canvas)
            try c.upload(frame, role: .primary)
            try c.render(output: out, plan: Self.plan, pts: .zero)
            return GPU.CUDAUploads.nv12Bytes(try #require(try c.flush().first))
        }

        @Test func aHostUploadNeverWritesTheMappedSet() throws {
            let interop = HostInterop(), released = HostCUDAFrame.Released()
            let c = try makeCompositor(hooks: GPUTestHooks(cudaCalls: { _ in interop }, cudaPremap: true), readbackDepth: 2)
            defer { c.shutdown() }
            let out = try c.addOutput(canvas: Self.canvas)
            let f = HostCUDAFrame(GPU.CUDAUploads.nv12(64, 48, seed: 1), released: released)
            try c.upload(f.frame, holder: f, role: .primary)
            try c.render(output: out, plan: Self.plan, pts: .zero)
            _ = try c.flush()
            let reserved = try #require(try c.withRenderer { r in r.textures.streams[.primary]!.reserved?.textures })
            let host = GPU.CUDAUploads.nv12(64, 48, seed: 7)
            try c.upload(host, role: .primary)
            try c.render(output: out, plan: Self.plan, pts: MediaTime(value: 1, timescale: 30))
            let got = try #require(try c.flush().first)
            let hostPicture = try reference(host)
            #expect(GPU.CUDAUploads.nv12Bytes(got) == hostPicture, "the host frame's picture")
            let current = try c.withRenderer { r in r.textures.streams[.primary]!.current!.textures }
            #expect(current != reserved && Set(reserved).isSubset(of: interop.mappedTextures))
            // The next CUDA frame takes the set mapped ahead without mapping anything first.
            let maps = interop.maps.count
            let g = HostCUDAFrame(GPU.CUDAUploads.nv12(64, 48, seed: 2), released: released)
            try c.upload(g.frame, holder: g, role: .primary)
            try c.render(output: out, plan: Self.plan, pts: MediaTime(value: 2, timescale: 30))
            let last = try #require(try c.flush().first)
            let cudaPicture = try reference(GPU.CUDAUploads.nv12(64, 48, seed: 2))
            #expect(GPU.CUDAUploads.nv12Bytes(last) == cudaPicture, "the CUDA frame's picture")
            #expect(try c.withRenderer { r in r.textures.streams[.primary]!.current!.textures } == reserved)
            #expect(interop.maps.count == maps + 1, "only the next set mapped: \(interop.calls.suffix(5))")
        }

        /// A map that fails in a batch that also uses a set mapped ahead
        /// leaves nothing mapped (those sets are current and drawn next), and
        /// the compositor goes on.
        @Test func aFailedMapLeavesNothingMapped() throws {
            let interop = HostInterop(), released = HostCUDAFrame.Released()
            let c = try makeCompositor(hooks: GPUTestHooks(cudaCalls: { _ in interop }, cudaPremap: true), readbackDepth: 2)
            defer { c.shutdown() }
            let out = try c.addOutput(canvas: Self.canvas)
            let two = CompositionPlan(canvas: Self.canvas, draws: [
                DrawDescription(role: .primary, destination: PixelRect(size: Self.canvas)),
                DrawDescription(role: .secondary, destination: PixelRect(x: 32, y: 24, width: 32, height: 24), zIndex: 1)])
            let p = HostCUDAFrame(GPU.CUDAUploads.nv12(64, 48, seed: 1), released: released)
            try c.upload(p.frame, holder: p, role: .primary)
            try c.render(output: out, plan: two, pts: .zero)
            _ = try c.flush()
            #expect(!interop.mappedTextures.isEmpty, "the primary's next set is mapped ahead")
            interop.failMap = true
            let q = HostCUDAFrame(GPU.CUDAUploads.nv12(64, 48, seed: 2), released: released)
            let s2 = HostCUDAFrame(GPU.CUDAUploads.nv12(32, 24, seed: 3), released: released)
            try c.upload(q.frame, holder: q, role: .primary)
            try c.upload(s2.frame, holder: s2, role: .secondary)
            #expect(throws: GPUError.self) { try c.render(output: out, plan: two, pts: MediaTime(value: 1, timescale: 30)) }
            #expect(interop.mappedTextures.isEmpty, "left mapped after the failure: \(interop.calls.suffix(4))")
            interop.failMap = false
            let host = GPU.CUDAUploads.nv12(64, 48, seed: 4)
            try c.upload(host, role: .primary)
            try c.render(output: out, plan: Self.plan, pts: MediaTime(value: 2, timescale: 30))
            #expect(GPU.CUDAUploads.nv12Bytes(try #require(try c.flush().first)) == (try reference(host)))
            c.shutdown()
            #expect(Set(interop.unregistered) == Set(interop.registered))
        }

        /// A frame of another size finds no fitting set mapped ahead: the old
        /// one is unmapped before it is unregistered, the new size maps as it comes.
        @Test func anotherSizeReleasesTheMappedSet() throws {
            let interop = HostInterop(), released = HostCUDAFrame.Released()
            let c = try makeCompositor(hooks: GPUTestHooks(cudaCalls: { _ in interop }, cudaPremap: true), readbackDepth: 2)
            defer { c.shutdown() }
            let out = try c.addOutput(canvas: Self.canvas)
            for (i, (w, h)) in [(64, 48), (64, 48), (32, 24), (32, 24)].enumerated() {
                let f = HostCUDAFrame(GPU.CUDAUploads.nv12(w, h, seed: i), released: released)
                try c.upload(f.frame, holder: f, role: .primary)
                try c.render(output: out, plan: Self.plan, pts: MediaTime(value: Int64(i), timescale: 30))
                _ = try c.flush()
            }
            let old = try c.withRenderer { (r: GPURenderer) -> [GLuint] in
                r.textures.streams[StreamRole.primary]!.pool.filter { $0.width == 64 }.flatMap { $0.textures }
            }
            #expect(old.isEmpty, "the 64x48 sets are gone from the pool")
            c.shutdown()
            #expect(interop.mappedTextures.isEmpty)
            #expect(Set(interop.unregistered) == Set(interop.registered))
            // HostInterop refuses a second map, an unmap of what is not mapped and an unregister while mapped.
            #expect(interop.maps.reduce(0, +) == interop.unmaps.reduce(0, +))
        }
    }
}
