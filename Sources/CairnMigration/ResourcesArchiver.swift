import Cairn
import Foundation

/// What an exporter appends its data to: a thin facade over Cairn's `Archiver` that the
/// export session creates, configures (header, size estimate, compression) and finishes.
///
/// - Important: Cancellation is thrown as `CancellationError`; let it propagate.
public final class ResourcesArchiver {
    private let archiver: Archiver

    /// Wraps `archiver`; the caller keeps the duty to finish or abandon it.
    public init(_ archiver: Archiver) {
        self.archiver = archiver
    }

    /// Content bytes appended so far (the archiver's progress).
    public var progress: Progress { archiver.progress }

    /// Appends the file, directory (recursively) or symlink at `url` under `pathInArchive`, or
    /// under its last path component when `pathInArchive` is nil.
    ///
    /// An SQLite database is read at one committed state, with its `-wal` right after it; its
    /// `-shm` is never stored. Appending the database's `-wal`, `-journal` or `-shm` after the
    /// database is the same item: nothing is added and nothing is thrown (`Archiver.appendItem(at:)`).
    ///
    /// - Parameters:
    ///   - url: a file URL.
    ///   - pathInArchive: a relative path with `/` separators (no `..`, no leading `/`).
    /// - Throws: `CairnError` (`.notFound` when `url` does not exist, `.unsafePath` for a bad
    ///   `pathInArchive`, `.io` when writing fails) or `CancellationError`. Single unreadable or
    ///   changing files inside a directory do not throw: they are warnings in the export's
    ///   `ExportProperties.warnings`.
    nonisolated(nonsending) public func appendItem(at url: URL, pathInArchive: String? = nil) async throws {
        if let pathInArchive {
            try await archiver.appendItem(at: url, pathInArchive: pathInArchive)
        } else {
            try await archiver.appendItem(at: url)
        }
    }

    /// Appends a file whose bytes come from `bytes` (for data that is not a file on disk).
    ///
    /// - Throws: as ``appendItem(at:pathInArchive:)``.
    nonisolated(nonsending) public func append<S: AsyncSequence>(
        contentsOf bytes: S, pathInArchive: String, permissions: UInt32 = 0o644
    ) async throws where S.Element == [UInt8], S: Sendable {
        try await archiver.append(contentsOf: bytes, pathInArchive: pathInArchive, permissions: permissions)
    }
}
