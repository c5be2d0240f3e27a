import Foundation

/// Marks the host's callbacks while they run on the session's threads, so
/// that a callback calling back into its session where that would wait on
/// the session itself (`finish()`, a blocking push, the C API's destroy)
/// gets an error instead of a deadlock.
enum HostCallback {
    nonisolated(unsafe) private static var key = pthread_key_t()
    private static let made: Void = { pthread_key_create(&key, nil) }()

    /// Whether this thread is inside a host callback now.
    static var isRunning: Bool {
        _ = made
        return pthread_getspecific(key) != nil
    }

    /// Runs `body` (a host callback) marked as such on this thread.
    static func run<T>(_ body: () -> T) -> T {
        _ = made
        let outer = pthread_getspecific(key)
        let depth = Int(bitPattern: outer) + 1
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: depth))
        defer { pthread_setspecific(key, outer) }
        return body()
    }
}

extension EmbeddedOutputs {
    /// The same outputs, each callback run inside `HostCallback.run`.
    func markingCallbacks() -> EmbeddedOutputs {
        var o = self
        if let f = onRGBA { o.onRGBA = { v in HostCallback.run { f(v) } } }
        if let f = onNV12 { o.onNV12 = { v in HostCallback.run { f(v) } } }
        if let f = onDmaBuf { o.onDmaBuf = { v in HostCallback.run { f(v) } } }
        if let f = onPacket { o.onPacket = { v in HostCallback.run { f(v) } } }
        return o
    }
}
