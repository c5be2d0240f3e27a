import Testing
import DiptychCore
@testable import DiptychServer

/// `diptych serve --allow-source-listen`: the ports a take's listening sources may bind.
@Suite struct ServeListenOptionTests {
    @Test func portsAndRanges() throws {
        let o = try ServeOptions.parse(["--allow-source-listen", "1935", "--allow-source-listen", "9000-9010,7000"])
        #expect(o.sourceListenPorts == [1935...1935, 9000...9010, 7000...7000])
        #expect(try ServeOptions.parse([]).sourceListenPorts.isEmpty)
        for bad in ["99999", "0", "9010-9000", "rtmp", ""] {
            #expect(throws: ServerError.self, "\(bad)") { _ = try ServeOptions.parse(["--allow-source-listen", bad]) }
        }
        #expect(ServeOptions.usage.contains("--allow-source-listen"))
    }
}
