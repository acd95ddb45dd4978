import Glibc

/// Where an ``Archiver`` sends the archive's bytes, in order. The archiver never seeks back.
///
/// Cairn provides ``FileSink`` (a file that appears at its final path only when complete) and
/// ``StandardOutputSink``; implement this protocol to stream to a socket or any consumer.
/// `write` may suspend: the archiver waits for it, so a slow sink slows the producer instead of
/// growing memory.
public protocol ArchiveSink: AnyObject {
    /// Consumes the next bytes of the archive.
    /// - Throws: any error; the archiver stops and reports it wrapped in ``CairnError`` (`.io`).
    nonisolated(nonsending) func write(_ bytes: [UInt8]) async throws
    /// Called once after the last byte (the footer) was written.
    nonisolated(nonsending) func finish() async throws
    /// Called when the archive will not be finished (an error or cancellation). What was written
    /// is a valid prefix up to its last commit record and can be resumed.
    nonisolated(nonsending) func abandon() async
}

/// Writes the archive to a file that appears at its final path only when complete.
///
/// Bytes go to `<path>.partial` in the same directory; ``finish()`` calls `fsync(2)` and renames
/// it into place. ``abandon()`` leaves `<path>.partial` behind, so an interrupted archive can be
/// inspected or resumed; nothing is ever left at `path` itself.
public final class FileSink: ArchiveSink {
    /// The final path.
    public let path: String
    /// The temporary path written to until ``finish()``.
    public let partialPath: String
    private let descriptor: FileDescriptor
    private var buffered: [UInt8] = []
    private var closed = false

    /// Creates `<path>.partial` (replacing an earlier one) for writing.
    ///
    /// - Throws: `CairnError` `.io` if the file cannot be created; `.alreadyExists` when `path`
    ///   exists and `overwrite` is false.
    public init(path: String, overwrite: Bool = true) throws(CairnError) {
        self.path = path
        self.partialPath = path + ".partial"
        if !overwrite, (try? FileStatus.of(Array(path.utf8))) != nil {
            throw CairnError(.alreadyExists, "archive already exists", path: path)
        }
        // Lock before truncating, so a second writer to the same path can never cut the first
        // one's file (flock(2), released when the descriptor closes or the process dies).
        descriptor = try FileDescriptor.open(partialPath, flags: O_WRONLY | O_CREAT, mode: 0o644)
        try Self.lock(descriptor, path: partialPath)
        try descriptor.truncate(to: 0)
    }

    private static func lock(_ descriptor: FileDescriptor, path: String) throws(CairnError) {
        guard flock(descriptor.rawValue, LOCK_EX | LOCK_NB) == 0 else {
            let error = Errno.current
            _ = try? descriptor.close()
            if error.rawValue == EWOULDBLOCK {
                throw CairnError(.alreadyExists, "another cairn process is writing this archive", path: path)
            }
            throw error.error("cannot lock", path: path)
        }
    }

    /// Reopens `<path>.partial` to continue it at `offset`: everything after `offset` is cut off
    /// (`ftruncate(2)`) and writing continues there.
    ///
    /// - Throws: `.notFound` when there is no `<path>.partial`; `.io`.
    package init(resuming path: String, at offset: UInt64) throws(CairnError) {
        self.path = path
        self.partialPath = path + ".partial"
        descriptor = try FileDescriptor.open(partialPath, flags: O_WRONLY)
        try Self.lock(descriptor, path: partialPath)
        try descriptor.truncate(to: offset)
        try descriptor.seek(to: offset)
    }

    /// The device and inode of the file being written, so the archiver can leave it out when
    /// it lies inside the tree being archived.
    package var fileIdentity: (device: UInt64, inode: UInt64)? {
        guard let status = try? descriptor.status() else { return nil }
        return (status.device, status.inode)
    }

    /// Cuts the file back to `offset` and continues writing there (resuming at an earlier commit).
    package func truncate(to offset: UInt64) throws(CairnError) {
        try descriptor.truncate(to: offset)
        try descriptor.seek(to: offset)
    }

    public func write(_ bytes: [UInt8]) async throws {
        try descriptor.writeAll(bytes)
    }

    public func finish() async throws {
        guard !closed else { return }
        closed = true
        try descriptor.sync()
        try descriptor.close()
        try FileSystem.rename(Array(partialPath.utf8), to: Array(path.utf8), display: path)
    }

    public func abandon() async {
        guard !closed else { return }
        closed = true
        _ = try? descriptor.sync()
        _ = try? descriptor.close()
    }
}

/// Writes the archive to standard output (for `cairn create -o -`).
public final class StandardOutputSink: ArchiveSink {
    private let descriptor = FileDescriptor.standardOutput

    public init() {}

    public func write(_ bytes: [UInt8]) async throws {
        try descriptor.writeAll(bytes)
    }

    public func finish() async throws {}

    public func abandon() async {}
}
