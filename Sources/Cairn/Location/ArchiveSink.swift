import Foundation
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

/// A sink that can be cut back to an earlier offset, so that a file that fails after its bytes
/// were written is left out instead of failing the archive (``FileSink``; an object store's
/// sink while the bytes are still in its unsent part).
package protocol RewindableArchiveSink: ArchiveSink {
    /// Cuts the archive back to `offset` and continues writing there.
    ///
    /// - Throws: `CairnError` when the bytes after `offset` can no longer be taken back.
    func truncate(to offset: UInt64) throws(CairnError)
}

/// A sink told where the commit records are, so that it can cut the archive into pieces that
/// each end at a commit (an object store's parts, `Spec/0003-command-line.md §3.3`).
package protocol CommitAwareArchiveSink: ArchiveSink {
    /// Consumes the next bytes, and the commit records ending in them or before (in order).
    nonisolated(nonsending) func write(_ bytes: [UInt8], commits: [CommitPoint]) async throws
}

/// A sink that writes a local file which may lie inside a tree being archived (the archive
/// itself, standard output redirected to a file, an upload's state file): the archiver leaves
/// that file out, recognised by device and inode (`Spec/0003-command-line.md §3.1`).
package protocol LocalFileWritingSink: ArchiveSink {
    /// The file's device and inode, or nil when it is not a file that could be archived.
    var writtenFileIdentity: (device: UInt64, inode: UInt64)? { get }
}

/// Writes the archive to a file that appears at its final path only when complete.
///
/// Bytes go to `<path>.partial` in the same directory, locked with `flock(2)` from before it is
/// truncated until after it is renamed into place, so a second writer of the same archive is
/// refused (`.busy`) and can never cut the file being published. ``finish()`` calls `fsync(2)`
/// and renames it to `path`; an existing `path` is replaced only when `overwrite` is true, and
/// only by that final rename (it is never deleted up front). ``abandon()`` leaves
/// `<path>.partial` behind, so an interrupted archive can be inspected or resumed; nothing is
/// ever left at `path` itself.
public final class FileSink: ArchiveSink, RewindableArchiveSink, LocalFileWritingSink {
    /// The final path.
    public let path: String
    /// The temporary path written to until ``finish()``.
    public let partialPath: String
    /// Whether ``finish()`` may replace an existing file at ``path``.
    public let overwrite: Bool
    private let descriptor: FileDescriptor
    private var closed = false
    /// Called by ``finish()`` after the file is synced, just before it is renamed (tests use it
    /// to play a second writer while the lock must still be held).
    package var beforeRename: (() -> Void)?

    /// Creates `<path>.partial` (replacing an earlier one that no process holds) for writing.
    ///
    /// - Parameters:
    ///   - path: where the archive appears once complete.
    ///   - overwrite: whether an existing file at `path` may be replaced (at the final rename
    ///     only). Default false.
    /// - Throws: `CairnError` `.alreadyExists` when `path` exists and `overwrite` is false;
    ///   `.busy` when another process is writing `<path>.partial`; `.io` if the file cannot be
    ///   created.
    package convenience init(path: String, overwrite: Bool = false) throws(CairnError) {
        try self.init(path: path, overwrite: overwrite, replacingPartial: true)
    }

    /// Creates `<path>.partial` for the archive at `location`, a local file, as
    /// `init(path:overwrite:)`: the archive appears at `location` only once complete.
    ///
    /// - Parameters:
    ///   - location: `.file(path:)`, where the archive appears once complete.
    ///   - overwrite: whether an existing file at `location` may be replaced (at the final
    ///     rename only). Default false.
    /// - Throws: `CairnError` naming the archive: `.invalidArgument` for a location that is not
    ///   a local file; `.alreadyExists` when the file exists and `overwrite` is false; `.busy`
    ///   when another process is writing `<path>.partial`; `.io` if the file cannot be created.
    public convenience init(writingTo location: ArchiveLocation, overwrite: Bool = false) throws(CairnError) {
        try self.init(path: location.requireFile(for: "the archive"), overwrite: overwrite)
    }

    /// Like `init(path:overwrite:)`; with `replacingPartial` false an existing
    /// `<path>.partial` (an interrupted archive) is left untouched and refused.
    ///
    /// - Throws: as `init(path:overwrite:)`, and `.alreadyExists` naming `<path>.partial` when
    ///   it exists and `replacingPartial` is false (`.busy` first if a process holds it).
    package init(path: String, overwrite: Bool, replacingPartial: Bool) throws(CairnError) {
        self.path = path
        self.partialPath = ArchiveLocation.partialPath(of: path)
        self.overwrite = overwrite
        if !overwrite, (try? FileStatus.of(Array(path.utf8))) != nil {
            throw CairnError(.alreadyExists, "archive already exists", path: path)
        }
        // Lock before truncating, so a second writer to the same path can never cut the first
        // one's file (flock(2), released when the descriptor closes or the process dies).
        // O_NOFOLLOW: a symlink planted at the partial's name must not make us write (or create)
        // the file it points to.
        var created = true
        let fresh: FileDescriptor?
        do throws(CairnError) {
            fresh = try FileDescriptor.open(partialPath, flags: O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o644)
        } catch {
            guard error.code == .alreadyExists else { throw error }
            fresh = nil
        }
        if let fresh {
            descriptor = fresh
        } else {
            descriptor = try FileDescriptor.open(partialPath, flags: O_WRONLY | O_CREAT | O_NOFOLLOW, mode: 0o644)
            created = false
        }
        try Self.lock(descriptor, path: partialPath)
        if !created, !replacingPartial {
            _ = try? descriptor.close()
            throw CairnError(.alreadyExists, "an interrupted archive is already here", path: partialPath)
        }
        try descriptor.truncate(to: 0)
    }

    private static func lock(_ descriptor: FileDescriptor, path: String) throws(CairnError) {
        guard flock(descriptor.rawValue, LOCK_EX | LOCK_NB) == 0 else {
            let error = Errno.current
            _ = try? descriptor.close()
            if error.rawValue == EWOULDBLOCK {
                throw CairnError(.busy, "another cairn process is writing this archive", path: path)
            }
            throw error.error("cannot lock", path: path)
        }
    }

    /// Reopens `<path>.partial` to continue it at `offset`: everything after `offset` is cut off
    /// (`ftruncate(2)`) and writing continues there, or at `start` before it (a resumed 2.1
    /// writer writes its last commit record again, §10.4).
    ///
    /// - Parameters:
    ///   - start: where the first byte written goes, at most `offset`; nil: `offset`.
    ///   - overwrite: whether ``finish()`` may replace an existing file at `path`.
    /// - Throws: `.notFound` when there is no `<path>.partial`; `.busy` when another process is
    ///   writing it; `.io`.
    package init(resuming path: String, at offset: UInt64, writingFrom start: UInt64? = nil, overwrite: Bool = false) throws(CairnError) {
        self.path = path
        self.partialPath = ArchiveLocation.partialPath(of: path)
        self.overwrite = overwrite
        descriptor = try FileDescriptor.open(partialPath, flags: O_WRONLY | O_NOFOLLOW)
        try Self.lock(descriptor, path: partialPath)
        try descriptor.truncate(to: offset)
        try descriptor.seek(to: min(start ?? offset, offset))
    }

    /// Opens `<path>.partial` for a fetch to continue: created if missing, locked, and left as
    /// it is (the caller finds its verified prefix and calls ``truncate(to:)``).
    ///
    /// - Throws: `.alreadyExists` when `path` exists and `overwrite` is false; `.busy` when
    ///   another process is writing `<path>.partial`; `.io`.
    package init(continuing path: String, overwrite: Bool) throws(CairnError) {
        self.path = path
        self.partialPath = ArchiveLocation.partialPath(of: path)
        self.overwrite = overwrite
        if !overwrite, (try? FileStatus.of(Array(path.utf8))) != nil {
            throw CairnError(.alreadyExists, "already exists (use --force to replace it)", path: path)
        }
        descriptor = try FileDescriptor.open(partialPath, flags: O_WRONLY | O_CREAT | O_NOFOLLOW, mode: 0o644)
        try Self.lock(descriptor, path: partialPath)
    }

    /// Bytes in `<path>.partial` now.
    package var partialLength: UInt64 {
        get throws(CairnError) { try descriptor.status().size }
    }

    /// Appends bytes where the file's offset is (after ``truncate(to:)``), blocking.
    ///
    /// - Throws: `.io` naming ``partialPath`` (a full disk is `ENOSPC`).
    package func append(_ bytes: UnsafeRawBufferPointer) throws(CairnError) {
        try descriptor.writeAll(bytes)
        wroteBytes(bytes.count)
    }

    /// Bytes written since writeback was last started.
    private var unflushed = 0
    /// How many written bytes start their writeback together (8 MiB).
    private static let writebackBytes = 8 << 20

    /// Starts writeback of every ``writebackBytes`` written, as they are written, so that the
    /// `fsync(2)` of ``finish()`` waits only for the last few MiB instead of the whole archive
    /// (measured on a 314 MiB fetch: the final fsync took 0.18 s). The disk then writes while
    /// the archive is still being produced.
    private func wroteBytes(_ count: Int) {
        unflushed += count
        guard unflushed >= Self.writebackBytes, let end = descriptor.currentOffset, end >= UInt64(unflushed) else { return }
        descriptor.startWriteback(at: end - UInt64(unflushed), count: unflushed)
        unflushed = 0
    }

    /// The device and inode of the file being written, so the archiver can leave it out when
    /// it lies inside the tree being archived.
    package var writtenFileIdentity: (device: UInt64, inode: UInt64)? {
        guard let status = try? descriptor.status() else { return nil }
        return (status.device, status.inode)
    }

    /// Cuts the file back to `offset` and continues writing there (resuming at an earlier
    /// commit, or leaving out a source file that failed after its bytes were written).
    ///
    /// - Throws: `.io` naming ``partialPath``.
    package func truncate(to offset: UInt64) throws(CairnError) {
        try descriptor.truncate(to: offset)
        try descriptor.seek(to: offset)
        unflushed = 0
    }

    public func write(_ bytes: [UInt8]) async throws {
        try descriptor.writeAll(bytes)
        wroteBytes(bytes.count)
    }

    /// Syncs `<path>.partial`, renames it to `path` (`renameat2(RENAME_NOREPLACE)` unless
    /// ``overwrite``), and only then closes it, releasing the lock.
    ///
    /// - Throws: `.alreadyExists` when a file appeared at `path` while the archive was written
    ///   and ``overwrite`` is false (the archive stays at `<path>.partial`); `.io`.
    public func finish() async throws {
        guard !closed else { return }
        try descriptor.sync()
        beforeRename?()
        if overwrite {
            try FileSystem.rename(Array(partialPath.utf8), to: Array(path.utf8), display: path)
        } else {
            do throws(CairnError) {
                try FileSystem.renameNoReplace(Array(partialPath.utf8), in: nil, to: Array(path.utf8), in: nil, display: path)
            } catch {
                guard error.code == .alreadyExists else { throw error }
                throw CairnError(
                    .alreadyExists, "appeared while the archive was written; the archive was left at \(partialPath)",
                    path: path)
            }
        }
        closed = true
        try descriptor.close()
    }

    public func abandon() async {
        guard !closed else { return }
        closed = true
        _ = try? descriptor.sync()
        _ = try? descriptor.close()
    }
}

extension FileSink {
    /// The final location, as a `file:` URL (``path``).
    public var url: URL { URL(filePath: path) }
}

/// Writes the archive to standard output (for `cairn create -o -`).
public final class StandardOutputSink: ArchiveSink, LocalFileWritingSink {
    private let descriptor = FileDescriptor.standardOutput

    public init() {}

    public func write(_ bytes: [UInt8]) async throws {
        try descriptor.writeAll(bytes)
    }

    public func finish() async throws {}

    public func abandon() async {}

    /// The device and inode of standard output when it is a regular file (`cairn create -o - DIR
    /// > DIR/out.cairn`), so the archiver leaves it out of the tree as it does a ``FileSink``'s
    /// file (tar's check of its own archive); nil for a pipe, a terminal or a device.
    package var writtenFileIdentity: (device: UInt64, inode: UInt64)? {
        guard let status = try? descriptor.status(), status.kind == .regular else { return nil }
        return (status.device, status.inode)
    }
}

extension CairnError {
    /// What a sink's failure becomes for the archiver's caller: a `CairnError` or a
    /// cancellation as it is, anything else (a caller's own ``ArchiveSink`` threw it) as `.io`
    /// "the sink failed" with the error's description as its cause.
    static func sinkFailure(wrapping error: any Error) -> any Error {
        if error is CairnError || error is CancellationError { return error }
        return CairnError(.io, "the sink failed", cause: String(describing: error))
    }
}
