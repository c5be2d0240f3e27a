import Foundation
import Testing
@testable import DiptychCore

/// The one waiting primitive and the one thread helper (docs/ARCHITECTURE.md, "Threads").
@Suite struct ConcurrencyTests {
    @Test func updateWakesAWaiter() {
        let c = Condition(0)
        let t = JoinableThread(name: "dp-test") {
            Thread.sleep(forTimeInterval: 0.05)
            c.update { $0 = 7 }
        }
        let started = ProcessInfo.processInfo.systemUptime
        let got = c.wait(until: { $0 == 7 }, timeout: 30) { state, met in met ? state : -1 }
        t.join()
        #expect(got == 7)
        #expect(ProcessInfo.processInfo.systemUptime - started < 10)
    }

    @Test func withLockWakesNobodyAndATimeoutEnds() {
        let c = Condition([Int]())
        let started = ProcessInfo.processInfo.systemUptime
        c.withLock { $0.append(1) }
        let met = c.wait(until: { $0.count > 1 }, timeout: 0.1)
        let waited = ProcessInfo.processInfo.systemUptime - started
        #expect(!met)
        #expect(waited >= 0.09)
        // A condition that holds already returns at once, whatever the timeout.
        #expect(c.wait(until: { $0.count == 1 }, timeout: 0))
    }

    @Test func threadsAreNamedAndJoinedOnce() {
        let name = Condition<String?>(nil)
        let t = JoinableThread(name: "dp-named") {
            var buf = [CChar](repeating: 0, count: 16)
            _ = testGetname(pthread_self(), &buf, buf.count)
            let s = String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            name.update { $0 = s }
        }
        t.join()
        t.join()
        #expect(name.withLock { $0 } == "dp-named")
        #expect(!t.isCurrent)
    }
}

@_silgen_name("pthread_getname_np") private func testGetname(_ thread: pthread_t, _ name: UnsafeMutablePointer<CChar>, _ length: Int) -> Int32
