import Glibc

/// Where an extraction into a destination keeps its staging directory and journal
/// (`Spec/0003-command-line.md §4`, §4.1): the one place that rule is decided, for the
/// extraction itself (`StagingDirectory`) and for messages such as the `cairn` tool's "continue
/// with --resume" line.
///
/// - The staging directory is `DEST/.cairn-staging` when `DEST` is an existing directory,
///   `.NAME.cairn-staging` beside it otherwise; when that name is taken by something that is
///   not a staging directory (a directory `.cairn-staging` an earlier extraction brought from an
///   archive, say), the first of `NAME.1`, `NAME.2`, ... that is free or a staging directory.
/// - It holds the journal, ``journalName``, and the subdirectory ``rootName`` the entries are
///   written below.
package enum StagingLocation {
    /// The journal file in the staging directory: one line per completed step, so an
    /// interrupted extraction can resume (`Spec/0003-command-line.md §4.1`).
    package static let journalName = Array(".cairn-journal".utf8)
    /// The subdirectory of the staging directory that receives the entries.
    package static let rootName = Array("root".utf8)
    /// The staging directory's name inside an existing destination.
    package static let insideName = Array(".cairn-staging".utf8)
    /// How many numbered alternatives ``path(for:)`` tries when the fixed name is taken by
    /// something that is not a staging directory (`.cairn-staging.1`, `.cairn-staging.2`, ...).
    package static let alternativeNames = 64

    /// Where the staging directory for `destination` (a raw path) lives, as the type's summary
    /// says.
    ///
    /// - Returns: the path of the staging directory, relative if `destination` is.
    package static func path(for destination: [UInt8]) -> [UInt8] {
        let place = placement(for: trimmed(destination))
        guard let container = try? FileDescriptor.open(place.containerPath, flags: O_RDONLY | O_DIRECTORY) else {
            return PathBytes.join(place.containerPath, place.baseName)
        }
        defer { _ = try? container.close() }
        return PathBytes.join(place.containerPath, stagingName(in: container, base: place.baseName))
    }

    /// `destination` without trailing slashes.
    package static func trimmed(_ destination: [UInt8]) -> [UInt8] {
        var trimmed = destination
        while trimmed.count > 1, trimmed.last == 0x2F { trimmed.removeLast() }
        return trimmed
    }

    /// Where the staging directory goes for a trimmed destination: the directory that holds it
    /// (as a path), the fixed name in it, and what the destination is (nil if missing).
    package static func placement(for trimmed: [UInt8])
        -> (containerPath: [UInt8], baseName: [UInt8], destinationKind: FileStatus.Kind?)
    {
        let existing = try? FileStatus.of(trimmed, followSymlinks: true)
        if let existing, existing.kind == .directory {
            return (trimmed, insideName, .directory)
        }
        // The parent: everything before the last slash (as `PathValidator.parent`).
        let parent = trimmed.lastIndex(of: 0x2F).map { Array(trimmed[..<$0]) } ?? []
        let containerPath: [UInt8] = parent.isEmpty ? (trimmed.first == 0x2F ? [0x2F] : [0x2E]) : parent
        return (containerPath, [0x2E] + PathBytes.lastComponent(trimmed) + insideName, existing?.kind)
    }

    /// The first of `base`, `base.1`, `base.2`, ... in `container` that is free or a staging
    /// directory (a directory holding a regular file ``journalName``).
    package static func stagingName(in container: FileDescriptor, base: [UInt8]) -> [UInt8] {
        for attempt in 0..<alternativeNames {
            let candidate = attempt == 0 ? base : base + Array(".\(attempt)".utf8)
            guard let status = try? FileStatus.of(candidate, relativeTo: container) else { return candidate }
            if status.kind == .directory,
                (try? FileStatus.of(PathBytes.join(candidate, journalName), relativeTo: container))?.kind == .regular
            {
                return candidate
            }
        }
        return base
    }
}
