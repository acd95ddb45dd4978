import Foundation
import Glibc

/// Extracts an archive read once, front to back, from a pipe or any descriptor
/// (`Spec/0001-container-format.md §13.2`): nothing is seeked, every byte is verified by the
/// ``ArchiveScanner`` before it is written, and the result is renamed into place only after
/// the footer verified.
///
/// A reference to a chunk stored earlier in the stream is served by reading the bytes back from
/// the staged file that first received them (and checking their SHA-256 again), so memory holds
/// only the chunks between two reference records, never the archive's whole dedup set.
final class StreamExtractor {
    private let staging: StagingDirectory
    private let options: ExtractionOptions
    private let progress: Progress?
    private let scanner = ArchiveScanner()

    /// Where a chunk's bytes were first written: staged path, offset, length.
    private var locations: [Digest: (path: [UInt8], offset: UInt64, length: Int)] = [:]
    /// Chunks seen since the last references record.
    private var pending: [Digest: [UInt8]] = [:]
    private var openFile: (entry: ArchiveEntry, fd: FileDescriptor, written: UInt64)?
    private var directories: [ArchiveEntry] = []
    private var symlinks: [ArchiveEntry] = []
    private var outputBytes: UInt64 = 0
    private var declaredBytes: UInt64 = 0

    init(staging: StagingDirectory, options: ExtractionOptions, progress: Progress?) {
        self.staging = staging
        self.options = options
        self.progress = progress
    }

    /// Reads the whole stream and extracts it into the staging directory; on success the
    /// staging directory is committed, on failure discarded.
    ///
    /// - Throws: the first problem, naming the offset in the stream or the entry.
    func run(_ stream: RecordStream) async throws -> VerificationReport {
        do {
            try scanner.start(stream)
            if let estimate = scanner.header?.sizeEstimate { progress?.totalUnitCount = Int64(clamping: estimate) }
            while let record = try stream.next() {
                try Task.checkCancellation()
                try scanner.consume(record) { event in try self.handle(event) }
                if scanner.footer != nil { break }
            }
            guard scanner.footer != nil else {
                throw CairnError(
                    .truncated,
                    "the stream ended before the archive's footer; \(scanner.verifiedLength) bytes verified up to the last commit",
                    offset: stream.offset)
            }
            guard try stream.isAtEnd() else {
                throw CairnError(.corrupted, "data after the footer", offset: stream.offset)
            }
            try finishTree()
            if let open = openFile { _ = try? open.fd.close() }
            try staging.commit()
        } catch {
            if let open = openFile { _ = try? open.fd.close() }
            openFile = nil
            staging.discard()
            throw error
        }
        let totals = scanner.totals
        return VerificationReport(
            archiveBytes: stream.offset, entryCount: totals.entries, fileCount: totals.files, chunkCount: totals.chunks,
            referenceCount: totals.references, contentBytes: totals.contentBytes, storedBytes: totals.storedBytes,
            commitCount: totals.commits)
    }

    private func handle(_ event: ArchiveScanner.Event) throws {
        switch event {
        case .entry(_, let entry, _):
            try begin(entry)
        case .chunk(let id, let bytes):
            pending[id] = bytes
        case .references(_, let references):
            try write(references)
        case .fileEnd(_, let size):
            guard let open = openFile else { return }
            guard open.written == size else {
                throw CairnError(.corrupted, "file size does not match its content", path: open.entry.path)
            }
            try FileSystem.setPermissions(
                PathBytes.lastComponent(open.entry.pathBytes), in: try staging.parentDirectory(of: open.entry.pathBytes),
                mode: open.entry.permissions, display: open.entry.path)
            try FileSystem.setModificationTime(of: open.fd, nanoseconds: open.entry.modificationTime)
            try open.fd.close()
            openFile = nil
            pending.removeAll()
        case .commit, .footer:
            break
        }
    }

    private func begin(_ entry: ArchiveEntry) throws {
        let name = PathBytes.lastComponent(entry.pathBytes)
        switch entry.kind {
        case .directory:
            let parent = try staging.parentDirectory(of: entry.pathBytes)
            if (try? FileStatus.of(name, relativeTo: parent))?.kind != .directory {
                try FileSystem.makeDirectory(name, in: parent, mode: 0o700, display: entry.path)
            }
            directories.append(entry)
        case .file:
            let (total, overflow) = declaredBytes.addingReportingOverflow(entry.size)
            guard !overflow, total <= options.maximumOutputBytes else {
                throw CairnError(
                    .limitExceeded, "the archive declares more than \(options.maximumOutputBytes) bytes of output",
                    path: entry.path)
            }
            declaredBytes = total
            if options.checkFreeSpace, let free = staging.availableBytes, entry.size > free {
                throw CairnError(
                    .limitExceeded, "the file declares \(entry.size) bytes but only \(free) bytes are free", path: entry.path)
            }
            let parent = try staging.parentDirectory(of: entry.pathBytes)
            let fd = try FileDescriptor.open(
                name, flags: O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o600, relativeTo: parent)
            openFile = (entry, FileDescriptor(rawValue: fd.rawValue, path: entry.path), 0)
        case .hardLink:
            let parent = try staging.parentDirectory(of: entry.pathBytes)
            try FileSystem.makeHardLink(from: entry.linkTarget, in: staging.descriptor, to: name, in: parent, display: entry.path)
        case .symlink:
            symlinks.append(entry)
        default:
            throw CairnError(.unsupportedFileType, "entry kind \(entry.kind) cannot be extracted", path: entry.path)
        }
    }

    private func write(_ references: [ChunkReference]) throws {
        guard var open = openFile else { return }
        for reference in references {
            let bytes: [UInt8]
            if let fresh = pending.removeValue(forKey: reference.id) {
                bytes = fresh
                if locations[reference.id] == nil {
                    locations[reference.id] = (open.entry.pathBytes, open.written, bytes.count)
                }
            } else {
                bytes = try readBack(reference.id, openFile: open)
            }
            let (total, overflow) = outputBytes.addingReportingOverflow(UInt64(bytes.count))
            guard !overflow, total <= options.maximumOutputBytes else {
                throw CairnError(
                    .limitExceeded, "the archive writes more than \(options.maximumOutputBytes) bytes", path: open.entry.path)
            }
            outputBytes = total
            try open.fd.writeAll(bytes)
            open.written += UInt64(bytes.count)
            if let progress { progress.completedUnitCount = min(Int64(clamping: outputBytes), max(progress.totalUnitCount, Int64(clamping: outputBytes))) }
        }
        openFile = open
    }

    /// Reads a chunk back from where it was first written and checks its SHA-256.
    private func readBack(_ id: Digest, openFile open: (entry: ArchiveEntry, fd: FileDescriptor, written: UInt64))
        throws -> [UInt8]
    {
        guard let location = locations[id] else {
            throw CairnError(.corrupted, "reference to chunk \(id), whose bytes were not seen", path: open.entry.path)
        }
        var bytes = [UInt8](repeating: 0, count: location.length)
        let got: Int
        if location.path == open.entry.pathBytes {
            got = try bytes.withMutableBytes { (raw) throws(CairnError) in
                try open.fd.read(fromAbsoluteOffset: location.offset, into: raw)
            }
        } else {
            let parent = try staging.parentDirectory(of: location.path)
            let fd = try FileDescriptor.open(
                PathBytes.lastComponent(location.path), flags: O_RDONLY | O_NOFOLLOW, relativeTo: parent)
            got = try fd.closeAfter { () throws(CairnError) in
                try bytes.withMutableBytes { (raw) throws(CairnError) in
                    try fd.read(fromAbsoluteOffset: location.offset, into: raw)
                }
            }
        }
        guard got == location.length, try SHA256.hash(bytes) == id else {
            throw CairnError(
                .checksumMismatch, "chunk \(id) read back from \(PathBytes.display(location.path)) no longer matches",
                path: open.entry.path)
        }
        return bytes
    }

    /// Symlinks last, then directory modes and times deepest first.
    private func finishTree() throws {
        for entry in symlinks {
            let parent = try staging.parentDirectory(of: entry.pathBytes)
            let name = PathBytes.lastComponent(entry.pathBytes)
            try FileSystem.makeSymlink(name, target: entry.linkTarget, in: parent, display: entry.path)
            try FileSystem.setModificationTime(name, in: parent, nanoseconds: entry.modificationTime, display: entry.path)
        }
        for entry in directories.sorted(by: { $0.pathBytes.count > $1.pathBytes.count }) {
            try FileSystem.setPermissions(entry.pathBytes, in: staging.descriptor, mode: entry.permissions, display: entry.path)
            try FileSystem.setModificationTime(
                entry.pathBytes, in: staging.descriptor, nanoseconds: entry.modificationTime, display: entry.path)
        }
    }
}

extension Extractor {
    /// Extracts an archive read once, front to back, from `input` (a pipe, a socket, a file),
    /// verifying every byte before it counts; the result appears at `destination` only when the
    /// whole archive verified.
    ///
    /// - Returns: what was verified.
    /// - Throws: as ``extractAll(to:options:)``; `.truncated` when the input ends early.
    public static func extractStream(
        from input: FileHandle, to destination: URL, options: ExtractionOptions = ExtractionOptions(),
        progress: Progress? = nil
    ) async throws -> VerificationReport {
        let descriptor = FileDescriptor(rawValue: input.fileDescriptor, path: "<input>")
        let staging = try StagingDirectory(for: Archiver.fileSystemPath(destination))
        let extractor = StreamExtractor(staging: staging, options: options, progress: progress)
        return try await extractor.run(RecordStream(descriptor: descriptor))
    }
}
