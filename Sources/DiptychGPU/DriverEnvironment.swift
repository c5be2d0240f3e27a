#if canImport(Glibc)
import Glibc
#endif

/// What Diptych asks of the GPU driver through the process environment,
/// set once, before the driver is loaded: first thing in Diptych's programs
/// (`diptych`, `diptych-gpu-bench`, `diptych-gpu-check`), before any other
/// thread starts, and again (a no-op there) before the first EGL call of
/// any path (`EGLClientProcs.load`) for a process that embeds the library.
/// docs/ENVIRONMENT.md lists it.
///
/// NVIDIA's driver, where a call waits for the GPU (the render thread
/// inserting a batch's fence while the GPU is behind), yields in a loop by
/// default, so the render thread of a busy server spent a core spinning:
/// 0.86 CPU ms a frame against 0.89 ms busy. `__GL_YIELD=USLEEP` makes those
/// waits sleep: 0.18 CPU ms a frame, the same frames a second
/// (docs/ARCHITECTURE.md, "The render thread's waits"). Other drivers do not read it.
/// A value the environment already has is kept. `setenv` is not safe beside
/// threads reading the environment: a host that embeds the library and
/// reads it on other threads sets `__GL_YIELD` itself first (any value
/// leaves it alone).
public enum DriverEnvironment {
    /// Sets `__GL_YIELD=USLEEP` where the environment has no value (once a
    /// process: the first call; later calls do nothing).
    public static func apply() { _ = applied }
    private static let applied: Void = { setenv("__GL_YIELD", "USLEEP", 0) }()
}
