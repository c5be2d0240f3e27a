import Foundation
import Testing
@testable import DiptychCore

/// The source policy's pure decisions: which protocol FFmpeg would use,
/// what a URL reaches, which folders and addresses are allowed.
@Suite struct SourcePolicyTests {
    @Test(arguments: [
        ("in.mp4", "file"), ("/abs/in.mp4", "file"), ("file:///x.mp4", "file"), ("file:x.mp4", "file"),
        ("concat:/etc/shadow|file:///a.txt", "concat"), ("subfile,,start,0,end,10,,:/etc/passwd", "subfile"),
        ("data:text/plain,abc", "data"), ("crypto+http://h/x", "crypto+http"), ("pipe:0", "pipe"), ("fd:3", "fd"),
        ("HTTP://Example.com/a.mp4", "http"), ("hls+https://h/a.m3u8", "hls+https"), ("srt://:9000?mode=listener", "srt"),
        ("C:/video.mp4", "file"), ("weird name.mp4", "file"), ("a b:c.mp4", "file"), ("foo:bar.mp4", "foo"),
    ])
    func ffmpegProtocol(url: String, expected: String) {
        #expect(SourcePolicy.ffmpegProtocol(of: url) == expected)
    }

    /// Every protocol the issue names is refused by every policy, CLI's too.
    @Test(arguments: ["concat:/etc/shadow|file:///tmp/a.txt", "subfile,,start,0,end,10,,:/etc/passwd", "data:text/plain,hello",
                      "crypto+http://example.com/x.ts", "crypto:/etc/passwd", "fd:0", "pipe:0", "gopher://example.com/",
                      "ftp://example.com/a.mp4", "async:file:/etc/passwd", "cache:/etc/passwd"])
    func refusedProtocols(url: String) {
        for policy in [SourcePolicy.commandLine, .server(inputRoot: "/srv", allowedNetworks: [], listensBeyondLoopback: true)] {
            guard case .failure(let r) = policy.classify(url) else { Issue.record("\(url) was allowed"); continue }
            #expect(r.source == url && r.reason.contains("not allowed"), "\(r)")
        }
    }

    @Test func targets() throws {
        let p = SourcePolicy.commandLine
        #expect(try p.classify("file:///srv/a.mp4").get() == .file(path: "/srv/a.mp4"))
        #expect(try p.classify("file:/srv/a.mp4").get() == .file(path: "/srv/a.mp4"))
        #expect(try p.classify("rel/a.mp4").get() == .file(path: "rel/a.mp4"))
        #expect(try p.classify("rtmp://user:pw@cam.example:1935/live/x").get() == .network(scheme: "rtmp", host: "cam.example"))
        #expect(try p.classify("http://[::1]:8080/a.mp4").get() == .network(scheme: "http", host: "::1"))
        #expect(try p.classify("hls+http://127.0.0.%31/a.m3u8").get() == .network(scheme: "http", host: "127.0.0.1"))
        #expect(try p.classify("srt://:9000?mode=listener").get() == .network(scheme: "srt", host: nil))
        // file://host/x is another machine's file, not a local path.
        #expect((try? p.classify("file://otherhost/etc/passwd").get()) == nil)
    }

    /// A server listening beyond loopback without --input-root takes no file
    /// sources; one on loopback does (its clients are on the machine).
    @Test func serverFiles() throws {
        let open = SourcePolicy.server(inputRoot: nil, allowedNetworks: [], listensBeyondLoopback: true)
        #expect((try? open.classify("/srv/a.mp4").get()) == nil)
        #expect((try? open.classify("file:///srv/a.mp4").get()) == nil)
        #expect((try? open.classify("http://example.com/a.mp4").get()) != nil)
        let local = SourcePolicy.server(inputRoot: nil, allowedNetworks: [], listensBeyondLoopback: false)
        #expect((try? local.classify("/srv/a.mp4").get()) != nil)
        let rooted = SourcePolicy.server(inputRoot: "/srv/in", allowedNetworks: [], listensBeyondLoopback: true)
        #expect((try? rooted.checkFile(resolved: "/srv/in/a.mp4", as: "a.mp4").get()) != nil)
        #expect((try? rooted.checkFile(resolved: "/srv/in/sub/a.mp4", as: "sub/a.mp4").get()) != nil)
        for outside in ["/srv/input/a.mp4", "/srv/a.mp4", "/etc/shadow", "/srv/in"] {
            guard case .failure(let r) = rooted.checkFile(resolved: outside + (outside == "/srv/in" ? "x" : ""), as: outside) else {
                Issue.record("\(outside) allowed"); continue
            }
            #expect(r.reason.contains("outside the input root /srv/in"))
        }
    }

    @Test(arguments: [
        // (address, refusesLocal, allowed networks, allowed?)
        ("127.0.0.1", true, "", false), ("127.9.9.9", true, "", false), ("::1", true, "", false),
        ("::ffff:127.0.0.1", true, "", false), ("169.254.169.254", true, "", false), ("fe80::1", true, "", false),
        ("0.0.0.0", true, "", false), ("::", true, "", false), ("93.184.216.34", true, "", true), ("10.1.2.3", true, "", true),
        ("127.0.0.1", false, "", true), ("169.254.169.254", false, "", true),
        ("127.0.0.1", true, "127.0.0.0/8", true), ("10.1.2.3", true, "10.0.0.0/8", true), ("11.1.2.3", true, "10.0.0.0/8", false),
        ("93.184.216.34", false, "10.0.0.0/8,192.168.1.0/24", false), ("192.168.1.77", false, "10.0.0.0/8,192.168.1.0/24", true),
        ("192.168.2.77", false, "192.168.1.0/24", false), ("2001:db8::5", false, "2001:db8::/32", true),
        ("2001:db9::5", false, "2001:db8::/32", false), ("::ffff:10.0.0.9", false, "10.0.0.0/8", true),
        ("10.0.0.9", false, "::ffff:10.0.0.0/104", true), ("10.0.0.9", false, "10.0.0.9", true), ("10.0.0.8", false, "10.0.0.9", false),
    ])
    func addresses(address: String, refusesLocal: Bool, networks: String, allowed: Bool) throws {
        let nets = try networks.split(separator: ",").map { try #require(IPNetwork(String($0))) }
        let p = SourcePolicy(allowedNetworks: nets, refusesLocal: refusesLocal)
        let a = try #require(IPAddress(address))
        let result = p.checkAddresses([a], host: "h", scheme: "http", as: "http://h/")
        let wasAllowed = (try? result.get()) != nil
        #expect(wasAllowed == allowed, "\(address) \(networks)")
    }

    /// A name that resolves to several addresses is refused if any is.
    @Test func everyAddressMustBeAllowed() throws {
        let p = SourcePolicy(refusesLocal: true)
        let r = p.checkAddresses([try #require(IPAddress("93.184.216.34")), try #require(IPAddress("127.0.0.1"))],
                                 host: "rebind.example", scheme: "https", as: "https://rebind.example/")
        guard case .failure(let refusal) = r else { Issue.record("allowed"); return }
        #expect(refusal.reason.contains("rebind.example") && refusal.reason.contains("127.0.0.1"))
        // Receiving protocols bind a local port: their host is not reached.
        #expect((try? p.checkAddresses([try #require(IPAddress("127.0.0.1"))], host: "127.0.0.1", scheme: "udp", as: "udp://127.0.0.1:5000").get()) != nil)
        #expect((try? p.checkAddresses([], host: "nowhere.invalid", scheme: "http", as: "http://nowhere.invalid/").get()) == nil)
    }

    /// UDP and RTP sources bind the URL's port of this host: a server takes
    /// them only on the ports `--allow-source-listen` lists; the command line anywhere.
    @Test func receivingSourcesBindOnlyAllowedPorts() {
        let server = SourcePolicy.server(inputRoot: nil, allowedNetworks: [], listensBeyondLoopback: true, listenPorts: [])
        for url in ["udp://0.0.0.0:5000", "udp://239.1.1.1:5000", "rtp://127.0.0.1:6000"] {
            guard case .failure(let r) = server.classify(url) else { Issue.record("\(url) allowed"); continue }
            #expect(r.reason.contains("receiving on a port of this host") && r.reason.contains("--allow-source-listen"), "\(r.reason)")
        }
        let listed = SourcePolicy.server(inputRoot: nil, allowedNetworks: [], listensBeyondLoopback: true, listenPorts: [5000...5010])
        guard case .success(.network(scheme: "udp", host: nil)) = listed.classify("udp://239.1.1.1:5004") else {
            Issue.record("udp on a listed port refused"); return
        }
        guard case .failure(let other) = listed.classify("udp://239.1.1.1:6000") else { Issue.record("udp on another port allowed"); return }
        #expect(other.reason.contains("port 6000"), "\(other.reason)")
        guard case .failure(let none) = listed.classify("udp://239.1.1.1") else { Issue.record("udp with no port allowed"); return }
        #expect(none.reason.contains("names no port"), "\(none.reason)")
        guard case .success(.network(scheme: "udp", host: nil)) = SourcePolicy.commandLine.classify("udp://0.0.0.0:5000") else {
            Issue.record("udp refused on the command line"); return
        }
    }

    @Test func malformedNetworks() {
        for bad in ["", "10.0.0.0/33", "10.0.0/8", "::/129", "10.0.0.0/-1", "host.example", "10.0.0.0/8/8"] {
            #expect(IPNetwork(bad) == nil, "\(bad)")
        }
        #expect(IPNetwork("10.0.0.0/8")?.description == "10.0.0.0/8")
        #expect(IPNetwork("2001:db8::/32")?.description == "2001:db8::/32")
    }
}

/// Two spellings of one file are one file.
@Suite struct FileIdentityTests {
    @Test func spellingsOfOneFile() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("fileid-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir + "/real", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = FileManager.default.createFile(atPath: dir + "/real/in.mp4", contents: Data([1, 2, 3]))
        try FileManager.default.createSymbolicLink(atPath: dir + "/link", withDestinationPath: dir + "/real")
        #expect(link(dir + "/real/in.mp4", dir + "/hard.mp4") == 0)
        let a = try #require(FileIdentity(dir + "/real/in.mp4"))
        for other in ["file://" + dir + "/real/in.mp4", "file:" + dir + "/real/in.mp4", dir + "/link/in.mp4",
                      dir + "/real/../real/./in.mp4", dir + "/hard.mp4"] {
            #expect(try #require(FileIdentity(other)).isSame(as: a), "\(other)")
        }
        // Files that do not exist yet: their folders are resolved.
        let new1 = try #require(FileIdentity(dir + "/link/out.mp4")), new2 = try #require(FileIdentity("file://" + dir + "/real/out.mp4"))
        #expect(new1.isSame(as: new2) && !new1.isSame(as: a))
        #expect(FileIdentity("rtmp://h/app/x") == nil && FileIdentity("pipe:1") == nil && FileIdentity("srt://h:1") == nil)
    }

    @Test func onlyRegularFilesAreWritable() throws {
        for special in ["/dev/stdout", "/dev/stderr", "/dev/null", "/proc/self/fd/2", "/sys/kernel/x", "/tmp"] {
            #expect(try #require(FileIdentity(special)).unwritableReason != nil, "\(special)")
        }
        #expect(try #require(FileIdentity(FileManager.default.temporaryDirectory.path + "/new-\(UUID().uuidString).mp4")).unwritableReason == nil)
    }
}
