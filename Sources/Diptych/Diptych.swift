@_exported import DiptychCore

/// Diptych's version, printed by `diptych --version`.
public enum DiptychVersion {
    public static let string = "0.1.0"
}
