import Foundation
import Testing
@testable import Diptych
import DiptychCore
import DiptychMedia

/// Several outputs from one set of stream textures: `--also-out` with its
/// own layout, and outputs added and removed while the take runs.
@Suite(.serialized) struct OutputsTests {
    init() { _ = quietMedia }

    /// A PiP file and a side-by-side transport stream from the same frames:
    /// both have every primary frame, each drawn with its own layout.
    @Test func alsoOutHasItsOwnLayout() throws {
        let dir = Scratch(); defer { dir.remove() }
        let main = dir.path("pip.mp4"), extra = dir.path("sbs.ts")
        let config = try takeConfig(primary: "testsrc:counter:320x240@30", out: main,
                                    extra: ["--also-out", extra, "--also-layout", "side-by-side"])
        let summary = try RecordingSession(configuration: config, hooks: SessionHooks(storage: plentyOfSpace)).run()
        #expect(summary.frames == 60)
        #expect(summary.outputs.count == 1 && summary.outputs[0].frames == 60 && summary.outputs[0].failure == nil)
        let pip = try decodeAll(main).frames, sbs = try decodeAll(extra).frames
        #expect(pip.count == 60 && sbs.count == 60)
        let (cx, cy) = insetCentre(config, canvas: PixelSize(width: 320, height: 240), secondary: PixelSize(width: 160, height: 120))
        for k in [0, 30, 59] {
            #expect(pip[k].counter == k)
            #expect(hue(pip[k].frame, cx, cy) == .red)          // the inset
            #expect(hue(pip[k].frame, 240, 60) != .red)        // the primary, where side by side shows the secondary
            #expect(hue(sbs[k].frame, 240, 60) == .red)        // the right half: the secondary
            #expect(hue(sbs[k].frame, 80, 120) != .red)
        }
    }

    /// An output added half-way receives frames from then on, continuously,
    /// and is completed when removed; the main output misses nothing.
    @Test func outputsAddedAndRemovedWhileRunning() throws {
        let dir = Scratch(); defer { dir.remove() }
        let main = dir.path("main.mp4"), added = dir.path("added.mp4")
        final class Box: @unchecked Sendable {
            private let lock = NSLock()
            private var _key: Int?, _error: String?, _addedAt: Int?
            var removed = false
            var key: Int? { lock.lock(); defer { lock.unlock() }; return _key }
            var error: String? { lock.lock(); defer { lock.unlock() }; return _error }
            func added(_ key: Int?, error: String?) { lock.lock(); _key = key; _error = error; lock.unlock() }
            /// The first frame seen once the add has been answered (on a loaded machine, any number of frames after 20).
            func frameAfterAdd(_ index: Int) -> Int? {
                lock.lock(); defer { lock.unlock() }
                if _addedAt == nil, _key != nil || _error != nil { _addedAt = index }
                return _addedAt
            }
        }
        let box = Box()
        let holder = SessionHolder()
        var hooks = SessionHooks(storage: plentyOfSpace)
        hooks.frameCallback = { _, index in
            Thread.sleep(forTimeInterval: 0.01)   // a take slow enough to be changed while it runs
            guard let session = holder.session else { return }
            if index == 20 {
                DispatchQueue.global().async {
                    do throws(SessionError) { box.added(try session.addOutput(OutputSpec(out: added, layout: .primaryOnly)), error: nil) }
                    catch { box.added(nil, error: "\(error)") }
                }
            }
            // Removed 40 frames after the add took effect, however late that was.
            if let at = box.frameAfterAdd(index), index == at + 40, let key = box.key {
                // Not on the render loop: the remove is answered there.
                DispatchQueue.global().async { box.removed = session.removeOutput(key) != nil }
            }
        }
        let session = RecordingSession(configuration: try takeConfig(primary: "testsrc:counter:320x240@30", out: main,
                                                                      duration: 6), hooks: hooks)
        holder.session = session
        let summary = try session.run()
        #expect(box.error == nil, "\(box.error ?? "")")
        #expect(box.key == 1 && box.removed)
        #expect(summary.frames == 180)
        let extra = try #require(summary.outputs.first)
        #expect(extra.output == added && extra.failure == nil)
        let frames = try decodeAll(added).frames
        #expect(frames.count == extra.frames && frames.count >= 20 && frames.count <= 100, "\(frames.count) frames in the added output")
        let first = try #require(frames.first?.counter)
        for (i, f) in frames.enumerated() { #expect(f.counter == first + i) }
        #expect(try decodeAll(main).frames.count == 180)
    }

    @Test func badAddedOutputIsRefusedAndTheTakeGoesOn() throws {
        let dir = Scratch(); defer { dir.remove() }
        let holder = SessionHolder()
        final class Box: @unchecked Sendable { var error: SessionError? }
        let box = Box()
        var hooks = SessionHooks(storage: plentyOfSpace)
        hooks.frameCallback = { _, index in
            guard index == 5, let s = holder.session else { return }
            let done = DispatchSemaphore(value: 0)
            DispatchQueue.global().async {
                do throws(SessionError) { _ = try s.addOutput(OutputSpec(out: "/nonexistent/dir/x.mp4")) } catch { box.error = error }
                done.signal()
            }
            Thread.sleep(forTimeInterval: 0.05)
            _ = done
        }
        // Three seconds, so the refusal comes back while the take still runs on a loaded machine.
        let session = RecordingSession(configuration: try takeConfig(out: dir.path("t.mp4"), duration: 3), hooks: hooks)
        holder.session = session
        let summary = try session.run()
        #expect(summary.frames == 180)
        if case .output(let path, _)? = box.error { #expect(path == "/nonexistent/dir/x.mp4") } else { Issue.record("\(String(describing: box.error))") }
        #expect(box.error?.isBadInput == true)
    }
}

final class SessionHolder: @unchecked Sendable { var session: RecordingSession? }
