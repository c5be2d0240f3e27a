import Foundation
import Testing
import DiptychCore
@testable import DiptychMedia

/// Fragmented while recording, a proper length once the take ends cleanly
/// (see `FragmentedMP4`); a killed take keeps its fragments.
@Suite struct HybridMP4Tests {
    init() { _ = quietFFmpeg }

    /// A 10 s take: the movie box states 10 s in mvhd, tkhd, mdhd and mehd;
    /// ffprobe and GStreamer read 10 s; the file is still fragmented.
    @Test(.timeLimit(.minutes(5)))
    func cleanFinishStatesTheDuration() throws {
        let dir = TempDir(); defer { dir.remove() }
        let path = dir.path("take.mp4")
        let size = PixelSize(width: 160, height: 120), rate = FrameRate(30)
        let src = try TestPatternSource(name: "counter", size: size, rate: rate)
        let w = try MediaWriter(url: path, video: VideoEncoderSettings(size: size, frameRate: rate, preset: "ultrafast"))
        for _ in 0..<300 { try w.write(try #require(try src.nextFrame())) }
        try w.finish()

        let header = try MovieHeader(path: path)
        #expect(header.timescale == 1000)
        #expect(header.duration == 10_000)
        #expect(header.fragmentDuration == 10_000)
        #expect(header.tracks.count == 1)
        #expect(header.tracks.first?.tkhd == 10_000)
        if let t = header.tracks.first { #expect(t.mdhd == 10 * t.mdhdTimescale) }
        let boxes = try topLevelBoxes(path)
        #expect(boxes.prefix(3) == ["ftyp", "moov", "free"])
        #expect(boxes.filter { $0 == "moof" }.count == 10)
        #expect(boxes.last == "mfra")

        #expect(try ffprobeDuration(path) == 10)
        let gst = try gstDiscover(path)
        #expect(gst.duration == 10, "GStreamer reads \(String(describing: gst.duration)) s")
        #expect(gst.frameRate == "30/1")
        let probe = ProbedFile(path: path)
        #expect(probe.counters == (0..<300).map { Optional($0) })
    }

    /// With audio each track states its own length (audio in its sample rate).
    @Test func audioTrackStatesItsDuration() throws {
        let dir = TempDir(); defer { dir.remove() }
        let input = dir.path("av.mp4")
        try makeAVFile(input, size: "160x120", seconds: 3)
        let src = try FileSource(url: input)
        let out = dir.path("out.mp4")
        let w = try MediaWriter(url: out, video: VideoEncoderSettings(size: src.info.size, frameRate: src.info.frameRate, preset: "ultrafast"),
                                audio: src.audioTrack)
        while let f = try src.nextFrame() { try w.write(f) }
        try w.finish()
        let header = try MovieHeader(path: out)
        #expect(header.duration == 3000)
        #expect(header.fragmentDuration == 3000)
        try #require(header.tracks.count == 2)
        #expect(header.tracks[0].mdhd == 3 * header.tracks[0].mdhdTimescale)
        // Audio is cut at the last video frame: within one AAC frame (1024 samples) of 3 s.
        let audioSeconds = Double(header.tracks[1].mdhd) / Double(header.tracks[1].mdhdTimescale)
        #expect(abs(audioSeconds - 3) <= 1024.0 / 48_000 + 1e-9, "audio track states \(audioSeconds) s")
        #expect(header.tracks[1].tkhd <= 3000 && header.tracks[1].tkhd >= 2970)
        #expect(try ffprobeDuration(out).map { abs($0 - 3) < 0.03 } == true)
        #expect(try gstDiscover(out).duration.map { abs($0 - 3) < 0.03 } == true)
    }

    /// The patch itself: durations in place, mehd inserted, the reserved
    /// free box shrunk by exactly that, nothing after it moved.
    @Test func patchKeepsEveryFragmentInPlace() throws {
        let dir = TempDir(); defer { dir.remove() }
        let path = dir.path("p.mp4")
        let size = PixelSize(width: 64, height: 64), rate = FrameRate(25)
        let src = try TestPatternSource(name: "smpte", size: size, rate: rate)
        let w = try MediaWriter(url: path, video: VideoEncoderSettings(size: size, frameRate: rate, preset: "ultrafast"))
        for _ in 0..<50 { try w.write(try #require(try src.nextFrame())) }
        try w.finish()
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let top = Array(MP4Boxes(bytes))
        let free = try #require(top.first { $0.type == "free" })
        let moov = try #require(top.first { $0.type == "moov" })
        #expect(moov.range.upperBound == free.range.lowerBound)
        #expect(free.range.upperBound - moov.range.lowerBound - moov.range.count == FragmentedMP4.reservedBox.count - 16)
        #expect(try MovieHeader(path: path).duration == 2000)
        #expect(ProbedFile(path: path).frames.count == 50)
    }

    /// A take longer than 2^32 ticks of its 90 kHz track (13.3 h): the `mdhd`
    /// grows to version 1 in the reserved space and the length is written.
    @Test func aTakeOverThirteenHoursGetsAVersionOneMediaHeader() throws {
        let dir = TempDir(); defer { dir.remove() }
        let path = dir.path("long.mp4")
        let size = PixelSize(width: 64, height: 64), rate = FrameRate(25)
        let src = try TestPatternSource(name: "smpte", size: size, rate: rate)
        let w = try MediaWriter(url: path, video: VideoEncoderSettings(size: size, frameRate: rate, preset: "ultrafast"))
        for i in 0..<81 {
            var f = try #require(try src.nextFrame())
            f.pts = MediaTime(value: Int64(i) * 600, timescale: 1)   // one frame every 10 minutes: 13.5 h
            try w.write(f)
        }
        try w.finish()
        let header = try MovieHeader(path: path)
        let track = try #require(header.tracks.first)
        #expect(track.mdhd > UInt64(UInt32.max), "mdhd \(track.mdhd)")
        #expect(Double(track.mdhd) / Double(track.mdhdTimescale) >= 48_000)
        #expect(header.duration >= 48_000_000)
        #expect(ProbedFile(path: path).frames.count == 81)
    }
}
