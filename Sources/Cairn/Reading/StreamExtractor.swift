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
    /// Checks every record; with a seekable archive's manifest, each row as its records arrive
    /// (so the manifest at the end is not decoded a second time).
    private let scanner: ArchiveScanner

    /// Where a chunk's bytes were first written: staged path (or, for a file that
    /// `--strip-components` drops, its unnamed scratch file), offset, length.
    private var locations = ChunkLocations()
    /// Files dropped by `stripComponents` are still written, to unnamed files (`O_TMPFILE`) in
    /// the staging directory, because later files may reference their chunks, and hard links
    /// their content; by archive path.
    private var scratchFiles: [[UInt8]: FileDescriptor] = [:]
    /// Top-level names already checked against an existing destination.
    private var checkedTopLevelNames: Set<[UInt8]> = []
    /// Chunks seen since the last references record, being decoded and checked.
    private var pending: [Digest: Task<[UInt8], any Error>] = [:]
    /// Inline chunks of the current pack, checked by the scanner: held until their reference.
    private var verified: [Digest: [UInt8]] = [:]
    /// The file being written, with its destination path (its path after `stripComponents`, or
    /// nil for a dropped file written to a scratch file); `file` is nil while skipping a file an
    /// interrupted run completed.
    private var openFile: (entry: ArchiveEntry, file: StagedFile?, written: UInt64, scratch: Bool)?
    /// Make the files: every change to the staging directory goes through them, each
    /// directory's in order (``FileSystemWriters``), except the rare ones made after
    /// ``FileSystemWriters/drain()`` (hard links, special files, scratch files, read-backs, a
    /// resumed run's skips).
    private let writer = FileSystemWriters()
    /// The umask, read before the writer's first job: a file whose mode it leaves whole is
    /// created with that mode, and needs no `fchmod` after.
    private let umask = StagingDirectory.umask
    /// Chunks whose verified bytes are all zero: a later reference to one is a hole, neither
    /// read back nor written.
    private var zeroChunks: Set<Digest> = []
    /// Resuming: entries below this index were completed by the interrupted run.
    private var skipUntil = 0
    /// Resuming: the chain digest the interrupted run journaled at entry count `skipUntil`.
    private var expectedDigest: Digest?
    /// Resuming: whether the stream's commit at `skipUntil` entries matched the journal.
    private var resumePointVerified = false
    private var directories: [ArchiveEntry] = []
    private var symlinks: [ArchiveEntry] = []
    /// Files whose mode denies their owner reading (0000, 0200): given it at the end, with the
    /// directories', since a later back-reference may read a chunk back from them.
    private var unreadableFiles: [ArchiveEntry] = []
    private var outputBytes: UInt64 = 0
    private var declaredBytes: UInt64 = 0
    /// The free space at the destination when extraction began; written bytes count against it
    /// as they are written, so declared sizes of 0 cannot fill the disk.
    private let freeBytesAtStart: UInt64?
    /// The output total the caller knows (a seekable archive's manifest), for progress.
    private let expectedOutput: UInt64?
    /// A seekable archive's manifest (checked against the records by the open): names every
    /// entry a damaged chunk belongs to.
    private let manifest: Manifest?
    /// What produces the stream, asked why it ended early (see `init`).
    private let input: SequentialArchiveBytes?
    /// Events a started scanner gave before the run (``ArchiveScanner/startWithSignedHeader(_:)``),
    /// handled first.
    private let startEvents: [ArchiveScanner.Event]

    /// A file being written by the jobs of its lane (``FileSystemWriters``): its descriptor once
    /// the job that creates it ran, and what writes its chunks, leaving holes for zero chunks.
    /// Touched by the jobs, and by the extractor only after ``FileSystemWriters/drain()``.
    private final class StagedFile: @unchecked Sendable {
        var descriptor: FileDescriptor?
        var sparse: SparseWriter?
        /// Whether its mode is set when it is complete (not when it was created with it, nor
        /// when it is set at the end).
        var setsModeAtFinish = true
        /// The lane whose jobs write it.
        let lane: Int

        init(descriptor: FileDescriptor? = nil, lane: Int) {
            self.descriptor = descriptor
            self.lane = lane
            if let descriptor { sparse = SparseWriter(file: descriptor, offset: 0) }
        }

        /// The descriptor, which a job that ran created.
        func opened(_ entry: ArchiveEntry) throws(CairnError) -> FileDescriptor {
            guard let descriptor else { throw CairnError(.io, "the file was not created", path: entry.path) }
            return descriptor
        }
    }

    /// - Parameters:
    ///   - expectedOutput: the total content bytes to be written, when known (from a manifest);
    ///     otherwise progress uses the header's size estimate, or is indeterminate.
    ///   - startedScanner: a scanner that already read the stream's start, and `startEvents`,
    ///     the events it gave doing so.
    ///   - input: the bytes `run` reads, when they are produced from others (an encrypted
    ///     archive's opened blocks, a transfer): asked why they ended when they end early, so
    ///     that damage (a sealed block that fails authentication) is not kept as a cut to resume.
    init(
        staging: StagingDirectory, options: ExtractionOptions, progress: Progress?, expectedOutput: UInt64? = nil,
        manifest: Manifest? = nil, startedScanner: ArchiveScanner? = nil, startEvents: [ArchiveScanner.Event] = [],
        trustedKeys: [PublicKey] = [], keying: ChunkKeying?, input: SequentialArchiveBytes? = nil
    ) throws(CairnError) {
        self.input = input
        self.manifest = manifest
        self.startEvents = startEvents
        if let manifest { locations.reserveCapacity(manifest.chunks.count) }
        self.scanner =
            startedScanner ?? ArchiveScanner(emittingChunkPayloads: true, checkingAgainst: manifest, trustedKeys: trustedKeys, keying: keying)
        self.staging = staging
        self.options = options
        self.progress = progress
        self.expectedOutput = expectedOutput
        self.freeBytesAtStart = options.checkFreeSpace ? staging.availableBytes : nil
        if let commit = try staging.continueJournal(as: .stream(options)).commit {
            skipUntil = commit.entryCount
            expectedDigest = commit.chainDigest
        }
    }

    deinit {
        // An extractor whose `run` never came: its writer's thread ends with it.
        try? writer.stop()
    }

    /// Reads the whole stream and extracts it into the staging directory; on success the
    /// staging directory is committed, on failure discarded.
    ///
    /// - Throws: the first problem, naming the offset in the stream or the entry.
    nonisolated(nonsending) func run(_ stream: RecordStream) async throws -> VerificationReport {
        do {
            if scanner.header == nil { try scanner.start(stream) }
            if let progress {
                // Honest progress: the known output, else the creator's estimate, else
                // indeterminate (-1); a total the content outgrows grows with it (see `write`).
                progress.totalUnitCount = (expectedOutput ?? scanner.header?.sizeEstimate).map { Int64(clamping: $0) } ?? -1
                progress.completedUnitCount = 0
            }
            for event in startEvents { try await handle(event) }
            let scanner = self.scanner
            let end = ArchiveScanner.InputEnd.atFooter { offset in
                CairnError(
                    .truncated,
                    "the stream ended before the archive's footer; \(scanner.verifiedLength) bytes verified up to the last commit",
                    offset: offset)
            }
            try await scanner.run(over: stream, until: end) { _, events in
                for event in events { try await handle(event) }
            }
            // A known total ends exact; an unknown one stays unknown.
            if let progress, progress.totalUnitCount >= 0 {
                progress.totalUnitCount = Int64(clamping: outputBytes)
                progress.completedUnitCount = Int64(clamping: outputBytes)
            }
            try writer.stop()
            try finishTree()
            if let open = openFile, !open.scratch { _ = try? open.file?.descriptor?.close() }
            closeScratchFiles()
            try staging.commit()
        } catch {
            // Nothing may touch the staging directory once it is discarded or released.
            try? writer.stop()
            let error = describe(error)
            if let open = openFile, !open.scratch { _ = try? open.file?.descriptor?.close() }
            openFile = nil
            closeScratchFiles()
            if let error = error as? CairnError, error.code == .truncated, let damage = damage(endingWith: error) {
                // The bytes ended because what produced them found damage: nothing to resume.
                if staging.isResumed { staging.release() } else { staging.discard() }
                throw damage
            }
            if let error = error as? CairnError, error.code == .truncated, !staging.holdsNothing {
                // Keep what verified: `extract --resume` continues from the journal.
                staging.release()
                var kept = error
                kept.message +=
                    kept.message.contains("bytes verified")
                    ? "; what verified is kept: rerun with --resume and the whole stream to continue"
                    : "; \(scanner.verifiedLength) bytes verified up to the last commit are kept: rerun with --resume and the whole stream to continue"
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
        case .entry(let index, let archived, _):
            guard let entry = Extractor.destinationEntry(for: archived, stripping: options.stripComponents) else {
                // Dropped by stripComponents: a file is still written, unnamed, for the chunks and
                // hard links that may need its bytes.
                if archived.kind == .file { try beginScratch(archived) }
                return
            }
            if index < skipUntil {
                try writer.drain()
                try skip(entry)
            } else {
                if staging.isResumed, entry.kind != .directory {
                    // On the lane of its directory, before what replaces it there (a drain per
                    // entry made a resumed run twice as slow).
                    let staging = staging
                    try writer.submit(lane: writer.lane(of: PathValidator.parent(entry.pathBytes))) { cache throws(CairnError) in
                        try staging.removeLeftover(entry.pathBytes, cache: cache)
                    }
                }
                let droppedTarget =
                    archived.kind == .hardLink && Extractor.strippedPath(archived.linkTarget, components: options.stripComponents) == nil
                    ? scratchFiles[archived.linkTarget] : nil
                try begin(entry, linkingScratch: droppedTarget)
                options.onEntry?(entry)
            }
        case .chunk(let id, let payload?, let offset):
            // The scanner has checked the prefix, so this is the real raw length.
            let rawLength = ChunkRecordPrefix.declaredRawLength(inPayload: payload) ?? 1
            let ids = scanner.idFunction
            pending[id] = Task.detached {
                let decompressor = ChunkDecompressor()
                var out = [UInt8](repeating: 0, count: rawLength)
                try out.withMutableBytes { (raw) throws(CairnError) in
                    try ArchiveReader.decodeChunk(
                        payload, expected: id, rawLength: rawLength, offset: offset, ids: ids, using: decompressor, into: raw)
                }
                return out
            }
        case .packedChunk(let id, let bytes, _):
            verified[id] = bytes
        case .references(_, let references):
            try await write(references)
        case .fileEnd(_, let size):
            guard let open = openFile else { return }
            guard open.written == size else {
                throw CairnError(.corrupted, "file size does not match its content", path: open.entry.path)
            }
            // Every chunk of the file must decode and verify, referenced or not.
            for task in pending.values { _ = try await task.value }
            if let file = open.file {
                let (entry, scratch, options) = (open.entry, open.scratch, options)
                try writer.submit(lane: file.lane) { _ throws(CairnError) in
                    try file.sparse?.finish(size: size)
                    file.sparse = nil
                    // A scratch file stays open for the hard links to it.
                    guard !scratch else { return }
                    let fd = try file.opened(entry)
                    ExtendedAttributes.restore(entry.extendedAttributes, to: .descriptor(fd), display: entry.path, options: options)
                    if file.setsModeAtFinish { try FileSystem.setExtractedPermissions(of: fd, mode: entry.permissions) }
                    try SpecialFiles.setModificationTime(of: fd, entry, options: options)
                    file.descriptor = nil
                    try fd.close()
                }
            }
            openFile = nil
            pending.removeAll()
            verified.removeAll()
        case .chunk(_, nil, _):
            break  // not produced: this scanner emits payloads
        case .commit(_, let commit):
            guard commit.openEntry == CommitRecord.noOpenEntry, commit.entryCount > 0 else { return }
            let count = Int(commit.entryCount)
            if count == skipUntil, let expected = expectedDigest {
                guard commit.chainDigest == expected else {
                    throw CairnError(
                        .notResumable, "this archive is not the one whose extraction was interrupted (entry \(count) differs)")
                }
                resumePointVerified = true
            }
            if count > skipUntil {
                // After the files it counts, in the writer's order.
                let (staging, digest) = (staging, commit.chainDigest)
                try writer.submitAfterAll { () throws(CairnError) in try staging.journalCommit(entryCount: count, chainDigest: digest) }
            }
        case .footer:
            if skipUntil > 0, !resumePointVerified {
                throw CairnError(
                    .notResumable,
                    "this archive is not the one whose extraction was interrupted (it ends before entry \(skipUntil))")
            }
        }
    }

    /// - Parameter scratch: for a hard link whose target `stripComponents` dropped, that target's
    ///   unnamed file.
    private func begin(_ entry: ArchiveEntry, linkingScratch scratch: FileDescriptor? = nil) throws {
        let name = PathBytes.lastComponent(entry.pathBytes)
        // Refuse an existing top-level name before writing anything under it.
        if let top = PathValidator.components(entry.pathBytes).first, checkedTopLevelNames.insert(top).inserted {
            try staging.checkTopLevelName(top)
        }
        let staging = staging
        switch entry.kind {
        case .directory:
            // On the lane of what it holds, so it comes before its files there; another lane
            // may have made it meanwhile, as a parent of its own.
            try writer.submit(lane: writer.lane(of: entry.pathBytes)) { cache throws(CairnError) in
                let parent = try staging.parentDirectory(of: entry.pathBytes, cache: cache)
                try FileSystem.makeDirectoryUnlessPresent(name, in: parent, mode: 0o700, display: entry.path)
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
            if let free = freeBytesAtStart, declaredBytes > free {
                throw CairnError(
                    .limitExceeded, "the archive declares \(declaredBytes) bytes up to this file but only \(free) bytes are free",
                    path: entry.path)
            }
            let file = StagedFile(lane: writer.lane(of: PathValidator.parent(entry.pathBytes)))
            // Created with its mode when the umask keeps it whole, it has no special bits and no
            // extended attributes (setting a `user.*` one needs write permission on the file)
            // (the staging directory is 0700: nobody else sees the file meanwhile); otherwise
            // 0600, and the mode is set when the file is complete. A mode that denies its owner
            // reading is set at the end: a back-reference may read a chunk back from the file.
            let mode = FileSystem.extractedPermissions(entry.permissions)
            let unreadable = mode & 0o400 == 0
            let direct = !unreadable && mode & 0o7000 == 0 && mode & umask == 0 && entry.extendedAttributes.isEmpty
            file.setsModeAtFinish = !unreadable && !direct
            if unreadable { unreadableFiles.append(entry) }
            try writer.submit(lane: file.lane) { cache throws(CairnError) in
                let parent = try staging.parentDirectory(of: entry.pathBytes, cache: cache)
                let fd = try FileDescriptor.open(
                    name, flags: O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, mode: direct ? mode : 0o600, relativeTo: parent)
                file.descriptor = FileDescriptor(rawValue: fd.rawValue, path: entry.path)
                file.sparse = file.descriptor.map { SparseWriter(file: $0, offset: 0) }
            }
            openFile = (entry, file, 0, false)
        case .hardLink:
            // Rare: made in place once what came before is.
            try writer.drain()
            let parent = try staging.parentDirectory(of: entry.pathBytes)
            if let scratch {
                // The target was dropped by stripComponents: link its unnamed file.
                try FileSystem.makeHardLink(toOpenFile: scratch, named: name, in: parent, display: entry.path)
            } else {
                try FileSystem.makeHardLink(from: entry.linkTarget, in: staging.descriptor, to: name, in: parent, display: entry.path)
            }
        case .symlink:
            symlinks.append(entry)
        case .fifo, .characterDevice, .blockDevice:
            try writer.drain()
            let parent = try staging.parentDirectory(of: entry.pathBytes)
            if try SpecialFiles.make(entry, named: name, in: parent, options: options) {
                try SpecialFiles.finish(entry, named: name, in: parent, options: options)
            }
        default:
            throw CairnError(.unsupportedFileType, "entry kind \(entry.kind) cannot be extracted", path: entry.path)
        }
    }

    /// A damaged chunk's error names the entries it belongs to: all of them when the manifest is
    /// known, else the file being written.
    /// The damage that ended the stream early, if its producer failed on one
    /// (`SealedBlockStream.isDamage`): the stream is at its end, so asking cannot block.
    private func damage(endingWith error: CairnError) -> CairnError? {
        guard let input else { return nil }
        do throws(CairnError) {
            try input.finish()
            return nil
        } catch {
            return SealedBlockStream.isDamage(error) ? error : nil
        }
    }

    private func describe(_ error: any Error) -> any Error {
        guard let failure = error as? CairnError else { return error }
        // The manifest names a chunk's users by its record's offset; any other error is left as is.
        if let manifest { return manifest.namingUsers(of: failure) }
        guard let open = openFile, let offset = failure.offset, scanner.manifestSoFar.chunks.contains(where: { $0.offset == offset })
        else { return failure }
        var named = failure
        named.message += Manifest.usersClause([open.entry.path])
        return named
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
            openFile = (entry, nil, 0, false)
        case .symlink:
            symlinks.append(entry)
        default:
            break
        }
    }

    /// A file that `stripComponents` drops: written to an unnamed file (`O_TMPFILE`) in the
    /// staging directory, so later references and hard links can use its bytes.
    private func beginScratch(_ entry: ArchiveEntry) throws {
        try writer.drain()
        let fd = try FileDescriptor.open([0x2E], flags: O_RDWR | Self.temporaryFileFlag, mode: 0o600, relativeTo: staging.descriptor)
        let scratch = FileDescriptor(rawValue: fd.rawValue, path: entry.path)
        scratchFiles[entry.pathBytes] = scratch
        openFile = (entry, StagedFile(descriptor: scratch, lane: 0), 0, true)
    }

    /// `O_TMPFILE`, which Glibc declares only under `_GNU_SOURCE`: the kernel's generic
    /// `__O_TMPFILE` (`<asm-generic/fcntl.h>`, the same on x86_64 and aarch64) with `O_DIRECTORY`.
    static let temporaryFileFlag: Int32 = 0o20000000 | O_DIRECTORY

    private func closeScratchFiles() {
        for fd in scratchFiles.values { _ = try? fd.close() }
        scratchFiles.removeAll()
    }

    private nonisolated(nonsending) func write(_ references: [ChunkReference]) async throws {
        guard var open = openFile else { return }
        for reference in references {
            guard let file = open.file else {
                // Skipping a completed file: only learn where its chunks are (and still check
                // that they decode).
                if let task = pending.removeValue(forKey: reference.id), SparseWriter.isZero(try await task.value) {
                    zeroChunks.insert(reference.id)
                }
                verified[reference.id] = nil
                locations.recordFirst(reference.id, path: open.entry.pathBytes, scratch: nil, offset: open.written, length: reference.length)
                open.written += UInt64(reference.length)
                continue
            }
            // nil: zeros already verified, a hole with nothing to read back (reading a 10 GiB
            // hole back chunk by chunk would hash every zero).
            let bytes: [UInt8]?
            let length: Int
            var fresh = verified.removeValue(forKey: reference.id)
            if fresh == nil, let task = pending.removeValue(forKey: reference.id) { fresh = try await task.value }
            if let decoded = fresh {
                locations.recordFirst(
                    reference.id, path: open.entry.pathBytes, scratch: open.scratch ? file.descriptor : nil, offset: open.written,
                    length: decoded.count)
                if SparseWriter.isZero(decoded) { zeroChunks.insert(reference.id) }
                (bytes, length) = (decoded, decoded.count)
            } else if zeroChunks.contains(reference.id), let location = locations[reference.id] {
                (bytes, length) = (nil, location.length)
            } else {
                // Read back from a file the writer may not have written yet.
                try writer.drain()
                let readBack = try readBack(reference.id, into: open.entry, fd: try file.opened(open.entry))
                (bytes, length) = (readBack, readBack.count)
            }
            let (total, overflow) = outputBytes.addingReportingOverflow(UInt64(length))
            guard !overflow, total <= options.maximumOutputBytes else {
                throw CairnError(
                    .limitExceeded, "the archive writes more than \(options.maximumOutputBytes) bytes", path: open.entry.path)
            }
            if let free = freeBytesAtStart, total > free {
                throw CairnError(
                    .limitExceeded, "the archive writes more than the \(free) bytes that were free at the destination",
                    path: open.entry.path)
            }
            outputBytes = total
            try writer.submit(lane: file.lane, bytes: bytes?.count ?? 0) { _ throws(CairnError) in
                if let bytes { try file.sparse?.write(bytes) } else { file.sparse?.skip(UInt64(length)) }
            }
            open.written += UInt64(length)
            if let progress { ByteProgress.report(outputBytes, to: progress) }
        }
        openFile = open
    }

    /// Reads a chunk back from where it was first written and checks its SHA-256
    /// (``ChunkLocations/readBack(_:id:staging:open:entryPath:)``).
    private func readBack(_ id: Digest, into entry: ArchiveEntry, fd openFD: FileDescriptor) throws -> [UInt8] {
        guard let location = locations[id] else {
            throw CairnError(.corrupted, "reference to chunk \(id), whose bytes were not seen", path: entry.path)
        }
        return try ChunkLocations.readBack(
            location, id: id, ids: scanner.idFunction, staging: staging, open: (entry.pathBytes, openFD), entryPath: entry.path)
    }

    /// Symlinks last, then directory modes and times deepest first.
    private func finishTree() throws {
        for entry in unreadableFiles {
            try FileSystem.setExtractedPermissions(entry.pathBytes, in: staging.descriptor, mode: entry.permissions, display: entry.path)
        }
        for entry in symlinks {
            let parent = try staging.parentDirectory(of: entry.pathBytes)
            let name = PathBytes.lastComponent(entry.pathBytes)
            try FileSystem.makeSymlink(name, target: entry.linkTarget, in: parent, display: entry.path)
            ExtendedAttributes.restore(entry.extendedAttributes, to: .name(name, in: parent), display: entry.path, options: options)
            try SpecialFiles.setModificationTime(entry, named: name, in: parent, options: options)
        }
        for entry in directories.sorted(by: { $0.pathBytes.count > $1.pathBytes.count }) {
            ExtendedAttributes.restore(
                entry.extendedAttributes, to: .name(entry.pathBytes, in: staging.descriptor), display: entry.path, options: options)
            try FileSystem.setExtractedPermissions(entry.pathBytes, in: staging.descriptor, mode: entry.permissions, display: entry.path)
            try SpecialFiles.setModificationTime(entry, named: entry.pathBytes, in: staging.descriptor, options: options)
        }
    }
}

extension Extractor {
    /// Extracts an archive read once, front to back, from `input` (a pipe, a socket, a file),
    /// verifying every byte before it counts; the result appears at `destination` only when the
    /// whole archive verified.
    ///
    /// - Parameters:
    ///   - input: the archive's bytes, read front to back once.
    ///   - destination: the directory to extract into (created if missing).
    ///   - options: how to extract.
    ///   - progress: content bytes extracted, if given.
    ///   - trustedKeys: when not empty, every signature is verified as it arrives
    ///     (`Spec/0004-trusted-archives.md §4.2`): an archive not signed by one of them is refused
    ///     before anything is written, the journal of an interrupted extraction keeps only what a
    ///     verified signature covers, and nothing appears at `destination` before the root
    ///     signature verified. Empty (the default): any archive.
    /// - Returns: what was verified.
    /// - Throws: as ``extractAll(to:options:)``; `.truncated` when the input ends early;
    ///   `.untrusted` and `.checksumMismatch` for an archive no trusted key signed.
    nonisolated(nonsending) public static func extractStream(
        from input: FileHandle, to destination: URL, options: ExtractionOptions = ExtractionOptions(),
        progress: Progress? = nil, trustedKeys: [PublicKey] = []
    ) async throws -> VerificationReport {
        let descriptor = FileDescriptor(rawValue: input.fileDescriptor, path: "<input>")
        return try await extractStream(
            from: descriptor, to: PathBytes.fileSystemPath(destination), options: options, progress: progress, trustedKeys: trustedKeys,
            keying: nil)
    }

    /// ``extractStream(from:to:options:progress:trustedKeys:)`` from a descriptor (a pipe: standard input,
    /// or the body of an HTTP transfer), into the file-system path `destination`.
    nonisolated(nonsending) package static func extractStream(
        from descriptor: FileDescriptor, to destination: [UInt8], options: ExtractionOptions, progress: Progress?,
        trustedKeys: [PublicKey] = [], keying: ChunkKeying?, producedBy input: SequentialArchiveBytes? = nil
    ) async throws -> VerificationReport {
        let staging = try StagingDirectory(for: destination, options: options)
        let extractor = try StreamExtractor(
            staging: staging, options: options, progress: progress, trustedKeys: trustedKeys, keying: keying, input: input)
        do {
            return try await extractor.run(RecordStream(descriptor: descriptor))
        } catch let failure as CairnError where failure.offset != nil {
            // An error at an offset of the stream names it (`<stdin>`, the URL), as `verify` does;
            // one about an entry already names the entry.
            throw failure.withPath(descriptor.path)
        }
    }
}
