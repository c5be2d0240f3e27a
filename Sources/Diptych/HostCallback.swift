import Foundation

/// Marks the host's callbacks while they run on a session's threads, so
/// that a callback calling back into its own session where that would wait
/// on the session itself (`finish()`, a blocking push, the C API's destroy)
/// gets an error instead of a deadlock. Calls into other sessions from a
/// callback are not affected.
enum HostCallback {
    /// One session's identity.
    final class Token: Sendable {}

    /// The sessions whose callbacks this thread is running, innermost last.
    private final class Chain {
        var tokens: [ObjectIdentifier] = []
    }
    nonisolated(unsafe) private static var key = pthread_key_t()
    private static let made: Void = {
        pthread_key_create(&key) { p in if let p { Unmanaged<Chain>.fromOpaque(p).release() } }
    }()

    private static var chain: Chain {
        _ = made
        if let p = pthread_getspecific(key) { return Unmanaged<Chain>.fromOpaque(p).takeUnretainedValue() }
        let c = Chain()
        pthread_setspecific(key, Unmanaged.passRetained(c).toOpaque())
        return c
    }

    /// Whether this thread is inside one of `token`'s session's callbacks now.
    static func isRunning(_ token: Token) -> Bool { chain.tokens.contains(ObjectIdentifier(token)) }

    /// Runs `body` (a host callback of `token`'s session) marked as such on this thread.
    static func run<T>(_ token: Token, _ body: () -> T) -> T {
        let c = chain
        c.tokens.append(ObjectIdentifier(token))
        defer { c.tokens.removeLast() }
        return body()
    }
}

extension EmbeddedOutputs {
    /// The same outputs, each callback run inside `HostCallback.run` for `token`'s session.
    func markingCallbacks(_ token: HostCallback.Token) -> EmbeddedOutputs {
        var o = self
        if let f = onRGBA { o.onRGBA = { v in HostCallback.run(token) { f(v) } } }
        if let f = onNV12 { o.onNV12 = { v in HostCallback.run(token) { f(v) } } }
        if let f = onDmaBuf { o.onDmaBuf = { v in HostCallback.run(token) { f(v) } } }
        if let f = onPacket { o.onPacket = { v in HostCallback.run(token) { f(v) } } }
        return o
    }
}
