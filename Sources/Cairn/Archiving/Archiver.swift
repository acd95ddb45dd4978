import Foundation
import Glibc

/// Writes a Cairn archive item by item, as a stream (`Spec/0001-container-format.md`).
///
/// ```swift
/// let archiver = try Archiver(writingTo: URL(filePath: "/tmp/export.cairn"))
/// try await archiver.appendItem(at: URL(filePath: "/srv/app/data"))
/// let properties = try await archiver.finish()
/// ```
///
/// Files are read in batches, cut into chunks (FastCDC by default), hashed (SHA-256) and
/// compressed on every core; the bytes are written in a deterministic order, so the same inputs
/// and configuration always give the same archive. Each chunk is stored once per archive.
///
/// The async methods run on the caller's executor (`nonisolated(nonsending)`), so an archiver
/// can be used from the main actor or any actor; reading, chunking, hashing and compression run
/// on detached tasks, never on the caller's executor.
///
/// - Important: Call the methods one at a time (they are `async` but not reentrant), and call
///   ``finish()`` exactly once. After an error the archive is abandoned: what was written is a
///   valid prefix up to its last commit record.
/// - Throws: Every method throws only ``CairnError`` or `CancellationError`.
public final class Archiver {
    private let configuration: Configuration
    private let sink: any ArchiveSink
    private var writer: ArchiveWriter
    /// Compresses the rare chunk that reaches the writer without a stored form (see `apply`).
    private lazy var fallbackCompressor = ChunkCompressor(method: configuration.effectiveCompression)
    private let budget: ByteBudget
    private let claims = ChunkClaims()
    /// Reusable batch buffers: no more than the budget can have in flight.
    private let pool: BufferPool
    private var producerState = ItemProducer.State()
    private var state: State = .open

    /// Export progress: `completedUnitCount` is the content bytes read; `totalUnitCount` is the
    /// size estimate, or -1 (indeterminate) without one. A total smaller than the content grows
    /// with it rather than sticking at 100%; after ``finish()`` both are the content bytes.
    public let progress: Progress

    private enum State { case open, failed, finished }

    /// Output is handed to the sink once this many bytes are pending.
    private static let flushThreshold = 1 << 20

    /// The most bytes that were in flight (read, not yet handed to the sink) at once; stays
    /// within the backpressure policy's high watermark plus one batch.
    public var peakBytesInFlight: Int { budget.peakBytesInUse }

    /// Whether an append is suspended on the backpressure budget (everything read is still in
    /// flight to the sink): the event tests wait for to act while the producer stands still.
    package var isWaitingForBudget: Bool { budget.hasWaiters }

    /// Creates an archiver that writes to any sink.
    ///
    /// - Throws: `.invalidArgument` (for example a `workerCount` below 1) or `.limitExceeded` for a
    ///   bad configuration.
    public init(sink: any ArchiveSink, configuration: Configuration = Configuration()) throws(CairnError) {
        var configuration = configuration
        // Every pack fits one batch, so where packs end depends on the items only (§7.5).
        let least = ItemProducer.minimumBatchBytes(for: configuration.chunking)
        configuration.batchBytes = max(configuration.batchBytes, least)
        if configuration.batchBytes > configuration.backpressure.high.bytes {
            configuration.batchBytes = max(configuration.backpressure.high.bytes, least)
        }
        try configuration.header.validate()
        if let workers = configuration.workerCount, workers < 1 {
            throw CairnError(.invalidArgument, "workerCount must be at least 1, not \(workers)")
        }
        if configuration.sealing == nil, let encryption = configuration.encryption {
            configuration.sealing = try ArchiveSealing(
                recipients: encryption.recipients, passphrase: encryption.passphrase, maker: configuration.signingKey,
                makerKey: encryption.makerKey)
        }
        // The inner archive of an encrypted one is keyed with the keys its key block carries
        // (`Spec/0004 §6.6`).
        if let sealing = configuration.sealing { configuration.keying = try sealing.secrets.chunkKeying() }
        self.configuration = configuration
        if let sealing = configuration.sealing {
            self.sink = try SealingSink(base: sink, envelope: sealing.envelope, secrets: sealing.secrets)
        } else {
            self.sink = sink
        }
        try configuration.backpressure.validate()
        self.writer = try ArchiveWriter(header: configuration.header, signingKey: configuration.signingKey)
        self.budget = ByteBudget(policy: configuration.backpressure)
        self.pool = BufferPool(capacity: max(2, configuration.backpressure.high.bytes / max(1, configuration.batchBytes)))
        let total = configuration.sizeEstimate.map { Int64(clamping: $0) } ?? -1
        self.progress = Progress(totalUnitCount: total)
        if let local = sink as? any LocalFileWritingSink, let identity = local.writtenFileIdentity {
            producerState.excluded.insert(.init(device: identity.device, inode: identity.inode))
        }
    }

    /// Resumes the interrupted archive `<path>.partial` (left by a killed process, a full disk,
    /// an error or a cancelled task): finds its last valid commit, cuts off the torn tail, rebuilds
    /// the dedup index, entries and counts, and continues appending (`Spec/0001 §10.4`).
    ///
    /// Appending the same sources again skips every item already committed with the same path,
    /// size and mtime without reading it; a file cut in the middle continues after its last
    /// committed chunk when its size and mtime are unchanged (otherwise it is archived again from
    /// its start). A database and the `-wal` read with it under one read transaction are one
    /// unit: when the last commit falls after the database's entry but before its `-wal` is
    /// complete, the resume goes back to the commit before the database, which is read again
    /// with its `-wal` (`ArchiveRecovery.resumePoint(reading:)`, `Spec/0003 §3.2` item 6).
    /// The finished archive is the one an uninterrupted run would have written.
    /// The archive keeps its own header (chunking, codec, metadata); `configuration` supplies
    /// the backpressure, batch, exclusion, worker and callback settings. What the caller says the
    /// interrupted run used (`expected`) is checked first, before the file is touched: resuming
    /// with other sources or options would produce a mix that verifies.
    ///
    /// - Parameters:
    ///   - location: the archive's final place, a local file (`.file(path:)`); `<path>.partial`
    ///     is continued. (An interrupted upload to an object store is continued by its sink,
    ///     ``ObjectStoreSink/resumeUpload(of:configuration:overwrite:statePath:options:)``.)
    ///   - configuration: settings that do not shape the header.
    ///   - expected: the sources and the options given explicitly, compared with the archive's.
    ///   - overwrite: whether ``finish()`` may replace an existing file at `path`.
    ///   - decryption: for an encrypted archive (`Spec/0004-trusted-archives.md §6.9`), the
    ///     identity or passphrase that opens the partial file's own key block, which holds the
    ///     archive's keys: the write continues sealed with them, from the block holding the
    ///     resume point (sealed again under a new nonce). Empty (the default) for a plain archive.
    ///     `configuration` must then name no ``Configuration/encryption``.
    /// - Throws: `.invalidArgument` naming a location that is not a local file, or an
    ///   ``Configuration/encryption`` given; `.notFound`
    ///   when there is no `<path>.partial`; `.notResumable` when it has no
    ///   valid commit, or when something in `expected` differs (the message names each
    ///   difference, which are also in ``CairnError/additionalErrors``); `.unsupportedVersion`
    ///   when it is of another format version than this library writes (2.0, say); `.untrusted`
    ///   for an encrypted partial file without a `decryption` that opens it, or a plain one with
    ///   one; `.checksumMismatch` naming a sealed block that fails authentication; `.busy`; `.io`.
    ///   On every refusal the partial file is left as it was.
    public convenience init(
        resuming location: ArchiveLocation, configuration: Configuration = Configuration(),
        expecting expected: ResumeExpectation = ResumeExpectation(), overwrite: Bool = false,
        decryption: ArchiveDecryption = ArchiveDecryption()
    ) throws(CairnError) {
        let path = try location.requireFile(for: "an archive resumed here")
        let partial = ArchiveLocation.partialPath(of: path)
        if configuration.encryption != nil || configuration.sealing != nil {
            throw CairnError(
                .invalidArgument,
                "an encrypted archive resumes with its own key block: give the identity or passphrase that opens it (decryption), not recipients",
                path: partial)
        }
        let found: PartialArchive
        do {
            // Not inside a database and its -wal (`Spec/0003 §3.2` item 6).
            found = try PartialArchive.read(
                partial, signingKey: configuration.signingKey, keying: configuration.keying, decryption: decryption)
        } catch {
            throw (error as? CairnError) ?? CairnError(.io, "cannot read the archive", path: partial)
        }
        let recovery = found.recovery
        let differences = expected.differences(from: recovery.header)
        if !differences.isEmpty {
            var error = CairnError(
                .notResumable, "cannot resume: " + differences.joined(separator: "; "), path: partial)
            error.additionalErrors = differences.map { CairnError(.notResumable, $0, path: partial) }
            throw error
        }
        var resumed = configuration
        resumed.chunking = recovery.header.chunking
        resumed.compression = recovery.header.compression
        resumed.isCompressible = recovery.header.isCompressible
        resumed.sizeEstimate = recovery.header.sizeEstimate
        resumed.resourcesVersion = recovery.header.resourcesVersion
        resumed.sourcePlatform = recovery.header.sourcePlatform
        resumed.appIdentifier = recovery.header.appIdentifier
        resumed.metadata = recovery.header.metadata
        resumed.sourcePaths = nil
        let selection = SelectionOptions(recorded: recovery.header.metadata[Archiver.selectionMetadataKey])
        resumed.exclusions = selection.exclusions
        resumed.staysOnOneFileSystem = selection.staysOnOneFileSystem
        resumed.collectsExtendedAttributes = selection.collectsExtendedAttributes
        resumed.snapshotsSQLiteDatabases = selection.snapshotsSQLiteDatabases
        let state = found.state
        let file = try FileSink(resuming: path, at: found.cut, writingFrom: found.writingFrom, overwrite: overwrite)
        var sink: any ArchiveSink = file
        if let sealed = found.sealed {
            // The archive's own keys, from its key block (`Spec/0004 §6.9`).
            resumed.keying = try sealed.sealing.secrets.chunkKeying()
            sink = try SealingSink(
                base: file, continuing: sealed.sealing.envelope, secrets: sealed.sealing.secrets, atBlock: sealed.blockIndex,
                pending: sealed.pending)
        }
        try self.init(sink: sink, configuration: resumed)
        try adoptRecovery(recovery, state: state)
        isResumed = true
    }

    /// Replaces the fresh writer with one continuing `recovery`'s last commit, and tells the
    /// producer what is already committed.
    private func adoptRecovery(_ recovery: ArchiveRecovery, state: ArchiveWriter.RecoveredState) throws(CairnError) {
        writer = try ArchiveWriter(recovering: state, header: recovery.header, signingKey: configuration.signingKey)
        for id in state.chunkIDs { _ = claims.claim(id, ordinal: 0) }
        var producer = ItemProducer.State()
        producer.nextChunkOrdinal = 1
        for row in state.manifest.entries {
            producer.paths.insert(row.entry.pathBytes)
            producer.committed[PathKey(row.entry.pathBytes)] = .init(
                kind: row.entry.kind, size: row.entry.size, modificationTime: row.entry.modificationTime)
        }
        if let open = state.openFile {
            let entry = state.manifest.entries[open.index].entry
            producer.committed[PathKey(entry.pathBytes)] = nil
            producer.openFileToContinue = .init(
                path: entry.pathBytes, size: entry.size, modificationTime: entry.modificationTime,
                committedBytes: open.bytes)
        }
        producer.excluded = producerState.excluded
        producerState = producer
        progress.completedUnitCount = Int64(clamping: state.contentBytes)
    }

    /// Leaves the open file out: the writer goes back to the last commit before the file began
    /// and, when bytes after that commit already reached the sink, the sink is cut back too
    /// (``FileSink/truncate(to:)``). A sink that cannot be cut back (standard output) makes the
    /// archive fail rather than store a short file.
    ///
    /// - Parameter source: the file's source path, for the error.
    /// - Throws: `.io` naming `source` when the sink cannot be cut back.
    private func discardOpenFile(source: String?) throws(CairnError) {
        guard let cut = try writer.rewindToBoundary() else { return }
        guard let file = sink as? any RewindableArchiveSink else {
            throw CairnError(
                .io,
                "read failed after part of it was written to an output that cannot be cut back; "
                    + "a short file is never stored, so the archive was abandoned",
                path: source)
        }
        try file.truncate(to: cut)
    }

    /// Whether this archiver continues an interrupted archive.
    public private(set) var isResumed = false

    /// Runs `body` with `archiver`, then finishes it; abandons it and rethrows when `body`
    /// throws or the task is cancelled (the one body of every `withArchiver`).
    nonisolated(nonsending) static func running(_ archiver: sending Archiver, _ body: (Archiver) async throws -> Void) async throws
        -> ExportProperties
    {
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
    /// An SQLite database (with ``Configuration/snapshotsSQLiteDatabases``, the default) is read
    /// under a read transaction and its `-wal` right after it, under the same transaction; its
    /// `-journal` is then left out, and a database's `-shm` is never stored (`Spec/0003 §3.2`).
    /// A sidecar reached again after its database, given as a source of its own or inside
    /// another directory, is the same item: nothing is added, nothing is thrown and nothing is
    /// warned about (the `-wal` went in with its database). A `-wal` appended *before* its
    /// database is an ordinary file, read without the database's transaction: append the
    /// database (or its directory) instead.
    ///
    /// - Throws: `CairnError` (`.notFound` when `url` does not exist, `.io` when the sink
    ///   fails) or `CancellationError`. Problems with single files inside a directory (unreadable,
    ///   changed while read, unsupported type) do not throw; they are collected in
    ///   ``ExportProperties/warnings``.
    nonisolated(nonsending) public func appendItem(at url: URL) async throws {
        let path = PathBytes.fileSystemPath(url)
        try await appendItem(atPath: path)
    }

    /// Appends the item at `url` under `pathInArchive` (a relative path with `/` separators),
    /// as ``appendItem(at:)`` does (SQLite databases and their sidecars included).
    nonisolated(nonsending) public func appendItem(at url: URL, pathInArchive: String) async throws {
        try await appendItem(atPath: PathBytes.fileSystemPath(url), pathInArchive: Array(pathInArchive.utf8))
    }

    /// Appends the item at the raw file-system path `path` under its last component; a path
    /// whose last component is `.`, `..` or `/` stores the directory's contents at the top level.
    nonisolated(nonsending) package func appendItem(atPath path: [UInt8]) async throws {
        let last = PathBytes.lastComponent(path)
        if last == [0x2E] || last == [0x2E, 0x2E] || last == [0x2F] || last.isEmpty {
            try await appendItem(atPath: path, pathInArchive: [])
        } else {
            try await appendItem(atPath: path, pathInArchive: last)
        }
    }

    /// Appends the item at the raw file-system path `path` under the raw `pathInArchive`; an
    /// empty `pathInArchive` stores a directory's contents at the top level.
    nonisolated(nonsending) package func appendItem(atPath path: [UInt8], pathInArchive: [UInt8]) async throws {
        try checkOpen()
        let name = pathInArchive.isEmpty ? [] : try Archiver.normalizedPathInArchive(pathInArchive)
        let status: FileStatus
        do {
            status = try FileStatus.of(path)
        } catch {
            throw error.withDisplay(PathBytes.display(path))
        }
        try await runPipeline { producer in
            try await producer.appendTree(sourcePath: path, parent: nil, name: path, status: status, archivePath: name)
        }
    }

    /// Appends a file whose content comes from an async sequence of byte arrays.
    ///
    /// - Parameters:
    ///   - bytes: the content, in pieces of any size.
    ///   - pathInArchive: where the file is stored.
    ///   - permissions: mode bits, default `0o644`.
    ///   - modificationTime: default now.
    nonisolated(nonsending) public func append<S: AsyncSequence>(
        contentsOf bytes: S, pathInArchive: String, permissions: UInt32 = 0o644, modificationTime: Timestamp? = nil
    ) async throws where S.Element == [UInt8], S: Sendable {
        try checkOpen()
        let name = try Archiver.normalizedPathInArchive(Array(pathInArchive.utf8))
        let mtime = modificationTime ?? Timestamp(nanosecondsSinceEpoch: Int64(Date().timeIntervalSince1970 * 1_000_000_000))
        let entry = ArchiveEntry(pathBytes: name, kind: .file, permissions: permissions & 0o7777, modificationTime: mtime)
        try await runPipeline { producer in
            try await producer.appendStream(bytes, entry: entry)
        }
    }

    /// Writes the manifest and footer and completes the sink.
    ///
    /// - Returns: the export properties of the whole archive.
    nonisolated(nonsending) public func finish() async throws -> ExportProperties {
        try checkOpen()
        try await guarded {
            if self.producerState.openFileToContinue != nil {
                self.producerState.openFileToContinue = nil
                try self.discardOpenFile(source: nil)
            }
            self.claims.removeAll()
            // Nothing is appended any more: the paths used (one per entry) are not needed.
            self.producerState.paths = PathTable()
            while try self.writer.finishStep() {
                try await self.flush(force: false)
            }
            try await self.flush(force: true)
            do {
                try await self.sink.finish()
            } catch {
                throw CairnError.sinkFailure(wrapping: error)
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
            referenceCount: writer.manifest.references.count, uniqueBytes: writer.uniqueBytes,
            warnings: producerState.warnings)
    }

    /// Abandons the archive: writes what is pending and tells the sink. Used after errors.
    nonisolated(nonsending) public func abandon() async {
        guard state == .open else { return }
        state = .failed
        // The last commit too: what was appended stays resumable.
        let bytes = writer.takeOutput(holdingLastCommit: false)
        if !bytes.isEmpty { try? await send(bytes) }
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
    nonisolated(nonsending) private func guarded(_ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch let error as CancellationError {
            await abandon()
            throw error
        } catch {
            await abandon()
            throw CairnError.sinkFailure(wrapping: error)
        }
    }

    nonisolated(nonsending) private func flush(force: Bool) async throws {
        guard writer.pendingOutputCount >= Archiver.flushThreshold || (force && writer.pendingOutputCount > 0) else {
            return
        }
        let bytes = writer.takeOutput()
        do {
            try await send(bytes)
        } catch {
            throw CairnError.sinkFailure(wrapping: error)
        }
    }

    /// Writes `bytes` (just taken from the writer) to the sink, with the commit points among
    /// them for a sink that cuts at commits (``CommitAwareArchiveSink``).
    nonisolated(nonsending) private func send(_ bytes: [UInt8]) async throws {
        let commits = writer.takeCommitPoints()
        if let aware = sink as? any CommitAwareArchiveSink {
            try await aware.write(bytes, commits: commits)
        } else {
            try await sink.write(bytes)
        }
    }

    /// Runs one append through the pipeline: a producer task reads and chunks into batches,
    /// one processing task per batch hashes and compresses on every core, and this task writes the
    /// results in order, returning each batch's bytes to the budget once they reach the sink.
    nonisolated(nonsending) private func runPipeline(
        _ produce: @escaping @Sendable (inout ItemProducer) async throws -> Void
    ) async throws {
        let (stream, continuation) = AsyncStream<ItemProducer.Item>.makeStream()
        let initial = producerState
        let budget = budget
        let claims = claims
        let pool = pool
        let configuration = configuration
        let progress = progress
        var options = configuration.producerOptions
        options.sinkCanBeCutBack = sink is FileSink
        // Detached: the caller may be the main actor; reading and hashing must not run there.
        let producer = Task.detached { () async throws -> ItemProducer.State in
            defer { continuation.finish() }
            var item = ItemProducer(
                state: initial, chunking: configuration.chunking, keying: configuration.keying, batchBytes: configuration.batchBytes, budget: budget,
                pool: pool, claims: claims, compression: configuration.effectiveCompression, output: continuation,
                options: options,
                onProgress: { bytes in ByteProgress.report(bytes, to: progress) })
            try await produce(&item)
            try await item.finish()
            return item.state
        }
        do {
            try await withTaskCancellationHandler {
                for await item in stream {
                    let processed = try await item.processing.value
                    try apply(item.batch, processed)
                    try await flush(force: false)
                    pool.give(item.batch.buffer)
                    budget.release(item.batch.byteCount)
                    try Task.checkCancellation()
                }
                producerState = try await producer.value
                try Task.checkCancellation()
                try await flush(force: true)
            } onCancel: {
                producer.cancel()
                budget.close()
            }
        } catch {
            producer.cancel()
            budget.close()
            // Drain what the producer already queued so no task is left running.
            for await item in stream { item.processing.cancel() }
            _ = try? await producer.value
            budget.reset()
            await abandon()
            throw CairnError.sinkFailure(wrapping: error)
        }
    }


    /// Applies a pack batch: one pack record of its items (§7.5). The processing task built the
    /// content from the chunks it claimed; when the writer's own decision differs (a claim on an
    /// id prefix shared by two chunks, or a chunk forgotten when the writer went back to a
    /// commit), the content is built again here, so the bytes never depend on scheduling.
    private func applyPack(_ batch: ContentBatch, _ processed: ProcessedBatch) throws {
        var inputs: [ArchiveWriter.PackInput] = []
        var ranges: [Range<Int>?] = []
        var chunkIndex = 0
        for event in batch.events {
            switch event {
            case .entry(let entry):
                inputs.append(ArchiveWriter.PackInput(entry: entry, chunk: nil))
                ranges.append(nil)
            case .chunk(let range):
                guard let last = inputs.indices.last, inputs[last].chunk == nil, chunkIndex < processed.ids.count else {
                    throw CairnError(.invalidArgument, "internal error: a packed file with more than one chunk")
                }
                inputs[last].chunk = (processed.ids[chunkIndex], range.count)
                ranges[last] = range
                chunkIndex += 1
            case .endFile:
                if let last = inputs.indices.last { inputs[last].entry.size = UInt64(inputs[last].chunk?.length ?? 0) }
            case .discardOpenFile:
                // A small file whose read failed: leave it out of the pack.
                if let last = inputs.indices.last, inputs[last].entry.kind == .file {
                    inputs.removeLast()
                    ranges.removeLast()
                }
            case .zeroChunk:
                throw CairnError(.invalidArgument, "internal error: a hole in a packed file")
            }
        }
        guard !inputs.isEmpty else { return }
        let plan = writer.inlinePlan(inputs)
        var planned: [Digest] = []
        for (input, inline) in zip(inputs, plan) where inline {
            if let chunk = input.chunk { planned.append(chunk.id) }
        }
        var content = processed.pack
        if content?.inlineIDs != planned {
            var raw: [UInt8] = []
            batch.buffer.withUnsafeBytes { bytes in
                for (range, inline) in zip(ranges, plan) where inline {
                    if let range { raw.append(contentsOf: bytes[range]) }
                }
            }
            content = try PackContentBuilder.build(raw: raw, inlineIDs: planned, compression: configuration.effectiveCompression)
        }
        guard let content else { return }
        let indices = try writer.appendPack(inputs, content: content)
        if let onEntry = configuration.onEntry {
            for index in indices { onEntry(writer.manifest.entries[index].entry) }
        }
    }

    /// Applies a processed batch's events to the writer, in order.
    private func apply(_ batch: ContentBatch, _ processed: ProcessedBatch) throws {
        if batch.isPack { return try applyPack(batch, processed) }
        var chunkIndex = 0
        for event in batch.events {
            switch event {
            case .entry(let entry):
                try writer.beginEntry(entry)
                // A file is reported once complete (a file left out is never reported).
                if entry.kind != .file { configuration.onEntry?(entry) }
            case .chunk, .zeroChunk:
                let id = processed.ids[chunkIndex]
                let processedForm = processed.stored[chunkIndex]
                chunkIndex += 1
                let rawLength = event.chunkLength ?? 0
                if writer.contains(id) {
                    try writer.appendChunk(id: id, rawLength: rawLength, codec: .none, stored: nil)
                    continue
                }
                // No stored form only after the writer went back to an earlier commit (a file
                // left out after a read error, or a resume that could not continue its open
                // file): a chunk the dedup claims thought stored is not stored any more. Framing
                // it here gives the same bytes a processing task would have produced.
                let stored =
                    try processedForm
                    ?? batch.withChunkBytes(of: event) { raw in
                        Result { () throws(CairnError) in try StoredChunk.make(id: id, raw: raw, compressor: fallbackCompressor) }
                    }.get()
                try stored.record.withBytes { (raw) throws(CairnError) in
                    try writer.appendChunkRecord(
                        id: id, rawLength: rawLength, codec: stored.codec, record: raw, storedLength: stored.storedLength,
                        recordDigest: stored.recordDigest)
                }
            case .endFile:
                let index = writer.openEntryIndex
                try writer.endFile()
                if let onEntry = configuration.onEntry, let index { onEntry(writer.manifest.entries[index].entry) }
            case .discardOpenFile(let source):
                try discardOpenFile(source: source)
            }
        }
    }

    // MARK: - Paths

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
