import Foundation
import Glibc

/// Writes a Cairn archive item by item, as a stream (`Spec/0001-container-format.md`).
///
/// ```swift
/// let archiver = try Archiver(writingTo: "/tmp/export.cairn")
/// try await archiver.appendItem(at: URL(filePath: "/srv/app/data"))
/// let properties = try await archiver.finish()
/// ```
///
/// Files are read in batches, cut into chunks (FastCDC by default), hashed (SHA-256) and
/// compressed on every core; the bytes are written in a deterministic order, so the same inputs
/// and configuration always give the same archive. Each chunk is stored once per archive.
///
/// - Important: Call the methods one at a time (they are `async` but not reentrant), and call
///   ``finish()`` exactly once. After an error the archive is abandoned: what was written is a
///   valid prefix up to its last commit record.
/// - Throws: Every method throws only ``CairnError`` or `CancellationError`.
public final class Archiver {
    private let configuration: Configuration
    private let sink: any ArchiveSink
    private let writer: ArchiveWriter
    private let chunker: Chunker
    private let processor: ChunkBatchProcessor
    private var warnings: [CairnError] = []
    /// (device, inode) of files with more than one link → their path in archive.
    private var hardLinks: [HardLinkKey: [UInt8]] = [:]
    /// Paths already used, to refuse duplicates.
    private var pathsInArchive: Set<[UInt8]> = []
    private var state: State = .open
    private var readBuffer: [UInt8] = []

    /// Export progress: `totalUnitCount` is the size estimate (or the bytes seen so far when there
    /// is none), `completedUnitCount` the content bytes archived.
    public let progress: Progress

    private enum State { case open, failed, finished }

    private struct HardLinkKey: Hashable {
        var device: UInt64
        var inode: UInt64
    }

    /// Output is handed to the sink once this many bytes are pending.
    private static let flushThreshold = 1 << 20

    /// Creates an archiver that writes to any sink.
    ///
    /// - Throws: `.invalidArgument` or `.limitExceeded` for a bad configuration.
    public init(sink: any ArchiveSink, configuration: Configuration = Configuration()) throws(CairnError) {
        var configuration = configuration
        configuration.batchBytes = max(configuration.batchBytes, configuration.chunking.maximum * 2)
        try configuration.header.validate()
        self.configuration = configuration
        self.sink = sink
        self.writer = try ArchiveWriter(header: configuration.header)
        self.chunker = Chunker(policy: configuration.chunking)
        self.processor = ChunkBatchProcessor(
            compression: configuration.effectiveCompression, concurrency: configuration.concurrency)
        let total = configuration.sizeEstimate.map { Int64(clamping: $0) } ?? 0
        self.progress = Progress(totalUnitCount: total)
    }

    /// Creates an archiver writing to a file through ``FileSink``: the archive appears at `path`
    /// only when ``finish()`` succeeds.
    public convenience init(writingTo path: String, configuration: Configuration = Configuration()) throws(CairnError) {
        try self.init(sink: FileSink(path: path), configuration: configuration)
    }

    /// Runs `body` with a new archiver writing to `path`, then finishes it.
    ///
    /// If `body` throws or the task is cancelled, the archive is abandoned (left as
    /// `<path>.partial`, resumable) and the error is rethrown.
    /// - Returns: the export properties.
    public static func withArchiver(
        writingTo path: String, configuration: Configuration = Configuration(),
        _ body: (Archiver) async throws -> Void
    ) async throws -> ExportProperties {
        let archiver = try Archiver(writingTo: path, configuration: configuration)
        do {
            try await body(archiver)
        } catch {
            await archiver.abandon()
            throw error
        }
        return try await archiver.finish()
    }

    // MARK: - Appending

    /// Appends the file, directory (recursively) or symlink at `url`, stored under its last path
    /// component (as `tar` does: `some/dir` is stored as `dir/...`).
    ///
    /// - Throws: `CairnError` (`.notFound` when `url` does not exist, `.io` when the sink
    ///   fails) or `CancellationError`. Problems with single files inside a directory (unreadable,
    ///   changed while read, unsupported type) do not throw; they are collected in
    ///   ``ExportProperties/warnings``.
    public func appendItem(at url: URL) async throws {
        let path = Archiver.fileSystemPath(url)
        try await appendItem(atPath: path)
    }

    /// Appends the item at `url` under `pathInArchive` (a relative path with `/` separators).
    public func appendItem(at url: URL, pathInArchive: String) async throws {
        try await appendItem(atPath: Archiver.fileSystemPath(url), pathInArchive: Array(pathInArchive.utf8))
    }

    /// Appends the item at the raw file-system path `path` under its last component; a path
    /// whose last component is `.`, `..` or `/` stores the directory's contents at the top level.
    package func appendItem(atPath path: [UInt8]) async throws {
        let last = PathBytes.lastComponent(path)
        if last == [0x2E] || last == [0x2E, 0x2E] || last == [0x2F] || last.isEmpty {
            try await appendItem(atPath: path, pathInArchive: [])
        } else {
            try await appendItem(atPath: path, pathInArchive: last)
        }
    }

    /// Appends the item at the raw file-system path `path` under the raw `pathInArchive`; an
    /// empty `pathInArchive` stores a directory's contents at the top level.
    package func appendItem(atPath path: [UInt8], pathInArchive: [UInt8]) async throws {
        try checkOpen()
        let name = pathInArchive.isEmpty ? [] : try Archiver.normalizedPathInArchive(pathInArchive)
        let status: FileStatus
        do {
            status = try FileStatus.of(path)
        } catch {
            throw error.withDisplay(PathBytes.display(path))
        }
        try await guarded {
            try await self.appendTree(sourcePath: path, parent: nil, name: path, status: status, archivePath: name)
            try await self.flush(force: true)
        }
    }

    /// Appends a file whose content comes from an async sequence of byte arrays.
    ///
    /// - Parameters:
    ///   - bytes: the content, in pieces of any size.
    ///   - pathInArchive: where the file is stored.
    ///   - permissions: mode bits, default `0o644`.
    ///   - modificationTime: nanoseconds since the Unix epoch, default now.
    public func append<S: AsyncSequence>(
        contentsOf bytes: S, pathInArchive: String, permissions: UInt32 = 0o644, modificationTime: Int64? = nil
    ) async throws where S.Element == [UInt8] {
        try checkOpen()
        let name = try Archiver.normalizedPathInArchive(Array(pathInArchive.utf8))
        let mtime = modificationTime ?? Int64(Date().timeIntervalSince1970 * 1_000_000_000)
        try await guarded {
            try self.claim(name)
            let entry = ArchiveEntry(pathBytes: name, kind: .file, permissions: permissions & 0o7777, modificationTime: mtime)
            try self.writer.beginEntry(entry)
            var pending: [UInt8] = []
            for try await piece in bytes {
                try Task.checkCancellation()
                pending.append(contentsOf: piece)
                if pending.count >= self.configuration.batchBytes {
                    pending = try await self.processChunks(of: pending, isFinal: false)
                }
            }
            _ = try await self.processChunks(of: pending, isFinal: true)
            try self.writer.endFile()
            try await self.flush(force: true)
        }
    }

    /// Writes the manifest and footer and completes the sink.
    ///
    /// - Returns: the export properties of the whole archive.
    public func finish() async throws -> ExportProperties {
        try checkOpen()
        try await guarded {
            try self.writer.finish()
            try await self.flush(force: true)
            do {
                try await self.sink.finish()
            } catch {
                throw Archiver.wrap(error)
            }
        }
        state = .finished
        progress.totalUnitCount = Int64(clamping: writer.contentBytes)
        progress.completedUnitCount = Int64(clamping: writer.contentBytes)
        return ExportProperties(
            uncompressedBytes: writer.contentBytes,
            compressedBytes: configuration.effectiveCompression == .none ? nil : writer.storedBytes,
            sizeEstimate: configuration.sizeEstimate, version: configuration.resourcesVersion,
            archiveBytes: writer.offset, entryCount: writer.entryCount, chunkCount: writer.chunkCount,
            referenceCount: writer.manifest.references.count, uniqueBytes: writer.uniqueBytes, warnings: warnings)
    }

    /// Abandons the archive: writes what is pending and tells the sink. Used after errors.
    public func abandon() async {
        guard state == .open else { return }
        state = .failed
        if let bytes = Optional(writer.takeOutput()), !bytes.isEmpty {
            try? await sink.write(bytes)
        }
        await sink.abandon()
    }

    // MARK: - Internals

    private func checkOpen() throws {
        try Task.checkCancellation()
        switch state {
        case .open: return
        case .failed: throw CairnError(.invalidArgument, "the archive was abandoned after an earlier error")
        case .finished: throw CairnError(.invalidArgument, "the archive is already finished")
        }
    }

    /// Runs `body`; on any error abandons the archive and rethrows (as CairnError or
    /// CancellationError).
    private func guarded(_ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch let error as CancellationError {
            await abandon()
            throw error
        } catch {
            await abandon()
            throw Archiver.wrap(error)
        }
    }

    static func wrap(_ error: any Error) -> any Error {
        if error is CairnError || error is CancellationError { return error }
        return CairnError(.io, "the sink failed", cause: String(describing: error))
    }

    private func flush(force: Bool) async throws {
        guard writer.pendingOutputCount >= Archiver.flushThreshold || (force && writer.pendingOutputCount > 0) else {
            return
        }
        let bytes = writer.takeOutput()
        do {
            try await sink.write(bytes)
        } catch {
            throw Archiver.wrap(error)
        }
    }

    private func claim(_ path: [UInt8]) throws(CairnError) {
        guard pathsInArchive.insert(path).inserted else {
            throw CairnError(.alreadyExists, "path is already in the archive", path: PathBytes.display(path))
        }
    }

    private func warn(_ error: CairnError) {
        warnings.append(error)
    }

    /// Appends one item and, for directories, everything below it, depth first in byte order.
    private func appendTree(
        sourcePath: [UInt8], parent: FileDescriptor?, name: [UInt8], status: FileStatus, archivePath: [UInt8]
    ) async throws {
        try Task.checkCancellation()
        let display = PathBytes.display(sourcePath)
        if !archivePath.isEmpty, let problem = PathValidator.problem(with: archivePath) {
            warn(CairnError(.limitExceeded, "path in archive \(problem); skipped", path: display))
            return
        }
        switch status.kind {
        case .directory:
            let directory: FileDescriptor
            do {
                directory = try FileSystem.openDirectory(name, in: parent, display: display)
            } catch {
                warn(error.withDisplay(display))
                return
            }
            defer { _ = try? directory.close() }
            if !archivePath.isEmpty {
                try claim(archivePath)
                try writer.beginEntry(
                ArchiveEntry(
                    pathBytes: archivePath, kind: .directory, permissions: status.permissions,
                        modificationTime: status.modificationTime, userID: status.userID, groupID: status.groupID))
            }
            let names: [[UInt8]]
            do {
                names = try DirectoryReader.names(in: directory)
            } catch {
                warn(error.withDisplay(display))
                return
            }
            for child in names {
                let childPath = PathBytes.join(sourcePath, child)
                let childStatus: FileStatus
                do {
                    childStatus = try FileStatus.of(child, relativeTo: directory)
                } catch {
                    warn(error.withDisplay(PathBytes.display(childPath)))
                    continue
                }
                try await appendTree(
                    sourcePath: childPath, parent: directory, name: child, status: childStatus,
                    archivePath: PathBytes.join(archivePath, child))
            }
        case .symlink:
            let target: [UInt8]
            do {
                target = try FileSystem.readSymlink(name, in: parent, display: display)
            } catch {
                warn(error.withDisplay(display))
                return
            }
            try claim(archivePath)
            try writer.beginEntry(
                ArchiveEntry(
                    pathBytes: archivePath, kind: .symlink, permissions: status.permissions,
                    modificationTime: status.modificationTime, userID: status.userID, groupID: status.groupID,
                    linkTarget: target))
        case .regular:
            if status.linkCount > 1 {
                let key = HardLinkKey(device: status.device, inode: status.inode)
                if let first = hardLinks[key] {
                    try claim(archivePath)
                    try writer.beginEntry(
                        ArchiveEntry(
                            pathBytes: archivePath, kind: .hardLink, permissions: status.permissions,
                            modificationTime: status.modificationTime, userID: status.userID, groupID: status.groupID,
                            linkTarget: first))
                    return
                }
            }
            if try await appendFile(name: name, parent: parent, display: display, status: status, archivePath: archivePath),
                status.linkCount > 1
            {
                hardLinks[HardLinkKey(device: status.device, inode: status.inode)] = archivePath
            }
        default:
            warn(CairnError(.unsupportedFileType, "\(status.kind) files are not archived; skipped", path: display))
        }
        try await flush(force: false)
    }

    /// Appends a regular file's entry and content.
    ///
    /// - Returns: whether an entry was written (false when the file was skipped with a warning).
    @discardableResult
    private func appendFile(
        name: [UInt8], parent: FileDescriptor?, display: String, status: FileStatus, archivePath: [UInt8]
    ) async throws -> Bool {
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.open(name, flags: O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK, relativeTo: parent)
        } catch {
            warn(error.withDisplay(display))
            return false
        }
        defer { _ = try? fd.close() }
        let before: FileStatus
        do {
            before = try fd.status()
        } catch {
            warn(error.withDisplay(display))
            return false
        }
        guard before.kind == .regular else {
            warn(CairnError(.sourceChanged, "was replaced by a \(before.kind) after it was listed; skipped", path: display))
            return false
        }
        try claim(archivePath)
        try writer.beginEntry(
            ArchiveEntry(
                pathBytes: archivePath, kind: .file, permissions: before.permissions,
                modificationTime: before.modificationTime, size: before.size, userID: before.userID,
                groupID: before.groupID))
        if progress.totalUnitCount < Int64(clamping: writer.contentBytes + before.size) && configuration.sizeEstimate == nil {
            progress.totalUnitCount = Int64(clamping: writer.contentBytes + before.size)
        }
        let batch = configuration.batchBytes
        var carry = 0
        var readTotal: UInt64 = 0
        var readError: CairnError?
        if readBuffer.count < batch { readBuffer = [UInt8](repeating: 0, count: batch) }
        while true {
            try Task.checkCancellation()
            var n = 0
            do {
                n = try readBuffer.withMutableBytes { (raw) throws(CairnError) in
                    try fd.readFully(into: UnsafeMutableRawBufferPointer(rebasing: raw[carry...]))
                }
            } catch {
                readError = error.withDisplay(display)
            }
            readTotal += UInt64(n)
            let isFinal = carry + n < batch
            let filled = carry + n
            carry = try await processBuffer(count: filled, isFinal: isFinal)
            progress.completedUnitCount = Int64(clamping: writer.contentBytes)
            try await flush(force: false)
            if isFinal { break }
        }
        try writer.endFile()
        if let readError {
            warn(CairnError(.io, "read failed; only the first \(readTotal) bytes were archived", path: display, cause: readError.cause))
            return true
        }
        let after = try? fd.status()
        if let after,
            after.size != before.size || after.modificationTime != before.modificationTime
                || after.changeTime != before.changeTime || readTotal != before.size
        {
            warn(
                CairnError(
                    .sourceChanged,
                    "changed while it was read (size \(before.size) → \(after.size), \(readTotal) bytes archived)",
                    path: display))
        }
        return true
    }

    /// Chunks `readBuffer[0..<count]`, processes every complete chunk, moves the undetermined tail
    /// to the front, and returns its length.
    private func processBuffer(count: Int, isFinal: Bool) async throws -> Int {
        var ranges: [Range<Int>] = []
        var position = 0
        readBuffer.withUnsafeBytes { raw in
            while position < count {
                let window = UnsafeRawBufferPointer(rebasing: raw[position..<count])
                guard let length = chunker.nextChunkLength(in: window, isFinal: isFinal) else { break }
                ranges.append(position..<(position + length))
                position += length
            }
        }
        try await appendChunks(of: readBuffer, ranges: ranges)
        let rest = count - position
        if rest > 0 {
            readBuffer.withUnsafeMutableBytes { raw in
                guard let base = raw.baseAddress else { return }
                memmove(base, base + position, rest)
            }
        }
        return rest
    }

    /// Chunks an owned buffer (used by ``append(contentsOf:pathInArchive:permissions:modificationTime:)``)
    /// and returns the undetermined tail.
    private func processChunks(of buffer: [UInt8], isFinal: Bool) async throws -> [UInt8] {
        var ranges: [Range<Int>] = []
        var position = 0
        buffer.withUnsafeBytes { raw in
            while position < buffer.count {
                let window = UnsafeRawBufferPointer(rebasing: raw[position...])
                guard let length = chunker.nextChunkLength(in: window, isFinal: isFinal) else { break }
                ranges.append(position..<(position + length))
                position += length
            }
        }
        try await appendChunks(of: buffer, ranges: ranges)
        progress.completedUnitCount = Int64(clamping: writer.contentBytes)
        try await flush(force: false)
        return Array(buffer[position...])
    }

    /// Hashes the chunks, compresses the new ones, and appends them in order.
    private func appendChunks(of buffer: [UInt8], ranges: [Range<Int>]) async throws {
        guard !ranges.isEmpty else { return }
        let ids = try await processor.hash(buffer, ranges: ranges)
        var newRanges: [Range<Int>] = []
        var seen: Set<Digest> = []
        for (id, range) in zip(ids, ranges) where !writer.contains(id) && seen.insert(id).inserted {
            newRanges.append(range)
        }
        let stored = try await processor.compress(buffer, ranges: newRanges)
        var next = 0
        for (id, range) in zip(ids, ranges) {
            if writer.contains(id) {
                try writer.appendChunk(id: id, rawLength: range.count, codec: .none, stored: nil)
            } else {
                let chunk = stored[next]
                next += 1
                try chunk.bytes.withBytes { (raw) throws(CairnError) in
                    try writer.appendChunk(id: id, rawLength: range.count, codec: chunk.codec, stored: raw)
                }
            }
        }
    }

    // MARK: - Paths

    /// The raw file-system bytes of a file URL.
    static func fileSystemPath(_ url: URL) -> [UInt8] {
        url.withUnsafeFileSystemRepresentation { pointer in
            guard let pointer else { return Array(url.path.utf8) }
            return Array(UnsafeBufferPointer(start: UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self), count: strlen(pointer)))
        }
    }

    /// Checks a caller-given path in archive: relative, no empty, `.` or `..` components, no NUL;
    /// trailing slashes are dropped.
    ///
    /// - Throws: `.unsafePath` naming the path.
    static func normalizedPathInArchive(_ path: [UInt8]) throws(CairnError) -> [UInt8] {
        var trimmed = path
        while trimmed.count > 1, trimmed.last == 0x2F { trimmed.removeLast() }
        if let problem = PathValidator.problem(with: trimmed) {
            throw CairnError(.unsafePath, "path in archive \(problem)", path: PathBytes.display(path))
        }
        return trimmed
    }
}
