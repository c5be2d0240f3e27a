#if canImport(Glibc)
import Glibc
#endif

/// What Diptych asks of the GPU driver through the process environment,
/// set once, before the first EGL call loads the driver (`EGLClientProcs.load`
/// is every path's first; docs/ENVIRONMENT.md lists it).
///
/// NVIDIA's driver, where a call waits for the GPU (the render thread
/// inserting a batch's fence while the GPU is behind), yields in a loop by
/// default, so the render thread of a busy server spent a core spinning:
/// 0.86 CPU ms a frame against 0.89 ms busy. `__GL_YIELD=USLEEP` makes those
/// waits sleep: 0.18 CPU ms a frame, the same frames a second
/// (docs/ARCHITECTURE.md, "The render thread's waits"). Other drivers do not read it.
/// A value the environment already has is kept.
enum DriverEnvironment {
    /// The variables and the values set where the environment has none.
    static let defaults: [(name: String, value: String)] = [("__GL_YIELD", "USLEEP")]

    /// Sets the defaults once a process (the first call; later calls do nothing).
    /// The first addition to the environment copies it and frees nothing,
    /// so a thread reading it meanwhile still reads a whole one.
    static func apply() { _ = applied }
    private static let applied: Void = {
        for d in defaults { setenv(d.name, d.value, 0) }
    }()
}
