import Glibc

/// The first stage of the archiving pipeline: walks sources, reads files into batches, cuts
/// them into chunks, and hands each full batch to a processing task and, in order, to the writer.
///
/// It runs on its own task; everything it keeps between ``Archiver`` calls is in ``State``, a
/// value that moves in and out of that task.
struct ItemProducer {
    /// What persists across appends.
    struct State: Sendable {
        /// (device, inode) of files with several links → their path in archive.
        var hardLinks: [HardLinkKey: [UInt8]] = [:]
        /// Paths already used, to refuse duplicates.
        var paths = PathTable()
        var warnings: [CairnError] = []
        var nextBatch: UInt64 = 0
        var nextChunkOrdinal: UInt64 = 0
        /// Content bytes read so far (for progress).
        var contentBytes: UInt64 = 0
        /// Files never to archive: the archive being written, when it lies inside the tree.
        var excluded: Set<HardLinkKey> = []
        /// Resuming: entries already committed in the archive, by path.
        var committed: [PathKey: CommittedItem] = [:]
        /// Resuming: the file left open by the last commit, to be continued if unchanged.
        var openFileToContinue: OpenFileToContinue?
        /// Paths in archive of an SQLite database's `-wal` and `-journal` files dealt with
        /// already: by its snapshot (``SQLiteSnapshot``), or, resuming, by its committed entry
        /// (`Spec/0003-command-line.md §3.2` item 6). Skipped whenever they are reached again,
        /// by the walk or given as a source of their own, as the same item (two per database at
        /// most, kept to the end).
        var snapshotSidecars: Set<PathKey> = []
    }

    /// An entry already in a resumed archive.
    struct CommittedItem: Sendable {
        var kind: ArchiveEntry.Kind
        var size: UInt64
        var modificationTime: Timestamp
    }

    /// The file a resumed archive's last commit left open.
    struct OpenFileToContinue: Sendable {
        var path: [UInt8]
        /// Size and mtime recorded in its entry record: it continues only if both still match.
        var size: UInt64
        var modificationTime: Timestamp
        /// Content bytes already committed.
        var committedBytes: UInt64
    }

    /// A source file open for reading, with the `fstat(2)` of its descriptor.
    struct OpenedFile {
        var file: FileDescriptor
        var status: FileStatus
    }

    struct HardLinkKey: Hashable, Sendable {
        var device: UInt64
        var inode: UInt64
    }

    /// What the producer takes from ``Archiver/Configuration`` besides chunking and batches.
    struct Options: Sendable {
        /// tar's `--exclude`: items whose path in archive matches are left out.
        var exclusions = ExclusionPatterns([])
        /// tar's `--one-file-system`: do not descend into directories on another device.
        var staysOnOneFileSystem = false
        /// The most processing tasks running at once; nil for no limit (one per core in practice).
        var workerCount: Int?
        /// ``Archiver/Configuration/collectsExtendedAttributes``.
        var collectsExtendedAttributes = true
        /// Test hook: the offset at which reading a source file fails with `EIO`, by source path.
        var readFailure: (@Sendable ([UInt8]) -> UInt64?)?
        /// ``Archiver/Configuration/snapshotsSQLiteDatabases``.
        var snapshotsSQLiteDatabases = true
        /// ``Archiver/Configuration/sqliteLockTimeoutMilliseconds``.
        var sqliteLockTimeoutMilliseconds: Int32 = 3000
        /// ``Archiver/Configuration/afterReadPass``.
        var afterReadPass: (@Sendable ([UInt8], Int) -> Void)?
        /// Whether bytes already written can be taken back (the sink is a file), so that a file
        /// that changed while read can be left out and read again even after some of its
        /// chunks reached the sink. A packed file can always be read again. Set by the archiver.
        var sinkCanBeCutBack = true
    }

    /// How many times a file that changed while it was read is read again before it is stored
    /// as read with a warning (`Spec/0003-command-line.md §3.2`).
    static let rereadLimit = 3

    /// A batch and the task computing its chunks' ids and stored forms.
    struct Item: Sendable {
        var batch: ContentBatch
        var processing: Task<ProcessedBatch, any Error>
    }

    var state: State
    private let chunker: Chunker
    /// The archive's chunk id rule (``Archiver/Configuration`` `keying`).
    private let ids: ChunkIDFunction
    private let batchBytes: Int
    private let budget: ByteBudget
    private let pool: BufferPool
    private let claims: ChunkClaims
    private let compression: CompressionMethod
    private let output: AsyncStream<Item>.Continuation
    private let onProgress: @Sendable (UInt64) -> Void
    private let options: Options
    /// Processing tasks started and maybe not finished, oldest first (for ``Options/workerCount``).
    private var running: [Task<ProcessedBatch, any Error>] = []

    private var buffer: [UInt8]
    private var used = 0
    /// Start of the open file's bytes not yet cut into chunks.
    private var pendingStart = 0
    private var events: [ContentBatch.Event] = []
    private var chunksInBatch = 0
    private var acquired = 0
    /// Whether the current batch is a pack (§7.5): small items only, written as one pack record.
    private var packOpen = false
    /// Whether the file being read goes into a pack as one chunk (set before its entry).
    private var wholeFileChunk = false
    private var packItems = 0
    private var packContentBytes: UInt64 = 0

    /// A pack is closed before its content passes this (1 MiB, uncompressed)...
    package static let packContentTarget: UInt64 = 1 << 20
    /// ... or before it holds this many items (so its events stay under a batch's 4096).
    package static let packItemLimit = 1024
    /// Files up to this size go into packs, each as one chunk, the whole file, whatever the cut
    /// points (`Spec/0002 §9`): at most 64 KiB, and below the chunking maximum, so the chunk is
    /// within the policy's lengths and the file holds no hole (holes are at least one maximum
    /// chunk, `Spec/0002 §8`).
    private var packFileLimit: UInt64 { UInt64(max(0, min(chunker.maximum - 1, 64 << 10))) }
    /// A pack is also closed before its entries' names, targets and extended attributes pass
    /// this (1 MiB), so its item table stays far below the 8 MiB limit (§7.5); an item with more
    /// than ``packMetadataLimit`` of them is not packed at all.
    package static let packMetadataTarget = 1 << 20
    package static let packMetadataLimit = 64 << 10
    private var packMetadataBytes = 0
    /// Whether the last item admitted to the open pack is a content-defined cut point: the pack
    /// ends after it.
    private var packEndsAfterLast = false
    /// Content-defined pack ends (`Spec/0001 §10.2`): once a pack's content and metadata reach
    /// this many bytes, it ends after the first item whose path's FNV-1a hash is a multiple of
    /// ``packCutDivisor``; so an item added or removed usually moves the ends of its own pack
    /// only, and a seeded fetch finds the other packs unchanged in the previous export (a
    /// change that moves a pack's start by many items can shift several, §10.2).
    package static let packCutMinimum = 256 << 10
    package static let packCutDivisor: UInt64 = 8

    /// The bytes of an entry that are not fixed-size numbers: its path, link target and
    /// extended attributes.
    private static func metadataBytes(_ entry: ArchiveEntry) -> Int {
        entry.pathBytes.count + entry.linkTarget.count + entry.extendedAttributes.reduce(0) { $0 + $1.name.count + $1.value.count }
    }
    /// The least batch size that keeps every pack within one batch: a batch is never cut inside
    /// a pack for lack of room, so where packs end depends only on the items.
    package static func minimumBatchBytes(for chunking: ChunkingPolicy) -> Int {
        Int(packContentTarget) + 2 * chunking.maximum + (64 << 10)
    }

    init(
        state: State, chunking: ChunkingPolicy, keying: ChunkKeying?, batchBytes: Int, budget: ByteBudget, pool: BufferPool, claims: ChunkClaims,
        compression: CompressionMethod, output: AsyncStream<Item>.Continuation, options: Options = Options(),
        onProgress: @escaping @Sendable (UInt64) -> Void
    ) {
        self.options = options
        self.state = state
        self.chunker = Chunker(policy: chunking, keying: keying)
        self.ids = ChunkIDFunction(keying: keying)
        self.batchBytes = batchBytes
        self.budget = budget
        self.pool = pool
        self.claims = claims
        self.compression = compression
        self.output = output
        self.onProgress = onProgress
        self.buffer = []
    }

    // MARK: - Batches

    /// Makes sure a buffer with room is available, taking its size from the budget.
    private mutating func ensureBuffer() async throws {
        if acquired == 0 {
            try await budget.acquire(batchBytes)
            acquired = batchBytes
            if buffer.count != batchBytes { buffer = pool.take(count: batchBytes) }
        }
    }

    /// Sends the current batch (if it has any event) and starts a new one, carrying the open
    /// file's undetermined tail `buffer[pendingStart..<used]` over.
    mutating func flushBatch() async throws {
        let isPack = packOpen
        packOpen = false
        guard !events.isEmpty else { return }
        let tail = Array(buffer[pendingStart..<used])
        var batch = ContentBatch(
            sequence: state.nextBatch, firstChunkOrdinal: state.nextChunkOrdinal, buffer: buffer, events: events,
            byteCount: acquired)
        batch.isPack = isPack
        state.nextBatch += 1
        state.nextChunkOrdinal += UInt64(chunksInBatch)
        let compression = compression
        let claims = claims
        let ids = ids
        if let limit = options.workerCount {
            // At most `limit` batches hashed and compressed at once: wait for the oldest. The
            // output does not depend on it (the writer applies batches in sequence order).
            while running.count >= max(1, limit) {
                _ = try? await running.removeFirst().value
            }
        }
        let processing = Task.detached {
            try BatchProcessor.process(batch, ids: ids, compression: compression, claims: claims)
        }
        if options.workerCount != nil { running.append(processing) }
        output.yield(Item(batch: batch, processing: processing))
        events = []
        chunksInBatch = 0
        acquired = 0
        buffer = []
        used = 0
        pendingStart = 0
        try await ensureBuffer()
        buffer.replaceSubrange(0..<tail.count, with: tail)
        used = tail.count
    }

    /// Called before each item's entry: decides whether it goes into a pack, and where packs
    /// begin and end (`Spec/0001 §10.2`). A pack begins with a fresh batch, holds consecutive
    /// small items (directories, symlinks, hard links, special files, files of at most
    /// ``packFileLimit`` bytes) and ends before one that would take it past
    /// ``packContentTarget`` or ``packItemLimit``, before any other item, and at the end of the
    /// append; so a resumed run, which starts after a pack, cuts the same packs.
    ///
    /// - Parameter contentBytes: the file's size at open; 0 for other kinds.
    private mutating func prepareForItem(_ entry: ArchiveEntry, packable: Bool, contentBytes: UInt64 = 0) async throws {
        let metadata = Self.metadataBytes(entry)
        if packable, metadata <= Self.packMetadataLimit {
            if packOpen, !packEndsAfterLast, packItems < Self.packItemLimit, packContentBytes + contentBytes <= Self.packContentTarget,
                packMetadataBytes + metadata <= Self.packMetadataTarget
            {
                packItems += 1
                packContentBytes += contentBytes
                packMetadataBytes += metadata
            } else {
                if state.openFileToContinue != nil { discardOpenFile() }
                try await flushBatch()
                packOpen = true
                packItems = 1
                packContentBytes = contentBytes
                packMetadataBytes = metadata
            }
            packEndsAfterLast =
                packContentBytes + UInt64(packMetadataBytes) >= UInt64(Self.packCutMinimum)
                && Self.pathHash(entry.pathBytes) % Self.packCutDivisor == 0
        } else if packOpen {
            try await flushBatch()
        }
    }

    /// FNV-1a, 64 bits, of a path's bytes: where content-defined pack ends fall.
    package static func pathHash(_ bytes: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        return hash
    }

    /// ``prepareForItem(_:packable:contentBytes:)``, then emits the entry event.
    private mutating func emitEntry(packable: Bool, contentBytes: UInt64 = 0, _ event: ContentBatch.Event) async throws {
        if case .entry(let entry) = event { try await prepareForItem(entry, packable: packable, contentBytes: contentBytes) }
        try await emit(event)
    }

    private mutating func emit(_ event: ContentBatch.Event) async throws {
        try await ensureBuffer()
        if state.openFileToContinue != nil { discardOpenFile() }
        events.append(event)
        if events.count >= 4096 { try await flushBatch() }
    }

    /// Resuming: the open file will not be continued; the writer goes back to the commit before
    /// it, and its path becomes free to be archived again from the start.
    private mutating func discardOpenFile() {
        guard let open = state.openFileToContinue else { return }
        state.openFileToContinue = nil
        state.committed[PathKey(open.path)] = nil
        state.paths.remove(open.path)
        events.append(.discardOpenFile(nil))
    }

    /// Cuts `buffer[pendingStart..<used]` into chunks; with `isFinal` the rest is the file's end.
    private mutating func cutChunks(isFinal: Bool) {
        buffer.withUnsafeBytes { raw in
            while pendingStart < used {
                let window = UnsafeRawBufferPointer(rebasing: raw[pendingStart..<used])
                guard let length = chunker.nextChunkLength(in: window, isFinal: isFinal) else { break }
                events.append(.chunk(pendingStart..<(pendingStart + length)))
                chunksInBatch += 1
                pendingStart += length
            }
        }
    }

    /// Appends the zero chunks of `hole` from `offset` (a chunk boundary inside it, or its start):
    /// chunks of the policy's maximum length counted from the hole's start, then one shorter tail
    /// (`Spec/0002-chunking.md §8`). Nothing is read.
    private mutating func appendHole(_ hole: Range<UInt64>, from offset: UInt64) async throws {
        let maximum = UInt64(chunker.maximum)
        var position = max(offset, hole.lowerBound)
        while position < hole.upperBound {
            try Task.checkCancellation()
            let length = ZeroChunks.pieceLength(at: position, in: hole, maximum: maximum)
            events.append(.zeroChunk(length: Int(length)))
            chunksInBatch += 1
            position += length
            state.contentBytes += length
            if events.count >= 4096 {
                onProgress(state.contentBytes)
                try await flushBatch()
            }
        }
        onProgress(state.contentBytes)
    }

    // MARK: - Sources

    /// The flags every source file is opened with: never a symlink followed, never a terminal
    /// taken as controlling one, never blocked on a FIFO that replaced a file.
    private static let fileOpenFlags = O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK

    /// Appends one item and, for directories, everything below it, depth first in byte order.
    ///
    /// - Parameters:
    ///   - status: the item's `lstat`; nil for a name its directory listed as a regular file
    ///     (``DirectoryReader/Entry/isRegularFile``): it is then opened first and its status
    ///     taken from the descriptor (`fstat(2)`), which saves an `fstatat(2)` per file, and the
    ///     descriptor is handed on to be read. Whatever else the name turns out to be, or if it
    ///     cannot be opened, it is stat'ed by name, as any other item is.
    ///   - device: the device of the top-level item (nil: `status`'s), for
    ///     ``Options/staysOnOneFileSystem``.
    mutating func appendTree(
        sourcePath: [UInt8], parent: FileDescriptor?, name: [UInt8], status listed: FileStatus?, archivePath: [UInt8],
        device: UInt64? = nil
    ) async throws {
        try Task.checkCancellation()
        // Built only when a message needs it: escaping every name costs time on large trees.
        var display: String { PathBytes.display(sourcePath) }
        let problem = archivePath.isEmpty ? nil : PathValidator.problem(with: archivePath)
        let excluded = problem == nil && !archivePath.isEmpty && options.exclusions.excludes(archivePath)
        // The listed regular file, open: handed to ``appendFile``, or closed on the way out.
        var opened: OpenedFile?
        defer { if let opened { _ = try? opened.file.close() } }
        guard
            let status = itemStatus(
                name: name, parent: parent, listed: listed, opening: problem == nil && !excluded, opened: &opened,
                sourcePath: sourcePath)
        else { return }
        if let problem {
            warn(CairnError(.limitExceeded, "path in archive \(problem); skipped", path: display))
            return
        }
        if excluded { return }
        let device = device ?? status.device
        switch status.kind {
        case .directory where options.staysOnOneFileSystem && status.device != device:
            // Another file system: keep the directory's entry, not what is below it (tar).
            if !archivePath.isEmpty, state.committed[PathKey(archivePath)]?.kind != .directory {
                try claim(archivePath)
                let attributes = extendedAttributes(of: .name(name, in: parent), display: display)
                try await emitEntry(packable: true,
                    .entry(ArchiveEntry(pathBytes: archivePath, kind: .directory, status: status, extendedAttributes: attributes)))
            }
        case .directory:
            try await appendDirectory(
                sourcePath: sourcePath, parent: parent, name: name, status: status, archivePath: archivePath, device: device)
        case .symlink:
            try await appendSymlink(sourcePath: sourcePath, parent: parent, name: name, status: status, archivePath: archivePath)
        case .regular:
            try await appendRegularFile(
                sourcePath: sourcePath, parent: parent, name: name, status: status, archivePath: archivePath, opened: &opened)
        case .fifo, .characterDevice, .blockDevice:
            // Recorded as entries (format 2.0), as tar does; sockets are not (below).
            if state.committed[PathKey(archivePath)] != nil { return }
            try claim(archivePath)
            let attributes = extendedAttributes(of: .name(name, in: parent), display: display)
            let kind: ArchiveEntry.Kind =
                status.kind == .fifo ? .fifo : status.kind == .characterDevice ? .characterDevice : .blockDevice
            var entry = ArchiveEntry(pathBytes: archivePath, kind: kind, status: status, extendedAttributes: attributes)
            if kind.isDevice { entry.device = SpecialFiles.split(status.specialDevice) }
            try await emitEntry(packable: true, .entry(entry))
        default:
            warn(CairnError(.unsupportedFileType, "\(status.kind.pluralDescription) are not archived; skipped", path: display))
        }
    }

    /// An item's status: `listed`, else, when `opening`, the `fstat(2)` of the item opened as a
    /// regular file (left open in `opened`), else its `lstat`.
    ///
    /// - Returns: nil when the item cannot be stat'ed (warned about).
    private mutating func itemStatus(
        name: [UInt8], parent: FileDescriptor?, listed: FileStatus?, opening: Bool, opened: inout OpenedFile?, sourcePath: [UInt8]
    ) -> FileStatus? {
        if let listed { return listed }
        if opening, let file = try? FileDescriptor.open(name, flags: Self.fileOpenFlags, relativeTo: parent) {
            if let found = try? file.status(), found.kind == .regular {
                opened = OpenedFile(file: file, status: found)
            } else {
                _ = try? file.close()
            }
        }
        if let opened { return opened.status }
        do {
            return try FileStatus.of(name, relativeTo: parent)
        } catch {
            warn(error.withDisplay(PathBytes.display(sourcePath)))
            return nil
        }
    }

    /// A directory's entry (unless a resumed archive holds it), then its children in byte order.
    private mutating func appendDirectory(
        sourcePath: [UInt8], parent: FileDescriptor?, name: [UInt8], status: FileStatus, archivePath: [UInt8], device: UInt64
    ) async throws {
        var display: String { PathBytes.display(sourcePath) }
        let directory: FileDescriptor
        do {
            directory = try FileSystem.openDirectory(name, in: parent, display: display)
        } catch {
            warn(error.withDisplay(display))
            return
        }
        defer { _ = try? directory.close() }
        if !archivePath.isEmpty, state.committed[PathKey(archivePath)]?.kind != .directory {
            try claim(archivePath)
            let attributes = extendedAttributes(of: .descriptor(directory), display: display)
            try await emitEntry(packable: true,
                .entry(
                    ArchiveEntry(pathBytes: archivePath, kind: .directory, status: status, extendedAttributes: attributes)))
        }
        let children: [DirectoryReader.Entry]
        do {
            children = try DirectoryReader.entries(in: directory)
        } catch {
            warn(error.withDisplay(display))
            return
        }
        for child in children {
            let childArchivePath = PathBytes.join(archivePath, child.name)
            // A snapshotted database's sidecar, dealt with already; it may be gone by now.
            if !state.snapshotSidecars.isEmpty, state.snapshotSidecars.contains(PathKey(childArchivePath)) { continue }
            let childPath = PathBytes.join(sourcePath, child.name)
            var childStatus: FileStatus?
            if !child.isRegularFile {
                do {
                    childStatus = try FileStatus.of(child.name, relativeTo: directory)
                } catch {
                    warn(error.withDisplay(PathBytes.display(childPath)))
                    continue
                }
            }
            try await appendTree(
                sourcePath: childPath, parent: directory, name: child.name, status: childStatus,
                archivePath: childArchivePath, device: device)
        }
    }

    /// A symbolic link's entry, unless a resumed archive holds it.
    private mutating func appendSymlink(
        sourcePath: [UInt8], parent: FileDescriptor?, name: [UInt8], status: FileStatus, archivePath: [UInt8]
    ) async throws {
        var display: String { PathBytes.display(sourcePath) }
        if state.committed[PathKey(archivePath)] != nil { return }
        let target: [UInt8]
        do {
            target = try FileSystem.readSymlink(name, in: parent, display: display)
        } catch {
            warn(error.withDisplay(display))
            return
        }
        try claim(archivePath)
        let attributes = extendedAttributes(of: .name(name, in: parent), display: display)
        try await emitEntry(packable: true,
            .entry(
                ArchiveEntry(
                    pathBytes: archivePath, kind: .symlink, status: status, linkTarget: target,
                    extendedAttributes: attributes)))
    }

    /// A regular file: left out when it is a database's sidecar or index, or the archive being
    /// written; continued when a resumed archive left it open; kept as committed when a resumed
    /// archive holds it; a hard link to an earlier path with the same inode; else its entry and
    /// content (``appendFile``).
    ///
    /// - Parameter opened: the file, open, when listing opened it: taken when handed on.
    private mutating func appendRegularFile(
        sourcePath: [UInt8], parent: FileDescriptor?, name: [UInt8], status: FileStatus, archivePath: [UInt8],
        opened: inout OpenedFile?
    ) async throws {
        var display: String { PathBytes.display(sourcePath) }
        // A database's `-wal` went in right after it, under its snapshot, and its `-journal`
        // is left out; a database's `-shm` is never archived (`Spec/0003-command-line.md §3.2`).
        if !state.snapshotSidecars.isEmpty, state.snapshotSidecars.contains(PathKey(archivePath)) { return }
        if isDatabaseIndex(name: name, parent: parent) { return }
        let key = HardLinkKey(device: status.device, inode: status.inode)
        if !state.excluded.isEmpty, state.excluded.contains(key) { return }  // the archive being written
        if let open = state.openFileToContinue, open.path == archivePath {
            if open.size == status.size, open.modificationTime == status.modificationTime {
                let handed = opened
                opened = nil
                if try await appendFile(
                    name: name, parent: parent, sourcePath: sourcePath, archivePath: archivePath, opened: handed,
                    continuingAfter: open.committedBytes)
                {
                    if status.linkCount > 1 { state.hardLinks[key] = archivePath }
                    return
                }
            }
            discardOpenFile()
        }
        if !state.committed.isEmpty, let committed = state.committed[PathKey(archivePath)] {
            if committed.kind == .file, status.linkCount > 1 { state.hardLinks[key] = archivePath }
            if committed.kind == .file, committed.size != status.size || committed.modificationTime != status.modificationTime {
                warn(CairnError(.sourceChanged, "changed since it was archived; the archived copy is kept", path: display))
            }
            if committed.kind == .file, options.snapshotsSQLiteDatabases, isDatabase(opened?.file, name: name, parent: parent) {
                // Its -wal and -journal went in with it, or belong to a later state than the
                // archived copy (`Spec/0003-command-line.md §3.2` item 6).
                let archived = SQLiteFileNames(main: archivePath)
                leaveOut([archived.journal, archived.log])
            }
            return
        }
        if status.linkCount > 1, let first = state.hardLinks[key] {
            try claim(archivePath)
            try await emitEntry(packable: true,
                .entry(
                    ArchiveEntry(pathBytes: archivePath, kind: .hardLink, status: status, linkTarget: first)))
            return
        }
        let handed = opened
        opened = nil
        if try await appendFile(name: name, parent: parent, sourcePath: sourcePath, archivePath: archivePath, opened: handed),
            status.linkCount > 1
        {
            state.hardLinks[key] = archivePath
        }
    }

    /// Appends a regular file's entry and content.
    ///
    /// An SQLite database (a file beginning with ``SQLiteSnapshot/header``) is read under a
    /// read transaction, and its `-wal` right after it under the same transaction
    /// (`Spec/0003-command-line.md §3.2`). Any other file that changed while it was read is
    /// read again, up to ``rereadLimit`` times, before it is stored as read with a warning.
    ///
    /// A small file (at most ``packFileLimit`` bytes) is read once, before its entry
    /// (``readAhead(of:count:)``): the bytes decide whether it is a database, and its content is
    /// taken from them.
    ///
    /// - Parameters:
    ///   - opened: the file, already open with ``fileOpenFlags``, and its `fstat`; nil to open
    ///     `name` in `parent`. Closed before returning either way.
    ///   - isSnapshotSidecar: the file is a database's `-wal`, read under the database's
    ///     snapshot: frames appended meanwhile lie past the snapshot and are expected.
    /// - Returns: whether an entry was written (false when the file was skipped with a warning).
    private mutating func appendFile(
        name: [UInt8], parent: FileDescriptor?, sourcePath: [UInt8], archivePath: [UInt8], opened: OpenedFile? = nil,
        continuingAfter: UInt64? = nil, isSnapshotSidecar: Bool = false
    ) async throws -> Bool {
        var display: String { PathBytes.display(sourcePath) }
        guard let opened = opened ?? openSourceFile(name: name, parent: parent, sourcePath: sourcePath) else { return false }
        let fd = opened.file
        var before = opened.status
        // A database's descriptor is closed without dropping locks this process holds on it (an
        // app's own connection, when the app exports in-process: ``ProcessRecordLocks``).
        var isDatabaseFile = false
        defer { if isDatabaseFile { ProcessRecordLocks.close(fd) } else { _ = try? fd.close() } }
        guard before.kind == .regular else {
            warn(CairnError(.sourceChanged, "was replaced by a \(before.kind) after it was listed; skipped", path: display))
            return false
        }
        // The file's first bytes, read ahead into the free part of the buffer, where its content
        // goes once its entry is emitted: how many, and where; nil when the read below reads them.
        var early: ReadAhead?
        if continuingAfter == nil, before.size > 0, before.size <= packFileLimit {
            early = readAhead(of: fd, count: Int(before.size))
        }
        let snapshot: SQLiteSnapshot?
        if continuingAfter == nil, !isSnapshotSidecar, options.snapshotsSQLiteDatabases {
            let isDatabase = startsLikeDatabase(fd, size: before.size, readAhead: early)
            isDatabaseFile = isDatabase
            snapshot = takeSnapshot(of: fd, status: before, isDatabase: isDatabase, name: name, parent: parent, sourcePath: sourcePath)
        } else {
            snapshot = nil
        }
        // Declared after the descriptor's `close`, so it runs first: closing a descriptor of the
        // database would drop the connection's lock (POSIX locks belong to the process).
        defer { snapshot?.end() }
        if snapshot != nil {
            // Read again, under the snapshot: the bytes read before it may predate a commit.
            early = nil
            if let locked = try? fd.status() { before = locked }
        }
        // In WAL mode a checkpoint may write frames of the snapshot into the main file while it
        // is read, and writers append frames past the snapshot to the `-wal`: both expected.
        let changesExpected = isSnapshotSidecar || snapshot?.isWriteAheadLog == true
        var pass = 0
        while true {
            guard let start = try await beginPass(of: fd, status: before, archivePath: archivePath, continuingAfter: continuingAfter, display: display)
            else { return false }
            let (readTotal, readError) = try await readContent(
                of: fd, from: start, limit: before.size, sourcePath: sourcePath, readAhead: early)
            if let readError {
                // A short file must never look complete: leave the whole file out. The writer goes
                // back to the commit before its entry (and cuts back what reached the sink).
                discardReadFile(archivePath)
                try await emit(.discardOpenFile(display))
                warn(
                    CairnError(
                        .io, "read failed after \(readTotal) bytes; left out of the archive", path: display,
                        cause: readError.cause, underlyingCause: readError.underlyingCause))
                return false
            }
            options.afterReadPass?(sourcePath, pass)
            let after = try? fd.status()
            var changed = readTotal != before.size
            if let after {
                changed =
                    changed || after.size != before.size || after.modificationTime != before.modificationTime
                    || after.changeTime != before.changeTime
            }
            if changed, !changesExpected, continuingAfter == nil, pass < Self.rereadLimit,
                wholeFileChunk || options.sinkCanBeCutBack, let after, after.kind == .regular
            {
                // Leave what was read out (as after a read error) and read the file again.
                discardReadFile(archivePath)
                try await emit(.discardOpenFile(display))
                before = after
                pass += 1
                early = nil
                continue
            }
            try await emit(.endFile)
            if changed, !changesExpected, let after { warnChanged(before: before, after: after, readTotal: readTotal, display: display) }
            break
        }
        if snapshot != nil { try await appendSnapshotSidecars(name: name, parent: parent, sourcePath: sourcePath, archivePath: archivePath) }
        // Keep small files packed together, but start a fresh batch once this one is mostly full.
        if used >= batchBytes - batchBytes / 8 { try await flushBatch() }
        return true
    }

    /// Opens `name` in `parent` for reading (``fileOpenFlags``) and takes its `fstat(2)`.
    ///
    /// - Returns: nil when either fails (warned about).
    private mutating func openSourceFile(name: [UInt8], parent: FileDescriptor?, sourcePath: [UInt8]) -> OpenedFile? {
        var display: String { PathBytes.display(sourcePath) }
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.open(name, flags: Self.fileOpenFlags, relativeTo: parent)
        } catch {
            warn(error.withDisplay(display))
            return nil
        }
        do {
            return OpenedFile(file: fd, status: try fd.status())
        } catch {
            _ = try? fd.close()
            warn(error.withDisplay(display))
            return nil
        }
    }

    /// Whether a file of `size` bytes begins with ``SQLiteSnapshot/header``: from its bytes read
    /// ahead, if they were, else read from `fd`.
    private func startsLikeDatabase(_ fd: FileDescriptor, size: UInt64, readAhead early: ReadAhead?) -> Bool {
        size >= UInt64(SQLiteSnapshot.header.count)
            && (early.map { ahead in
                buffer.withUnsafeBytes { raw in
                    SQLiteSnapshot.isDatabase(firstBytes: UnsafeRawBufferPointer(rebasing: raw[ahead.offset..<(ahead.offset + ahead.count)]))
                }
            } ?? SQLiteSnapshot.isDatabase(fd))
    }

    /// Begins one read of a file: its entry, or, continuing a file a resumed archive left open,
    /// a seek past its committed bytes.
    ///
    /// - Returns: the offset the read starts at; nil when the file cannot be continued.
    private mutating func beginPass(
        of fd: FileDescriptor, status before: FileStatus, archivePath: [UInt8], continuingAfter: UInt64?,
        display: @autoclosure () -> String
    ) async throws -> UInt64? {
        wholeFileChunk = false
        if let committedBytes = continuingAfter {
            // The writer holds this file open after its last commit: continue right after the
            // committed bytes, which end on a chunk boundary, so the chunks come out the same.
            // Not a database: its committed bytes were read under the interrupted run's
            // snapshot; it is archived again from its start, under one (`Spec/0003 §3.2`).
            guard committedBytes <= before.size, !(options.snapshotsSQLiteDatabases && SQLiteSnapshot.isDatabase(fd)),
                (try? fd.seek(to: committedBytes)) != nil
            else { return nil }
            state.openFileToContinue = nil
            try await ensureBuffer()
            return committedBytes
        }
        try claim(archivePath)
        let attributes = extendedAttributes(of: .descriptor(fd), display: display())
        wholeFileChunk = before.size <= packFileLimit
        try await emitEntry(packable: wholeFileChunk, contentBytes: before.size,
            .entry(
                ArchiveEntry(
                    pathBytes: archivePath, kind: .file, status: before, size: before.size,
                    extendedAttributes: attributes)))
        return 0
    }

    /// Reads a file's content from `start` up to `limit` bytes (its size at open, as tar does: a
    /// log that never stops growing must not keep the archive open) into batches, cut into
    /// chunks, its holes as zero chunks.
    ///
    /// - Parameter early: the file's first bytes, if ``readAhead(of:count:)`` read them.
    /// - Returns: the offset reached, and the read error that stopped it, if one did.
    private mutating func readContent(
        of fd: FileDescriptor, from start: UInt64, limit: UInt64, sourcePath: [UInt8], readAhead early: ReadAhead?
    ) async throws -> (readTotal: UInt64, readError: CairnError?) {
        var display: String { PathBytes.display(sourcePath) }
        var early = early
        var readTotal = start
        var readError: CairnError?
        let failAt = options.readFailure?(sourcePath)
        // Holes of at least one maximum chunk are never read (`Spec/0002-chunking.md §8`): they
        // become zero chunks, and the data between them is chunked as if each run of data were
        // a file of its own. Found from offset 0 even when continuing, so a resumed read cuts
        // the same chunks.
        var holes = HoleFinder(file: fd, size: limit, minimumLength: UInt64(chunker.maximum))
        var hole = holes.first(endingAfter: readTotal)
        pendingStart = used
        while true {
            try Task.checkCancellation()
            if let found = hole, readTotal >= found.lowerBound {
                try await appendHole(found, from: readTotal)
                readTotal = found.upperBound
                hole = holes.next()
                if readTotal >= limit { break }
                continue
            }
            let dataEnd = hole?.lowerBound ?? limit
            // Keep at least one maximum-size chunk of room, so every read makes progress.
            if buffer.count - used < chunker.maximum { try await flushBatch() }
            var want = Int(clamping: min(UInt64(buffer.count - used), dataEnd - min(dataEnd, readTotal)))
            if let failAt { want = min(want, Int(clamping: failAt - min(failAt, readTotal))) }
            var n = 0
            do throws(CairnError) {
                let end = used + want
                if let ahead = early, readTotal == 0, ahead.batch == state.nextBatch, ahead.offset == used {
                    // Read ahead, before the entry, right where they belong (no batch was sent
                    // meanwhile): the bytes a `pread` at 0 would give now.
                    n = min(want, ahead.count)
                } else {
                    n = try buffer.withMutableBytes { (raw) throws(CairnError) in
                        try fd.read(fromAbsoluteOffset: readTotal, into: UnsafeMutableRawBufferPointer(rebasing: raw[used..<end]))
                    }
                }
                early = nil
                if let failAt, readTotal + UInt64(n) >= failAt, readTotal + UInt64(n) < limit {
                    throw Errno(rawValue: EIO).error("read failed", path: display)
                }
            } catch {
                readError = error.withDisplay(display)
            }
            used += n
            readTotal += UInt64(n)
            state.contentBytes += UInt64(n)
            if readError != nil { break }
            let shortRead = n < want
            let atRunEnd = shortRead || readTotal >= dataEnd
            if wholeFileChunk {
                // A packed file is one chunk: the whole file.
                if atRunEnd, used > pendingStart {
                    events.append(.chunk(pendingStart..<used))
                    chunksInBatch += 1
                    pendingStart = used
                }
            } else {
                cutChunks(isFinal: atRunEnd)
            }
            if shortRead || readTotal >= limit { break }
            onProgress(state.contentBytes)
            if !atRunEnd { try await flushBatch() }
        }
        onProgress(state.contentBytes)
        return (readTotal, readError)
    }

    /// Warns that a file changed while it was read and was stored as read.
    private mutating func warnChanged(before: FileStatus, after: FileStatus, readTotal: UInt64, display: String) {
        if after.size > before.size, readTotal == before.size {
            warn(
                CairnError(
                    .sourceChanged, "grew while read; archived the first \(readTotal) bytes", path: display))
        } else {
            warn(
                CairnError(
                    .sourceChanged,
                    "changed while it was read (size \(before.size) → \(after.size), \(readTotal) bytes archived)",
                    path: display))
        }
    }

    /// A small file's first bytes, read before its entry into the buffer past ``used``
    /// (``readAhead(of:count:)``).
    private struct ReadAhead {
        /// Where they are in ``buffer`` (``used`` when they were read).
        var offset: Int
        /// How many (fewer than asked at end of file).
        var count: Int
        /// ``State/nextBatch`` when they were read: a batch sent since took the buffer with it,
        /// and the bytes must be read again.
        var batch: UInt64
    }

    /// Reads up to `count` bytes of `file` from offset 0 into ``buffer`` at ``used``, without
    /// taking them (``used`` does not move): the small file's entry goes out first, and if no
    /// batch was sent meanwhile the read of its content finds them in place. So a small file is
    /// read once, and whether it is an SQLite database is decided from these bytes.
    ///
    /// - Returns: where the bytes are; nil when the buffer has no room for `count` bytes (the
    ///   first file, or a full batch) or the read failed (the content's own read then meets the
    ///   error and reports it).
    private mutating func readAhead(of file: FileDescriptor, count: Int) -> ReadAhead? {
        guard acquired > 0, count <= buffer.count - used else { return nil }
        let start = used
        let got = buffer.withUnsafeMutableBytes { raw in
            try? file.read(fromAbsoluteOffset: 0, into: UnsafeMutableRawBufferPointer(rebasing: raw[start..<(start + count)]))
        }
        return got.map { ReadAhead(offset: start, count: $0, batch: state.nextBatch) }
    }

    /// Forgets a file whose read is abandoned: its undetermined tail and its path in archive.
    private mutating func discardReadFile(_ archivePath: [UInt8]) {
        pendingStart = used
        state.paths.remove(archivePath)
    }

    /// Starts a read transaction on `fd`'s file if it is an SQLite database
    /// (``SQLiteSnapshot``); a database that cannot be locked or opened is warned about and
    /// archived as a plain file.
    ///
    /// A WAL database without a `-wal` is at rest (no connection has it open) and is read as
    /// a plain file: a read-only connection would create a `-wal` and a `-shm` beside it and
    /// could not remove them; a writer that comes meanwhile writes to a new `-wal`, and the main
    /// file changes only at a checkpoint, which the change check sees.
    ///
    /// - Parameter isDatabase: whether the file begins with ``SQLiteSnapshot/header``.
    /// - Returns: the held snapshot; nil when `fd` is no database, is at rest, or on failure.
    private mutating func takeSnapshot(
        of fd: FileDescriptor, status: FileStatus, isDatabase: Bool, name: [UInt8], parent: FileDescriptor?, sourcePath: [UInt8]
    ) -> SQLiteSnapshot? {
        guard isDatabase else { return nil }
        // A WAL database without its -wal or -shm has no connection open (SQLite keeps both while
        // one is): it is read as it is. Opening it would create the missing files in the tree
        // being archived (and change its directory's mtime); SQLite opens any database that has
        // a -wal beside it in WAL mode, whatever its header says.
        let files = SQLiteFileNames(main: name)
        let hasLog = (try? FileStatus.of(files.log, relativeTo: parent)) != nil
        let hasIndex = (try? FileStatus.of(files.index, relativeTo: parent)) != nil
        if (SQLiteSnapshot.isWriteAheadLogDatabase(fd) || hasLog) && !(hasLog && hasIndex) {
            return nil
        }
        let display = PathBytes.display(sourcePath)
        switch SQLiteSnapshot.begin(path: sourcePath, display: display, timeoutMilliseconds: options.sqliteLockTimeoutMilliseconds) {
        case .success(let snapshot):
            // libsqlite3 opened the file by its path: it must be the file being read.
            var st = stat()
            guard sourcePath.withNullTerminated({ stat($0, &st) }) == 0, UInt64(st.st_dev) == status.device,
                UInt64(st.st_ino) == status.inode
            else {
                snapshot.end()
                warn(
                    CairnError(
                        .sourceChanged, "SQLite database was replaced while it was opened; archived as a plain file",
                        path: display))
                return nil
            }
            return snapshot
        case .failure(let error):
            // A file that only starts like a database is archived as any other file.
            if error.code != .corrupted { warn(error) }
            return nil
        }
    }

    /// Appends a snapshotted database's `-wal` (if there is one) right after it, still under
    /// the snapshot, and marks its `-wal` and `-journal` as dealt with
    /// (``State/snapshotSidecars``); `Spec/0003-command-line.md §3.2` says why the `-journal` is
    /// left out (and its `-shm`, by ``isDatabaseIndex(name:parent:)``).
    private mutating func appendSnapshotSidecars(
        name: [UInt8], parent: FileDescriptor?, sourcePath: [UInt8], archivePath: [UInt8]
    ) async throws {
        let files = SQLiteFileNames(main: name)
        let archived = SQLiteFileNames(main: archivePath)
        leaveOut([archived.journal])
        let walArchivePath = archived.log
        guard !state.paths.contains(walArchivePath) else { return }
        // Listed or not, gone or not, the walk must not archive it (or warn that it vanished).
        state.snapshotSidecars.insert(PathKey(walArchivePath))
        guard !options.exclusions.excludes(walArchivePath), let status = try? FileStatus.of(files.log, relativeTo: parent),
            status.kind == .regular
        else { return }
        _ = try await appendFile(
            name: files.log, parent: parent, sourcePath: SQLiteFileNames(main: sourcePath).log, archivePath: walArchivePath,
            isSnapshotSidecar: true)
    }

    /// Marks a database's sidecars at `paths` (in the archive) as dealt with
    /// (``State/snapshotSidecars``), unless they are in the archive already.
    private mutating func leaveOut(_ paths: [[UInt8]]) {
        for path in paths where !state.paths.contains(path) {
            state.snapshotSidecars.insert(PathKey(path))
        }
    }

    /// Whether the regular file `file` (nil: `name` in `parent`, opened for this) is an SQLite
    /// database (``SQLiteSnapshot/isDatabase(_:)``).
    private func isDatabase(_ file: FileDescriptor?, name: [UInt8], parent: FileDescriptor?) -> Bool {
        if let file { return SQLiteSnapshot.isDatabase(file) }
        return SQLiteSnapshot.isDatabase(named: name, in: parent)
    }

    /// Whether `name` in `parent` is an SQLite database's `-shm` (its WAL index): `NAME-shm`
    /// beside a regular file `NAME` that begins with ``SQLiteSnapshot/header``. Such a file is
    /// never archived while ``Options/snapshotsSQLiteDatabases`` is on, whatever state its
    /// database is in (open, at rest, locked, committed by an interrupted run) and however it is
    /// reached (by the walk, or as a source of its own): the first connection rebuilds it from
    /// the `-wal`, and a stored one could only be stale (`Spec/0003-command-line.md §3.2`).
    ///
    /// Opens the database only for a name ending in `-shm`, and never while a snapshot is held
    /// (closing a descriptor of a database drops the process's locks on it).
    private func isDatabaseIndex(name: [UInt8], parent: FileDescriptor?) -> Bool {
        guard options.snapshotsSQLiteDatabases, let files = SQLiteFileNames(sidecar: name), files.index == name else {
            return false
        }
        return isDatabase(nil, name: files.main, parent: parent)
    }

    /// Appends a file whose content comes from an async sequence of byte arrays.
    mutating func appendStream<S: AsyncSequence>(_ bytes: S, entry: ArchiveEntry) async throws
    where S.Element == [UInt8] {
        try claim(entry.pathBytes)
        try await emitEntry(packable: false, .entry(entry))
        pendingStart = used
        for try await piece in bytes {
            var offset = 0
            while offset < piece.count {
                try Task.checkCancellation()
                if buffer.count - used < chunker.maximum {
                    cutChunks(isFinal: false)
                    try await flushBatch()
                }
                let take = min(buffer.count - used, piece.count - offset)
                buffer.replaceSubrange(used..<(used + take), with: piece[offset..<(offset + take)])
                used += take
                offset += take
                state.contentBytes += UInt64(take)
                if used == buffer.count {
                    cutChunks(isFinal: false)
                    onProgress(state.contentBytes)
                }
            }
        }
        // A cancelled task sees an async sequence end early: that is not the end of the content.
        try Task.checkCancellation()
        cutChunks(isFinal: true)
        onProgress(state.contentBytes)
        try await emit(.endFile)
    }

    /// Sends the last batch and returns the unused budget of an empty trailing buffer.
    mutating func finish() async throws {
        try await flushBatch()
        if acquired > 0, events.isEmpty {
            budget.release(acquired)
            acquired = 0
        }
    }

    private mutating func claim(_ path: [UInt8]) throws(CairnError) {
        guard state.paths.insert(path) else {
            throw CairnError(.alreadyExists, "path is already in the archive", path: PathBytes.display(path))
        }
    }

    private mutating func warn(_ error: CairnError) {
        state.warnings.append(error)
    }

    /// The item's extended attributes to archive (none when
    /// ``Options/collectsExtendedAttributes`` is off); what is left out is warned about.
    ///
    /// - Parameter display: the item's path for warnings, built only if there is one.
    private mutating func extendedAttributes(of item: ExtendedAttributes.Item, display: @autoclosure () -> String)
        -> [ArchiveEntry.ExtendedAttribute]
    {
        guard options.collectsExtendedAttributes else { return [] }
        let (attributes, warnings) = ExtendedAttributes.read(item, display: display())
        for warning in warnings { warn(warning) }
        return attributes
    }
}

extension ArchiveEntry {
    /// An entry for `pathBytes` with the mode, mtime, owner and group of `status`.
    init(
        pathBytes: [UInt8], kind: Kind, status: FileStatus, size: UInt64 = 0, linkTarget: [UInt8] = [],
        extendedAttributes: [ExtendedAttribute] = []
    ) {
        self.init(
            pathBytes: pathBytes, kind: kind, permissions: status.permissions, modificationTime: status.modificationTime,
            size: size, userID: status.userID, groupID: status.groupID, linkTarget: linkTarget,
            extendedAttributes: extendedAttributes)
    }
}
