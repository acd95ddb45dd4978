/// Where an extraction into a destination keeps its staging directory, for callers outside the
/// reader (the `cairn` tool's "continue with --resume" line). The rule itself is
/// `StagingDirectory.location(for:)`; this only makes it reachable.
package enum StagingLocation {
    /// The staging directory's path for `destination` (raw bytes), as
    /// `StagingDirectory.location(for:)` decides it.
    package static func path(for destination: [UInt8]) -> [UInt8] {
        StagingDirectory.location(for: destination)
    }
}
