import Foundation
import Testing
import DiptychCore
@testable import DiptychServer
import DiptychMedia

/// Cameras on a server: `--allow-cameras`, `GET /v1/sources`, and camera
/// sources refused (400 naming them) without it or where none exists (no
/// machine here has /dev/video*).
@Suite struct ServeCameraTests {
    @Test func option() throws {
        #expect(try ServeOptions.parse(["--allow-cameras"]).allowCameras)
        #expect(try !ServeOptions.parse([]).allowCameras)
        #expect(throws: ServerError.self) { _ = try ServeOptions.parse(["--allow-cameras=yes"]) }
        #expect(ServeOptions.usage.contains("--allow-cameras"))
    }

    @Test func sourcesAndRefusals() throws {
        let dir = Scratch(); defer { dir.remove() }
        let here = CameraRanking.rank(CameraListing.devices()).count
        for allow in [false, true] {
            let server = try ServeProcess(allow ? ["--allow-cameras"] : [], in: dir.path); defer { server.stop() }
            let list = try server.request("GET", "/v1/sources")
            #expect(list.status == 200, "\(list.text)")
            #expect(list.json["camerasAllowed"] as? Bool == allow)
            let cameras = try #require(list.json["cameras"] as? [[String: Any]])
            #expect(cameras.filter { $0["source"] != nil }.count == here)
            for (source, reason) in [("camera:\(here)", allow ? "no such camera" : "--allow-cameras"),
                                     ("v4l2:/dev/video-none", allow ? "no such camera" : "--allow-cameras"),
                                     ("camera:x", "expected camera:N")] {
                let a = try server.request("POST", "/v1/takes", json(["primary": source, "out": "o.mp4", "duration": 1]))
                #expect(a.status == 400 && a.error.contains(source) && a.error.contains(reason), "\(source): \(a.status) \(a.text)")
            }
        }
    }
}
