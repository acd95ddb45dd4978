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
    /// Chunk contents are decoded and checked by detached tasks (every core), structure here.
    private let scanner = ArchiveScanner(emittingChunkPayloads: true)

    /// Where a chunk's bytes were first written: staged path, offset, length.
    private var locations: [Digest: (path: [UInt8], offset: UInt64, length: Int)] = [:]
    /// Chunks seen since the last references record, being decoded and checked.
    private var pending: [Digest: Task<[UInt8], any Error>] = [:]
    /// The file being written; `fd` is nil while skipping a file an interrupted run completed.
    private var openFile: (entry: ArchiveEntry, fd: FileDescriptor?, written: UInt64)?
    /// Resuming: entries below this index were completed by the interrupted run.
    private var skipUntil = 0
    /// Resuming: the chain digest the interrupted run journaled at entry count `skipUntil`.
    private var expectedDigest: Digest?
    private static let journalIdentity = "cairn-journal 1 stream"
    /// Resuming: whether the stream's commit at `skipUntil` entries matched the journal.
    private var resumePointVerified = false
    private var directories: [ArchiveEntry] = []
    private var symlinks: [ArchiveEntry] = []
    private var outputBytes: UInt64 = 0
    private var declaredBytes: UInt64 = 0

    init(staging: StagingDirectory, options: ExtractionOptions, progress: Progress?) throws(CairnError) {
        self.staging = staging
        self.options = options
        self.progress = progress
        if staging.isResumed {
            let lines = staging.journal()
            guard lines.first == Self.journalIdentity else {
                staging.release()
                throw CairnError(.notResumable, "the interrupted extraction staged here was not read from a stream")
            }
            if let last = lines.last?.split(separator: " "), last.count == 3, last[0] == "commit",
                let count = Int(last[1]), let digest = Digest(hexString: String(last[2]))
            {
                skipUntil = count
                expectedDigest = digest
            }
        } else {
            try staging.appendJournal(Self.journalIdentity)
        }
    }

    /// Reads the whole stream and extracts it into the staging directory; on success the
    /// staging directory is committed, on failure discarded.
    ///
    /// - Throws: the first problem, naming the offset in the stream or the entry.
    nonisolated(nonsending) func run(_ stream: RecordStream) async throws -> VerificationReport {
        do {
            try scanner.start(stream)
            if let estimate = scanner.header?.sizeEstimate { progress?.totalUnitCount = Int64(clamping: estimate) }
            while let record = try stream.next() {
                try Task.checkCancellation()
                var events: [ArchiveScanner.Event] = []
                try scanner.consume(record) { events.append($0) }
                for event in events { try await handle(event) }
                if scanner.footer != nil { break }
            }
            guard scanner.footer != nil else {
                throw CairnError(
                    .truncated,
                    "the stream ended before the archive's footer; \(scanner.verifiedLength) bytes verified up to the last commit",
                    offset: stream.offset)
            }
            try scanner.requireEnd(of: stream)
            try finishTree()
            if let open = openFile { _ = try? open.fd?.close() }
            try staging.commit()
        } catch {
            if let open = openFile { _ = try? open.fd?.close() }
            openFile = nil
            if let error = error as? CairnError, error.code == .truncated {
                // Keep what verified: `extract --resume` continues from the journal.
                staging.release()
                var kept = error
                kept.message +=
                    "; \(scanner.verifiedLength) bytes verified up to the last commit are kept: rerun with --resume and the whole stream to continue"
                throw kept
            }
            if error is CancellationError || staging.isResumed {
                // Never delete work an interrupted run verified; the error says what is wrong.
                staging.release()
                throw error
            }
            staging.discard()
            throw error
        }
        let totals = scanner.totals
        return VerificationReport(
            archiveBytes: stream.offset, entryCount: totals.entries, fileCount: totals.files, chunkCount: totals.chunks,
            referenceCount: totals.references, contentBytes: totals.contentBytes, storedBytes: totals.storedBytes,
            commitCount: totals.commits)
    }

    private nonisolated(nonsending) func handle(_ event: ArchiveScanner.Event) async throws {
        switch event {
        case .entry(let index, let entry, _):
            if index < skipUntil {
                try skip(entry)
            } else {
                if staging.isResumed, entry.kind != .directory { try staging.removeLeftover(entry.pathBytes) }
                try begin(entry)
            }
        case .chunk(let id, let payload?, let offset):
            // The scanner has checked the prefix, so this is the real raw length.
            let rawLength = ChunkRecordPrefix.declaredRawLength(inPayload: payload) ?? 1
            pending[id] = Task.detached {
                let decompressor = ChunkDecompressor()
                var out = [UInt8](repeating: 0, count: rawLength)
                try out.withMutableBytes { (raw) throws(CairnError) in
                    try ArchiveReader.decodeChunk(
                        payload, expected: id, rawLength: rawLength, offset: offset, using: decompressor, into: raw)
                }
                return out
            }
        case .references(_, let references):
            try await write(references)
        case .fileEnd(_, let size):
            guard let open = openFile else { return }
            guard open.written == size else {
                throw CairnError(.corrupted, "file size does not match its content", path: open.entry.path)
            }
            // Every chunk of the file must decode and verify, referenced or not.
            for task in pending.values { _ = try await task.value }
            guard let fd = open.fd else {
                openFile = nil
                pending.removeAll()
                return
            }
            try FileSystem.setExtractedPermissions(
                PathBytes.lastComponent(open.entry.pathBytes), in: try staging.parentDirectory(of: open.entry.pathBytes),
                mode: open.entry.permissions, display: open.entry.path)
            try FileSystem.setModificationTime(of: fd, nanoseconds: open.entry.modificationTime)
            try fd.close()
            openFile = nil
            pending.removeAll()
        case .chunk(_, nil, _):
            break  // not produced: this scanner emits payloads
        case .commit(_, let commit):
            guard commit.openEntry == CommitRecord.noOpenEntry, commit.entryCount > 0 else { return }
            let count = Int(commit.entryCount)
            if count == skipUntil, let expected = expectedDigest {
                guard commit.chainDigest == expected else {
                    throw CairnError(
                        .notResumable, "this stream is not the archive whose extraction was interrupted (entry \(count) differs)")
                }
                resumePointVerified = true
            }
            if count > skipUntil { try staging.appendJournal("commit \(count) \(commit.chainDigest.hexString)") }
        case .footer:
            if skipUntil > 0, !resumePointVerified {
                throw CairnError(
                    .notResumable,
                    "this stream is not the archive whose extraction was interrupted (it ends before entry \(skipUntil))")
            }
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

    /// Resuming: an entry the interrupted run completed. Files are not rewritten, but their
    /// chunks' locations are learned, for later references.
    private func skip(_ entry: ArchiveEntry) throws {
        switch entry.kind {
        case .directory:
            let parent = try staging.parentDirectory(of: entry.pathBytes)
            let name = PathBytes.lastComponent(entry.pathBytes)
            if (try? FileStatus.of(name, relativeTo: parent))?.kind != .directory {
                try FileSystem.makeDirectory(name, in: parent, mode: 0o700, display: entry.path)
            }
            directories.append(entry)
        case .file:
            openFile = (entry, nil, 0)
        case .symlink:
            symlinks.append(entry)
        default:
            break
        }
    }

    private nonisolated(nonsending) func write(_ references: [ChunkReference]) async throws {
        guard var open = openFile else { return }
        for reference in references {
            guard let fd = open.fd else {
                // Skipping a completed file: only learn where its chunks are (and still check
                // that they decode).
                if let task = pending.removeValue(forKey: reference.id) { _ = try await task.value }
                if locations[reference.id] == nil {
                    locations[reference.id] = (open.entry.pathBytes, open.written, reference.length)
                }
                open.written += UInt64(reference.length)
                continue
            }
            let bytes: [UInt8]
            if let fresh = pending.removeValue(forKey: reference.id) {
                bytes = try await fresh.value
                if locations[reference.id] == nil {
                    locations[reference.id] = (open.entry.pathBytes, open.written, bytes.count)
                }
            } else {
                bytes = try readBack(reference.id, into: open.entry, fd: fd)
            }
            let (total, overflow) = outputBytes.addingReportingOverflow(UInt64(bytes.count))
            guard !overflow, total <= options.maximumOutputBytes else {
                throw CairnError(
                    .limitExceeded, "the archive writes more than \(options.maximumOutputBytes) bytes", path: open.entry.path)
            }
            outputBytes = total
            try fd.writeAll(bytes)
            open.written += UInt64(bytes.count)
            if let progress {
                progress.completedUnitCount = min(Int64(clamping: outputBytes), max(progress.totalUnitCount, Int64(clamping: outputBytes)))
            }
        }
        openFile = open
    }

    /// Reads a chunk back from where it was first written and checks its SHA-256.
    private func readBack(_ id: Digest, into entry: ArchiveEntry, fd openFD: FileDescriptor) throws -> [UInt8] {
        guard let location = locations[id] else {
            throw CairnError(.corrupted, "reference to chunk \(id), whose bytes were not seen", path: entry.path)
        }
        var bytes = [UInt8](repeating: 0, count: location.length)
        let got: Int
        if location.path == entry.pathBytes {
            got = try bytes.withMutableBytes { (raw) throws(CairnError) in
                try openFD.read(fromAbsoluteOffset: location.offset, into: raw)
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
                path: entry.path)
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
            try FileSystem.setExtractedPermissions(entry.pathBytes, in: staging.descriptor, mode: entry.permissions, display: entry.path)
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
    nonisolated(nonsending) public static func extractStream(
        from input: FileHandle, to destination: URL, options: ExtractionOptions = ExtractionOptions(),
        progress: Progress? = nil
    ) async throws -> VerificationReport {
        let descriptor = FileDescriptor(rawValue: input.fileDescriptor, path: "<input>")
        let staging = try StagingDirectory(for: Archiver.fileSystemPath(destination), resume: options.resume)
        let extractor = try StreamExtractor(staging: staging, options: options, progress: progress)
        return try await extractor.run(RecordStream(descriptor: descriptor))
    }
}
