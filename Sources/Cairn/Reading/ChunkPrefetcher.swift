/// Reads, decompresses and verifies chunks ahead of the extractor's writes, on every core,
/// handing them back strictly in order.
///
/// The chunks to deliver are known up front (the files' references, in extraction order). They
/// are cut into groups of about ``groupBytes`` raw bytes; up to ``window`` groups are decoded
/// by their own tasks while the caller writes earlier ones, so memory stays near
/// `window × groupBytes`.
///
/// From a remote source, each group's records are fetched on a thread of its own (never the
/// cooperative pool's), and the window is at least the source's `connections` + 2, so that
/// up to `connections` groups' range requests are in flight while the caller writes
/// (`Spec/0001-container-format.md §13.9`): memory stays near
/// `max(6, connections + 2) × groupBytes` of records and as much of decoded chunks.
final class ChunkPrefetcher {
    /// What a decode task needs: the archive's source (a local file read with `pread`, or a
    /// remote one read with range requests; tasks share it) and the chunk table.
    struct Source: Sendable {
        var source: any ArchiveSource
        var path: String
        var chunks: [Manifest.ChunkRow]
        /// The archive's chunk id rule, by which every chunk read is checked.
        var idFunction: ChunkIDFunction
        /// Chunk records end before the manifest.
        var limit: UInt64
        /// For a remote source: where every record the manifest knows of starts (entries, chunk
        /// records, packs, the manifest), sorted, so a pack's record, whose length the manifest
        /// does not hold, is fetched up to the next of them (its commit comes with it).
        var recordStarts: [UInt64] = []
        /// Records read before (the packs the checks before writing read), served from there
        /// instead of being fetched again.
        var kept: KeptRecords?

        /// The source of `reader`'s archive and its chunk table.
        init(reader: ArchiveReader) {
            source = reader.source
            path = reader.path
            chunks = reader.manifest.chunks
            idFunction = reader.idFunction
            limit = reader.footer.manifestOffset
            if reader.source.isRemote { recordStarts = ArchiveReader.recordStarts(of: reader.manifest, end: limit) }
        }

        /// A local archive's `chunks`, whose records all end before `limit` (no record starts
        /// are needed: a local pack record is read by its own length).
        init(source: any ArchiveSource, path: String, chunks: [Manifest.ChunkRow], limit: UInt64, ids: ChunkIDFunction) {
            self.source = source
            self.path = path
            self.chunks = chunks
            self.idFunction = ids
            self.limit = limit
        }

        /// The bytes that hold the record of chunk `index`: exactly its chunk record, or its pack
        /// record and what follows up to the next record the manifest names.
        func recordRange(ofChunk index: Int) -> Range<UInt64> {
            let row = chunks[index]
            guard row.pack != nil else {
                let framed = UInt64(RecordFraming.overhead + ChunkRecordPrefix.length) + UInt64(row.storedLength)
                return row.offset..<min(limit, row.offset + framed)
            }
            return row.offset..<ArchiveReader.nextRecordStart(after: row.offset, in: recordStarts, end: limit)
        }

        /// The records of a group's chunks fetched together (remote; a local source reads each
        /// record where it is, with no copy): one coalesced transfer instead of a request per record.
        func prefetching(_ group: [Int]) throws(CairnError) -> Source {
            guard source.isRemote else { return self }
            var seen = Set<UInt64>()
            var ranges: [Range<UInt64>] = []
            var held: [(range: Range<UInt64>, bytes: [UInt8])] = []
            for range in group.map(recordRange(ofChunk:)) where seen.insert(range.lowerBound).inserted {
                if let bytes = kept?.bytes(of: range) { held.append((range, bytes)) } else { ranges.append(range) }
            }
            // Ranges with kept bytes between them are fetched apart: merged into one request, the
            // bytes between would cross the wire again.
            var runs: [[Range<UInt64>]] = []
            for range in ranges.sorted(by: { $0.lowerBound < $1.lowerBound }) {
                if let previous = runs.last?.last, kept?.holdsAny(of: previous.upperBound..<range.lowerBound) != true {
                    runs[runs.count - 1].append(range)
                } else {
                    runs.append([range])
                }
            }
            var copy = self
            do throws(CairnError) {
                copy.source = try PrefetchedArchiveBytes(source, fetching: [], separately: runs, holding: held)
            } catch {
                throw error.withPath(path)
            }
            return copy
        }

        /// The last pack read, decompressed and verified: packed chunks of one pack come together.
        struct PackCache {
            var offset: UInt64
            var content: [UInt8]
        }

        /// Reads chunk `index`, checks its record and its id (for a packed chunk: the whole
        /// pack's content digest, §7.5), and returns its raw bytes.
        func decode(_ index: Int, using decompressor: ChunkDecompressor, cache: inout PackCache?) throws(CairnError) -> [UInt8] {
            let row = chunks[index]
            if row.pack != nil {
                if cache?.offset != row.offset {
                    let (record, _) = try source.readRecord(at: row.offset, fileSize: limit)
                    guard record.type == .pack else {
                        throw CairnError(.corrupted, "the record the manifest names as a pack is not one", path: path, offset: row.offset)
                    }
                    do throws(CairnError) {
                        // Chunks before the pack: back past this pack's other inline chunks.
                        var first = index
                        while first > 0, chunks[first - 1].pack == row.pack { first -= 1 }
                        let pack = try PackContent.read(
                            payload: record.payload, offset: row.offset, chunkCount: UInt64(first), contentIDs: idFunction,
                            using: decompressor)
                        cache = PackCache(offset: row.offset, content: pack.content ?? [])
                    } catch {
                        throw error.withPath(path)
                    }
                }
                guard let content = cache?.content, row.packOffset + Int(row.rawLength) <= content.count else {
                    throw CairnError(.corrupted, "the manifest places a chunk past its pack's content", path: path, offset: row.offset)
                }
                return Array(content[row.packOffset..<(row.packOffset + Int(row.rawLength))])
            }
            let (record, _) = try source.readRecord(at: row.offset, fileSize: limit)
            guard record.type == .chunk, record.payload.count == ChunkRecordPrefix.length + Int(row.storedLength),
                record.payload.count > ChunkRecordPrefix.length, record.payload[32] == row.codec.rawValue
            else {
                throw CairnError(.corrupted, "chunk record \(row.id) disagrees with its manifest row", path: path, offset: row.offset)
            }
            var out = [UInt8](repeating: 0, count: Int(row.rawLength))
            do {
                try out.withMutableBytes { (raw) throws(CairnError) in
                    try ArchiveReader.decodeChunk(
                        record.payload, expected: row.id, rawLength: Int(row.rawLength), offset: row.offset, ids: idFunction,
                        using: decompressor, into: raw)
                }
            } catch {
                throw error.withPath(path)
            }
            return out
        }
    }

    private let source: Source
    private let order: [Int]
    private let window: Int
    private let groupBytes: Int
    private var nextToSchedule = 0
    private var tasks: [Task<[[UInt8]], any Error>] = []
    private var current: [[UInt8]] = []
    private var currentIndex = 0

    /// - Parameters:
    ///   - order: chunk-table indices in the order they will be requested.
    ///   - window: decode tasks in flight.
    ///   - groupBytes: raw bytes per task.
    init(source: Source, order: [Int], window: Int = 6, groupBytes: Int = 2 << 20) {
        self.source = source
        self.order = order
        self.window = max(1, window, source.source.isRemote ? source.source.connections + 2 : 1)
        self.groupBytes = max(1, groupBytes)
    }

    private func schedule() {
        while tasks.count < window, nextToSchedule < order.count {
            var group: [Int] = []
            var bytes = 0
            // A pack's chunks stay in one group: its record is read and decompressed once.
            while nextToSchedule < order.count, group.isEmpty || bytes < groupBytes || continuesPack(group) {
                let index = order[nextToSchedule]
                group.append(index)
                bytes += Int(source.chunks[index].rawLength)
                nextToSchedule += 1
            }
            let source = source
            let planned = group
            tasks.append(
                Task.detached {
                    let decompressor = ChunkDecompressor()
                    // The network waits on a thread of its own; decoding runs on the pool.
                    let source =
                        source.source.isRemote
                        ? try await DedicatedThread.run { () throws(CairnError) in try source.prefetching(planned) }
                        : try source.prefetching(planned)
                    var out: [[UInt8]] = []
                    out.reserveCapacity(planned.count)
                    var cache: Source.PackCache?
                    for index in planned {
                        try Task.checkCancellation()
                        out.append(try source.decode(index, using: decompressor, cache: &cache))
                    }
                    return out
                })
        }
    }

    /// Whether the next chunk to schedule lies in the same pack as the last one of `group`.
    private func continuesPack(_ group: [Int]) -> Bool {
        guard let last = group.last, let pack = source.chunks[last].pack else { return false }
        return source.chunks[order[nextToSchedule]].pack == pack
    }

    /// The next chunk's verified raw bytes, which must be chunk `reference` (the order given).
    ///
    /// - Throws: what decoding it threw; `.invalidArgument` (an internal error) when the chunks
    ///   are asked for in another order than planned.
    nonisolated(nonsending) func next(_ reference: UInt32) async throws -> [UInt8] {
        guard delivered < order.count, order[delivered] == Int(reference) else {
            throw CairnError(.invalidArgument, "internal error: chunk \(reference) requested out of the planned order")
        }
        delivered += 1
        return try await next()
    }

    /// Chunk `reference` read back from the staged file a reference before wrote it to
    /// (``ChunkLocations/readBack(_:id:ids:staging:open:entryPath:)``), or, when that file cannot give
    /// it back verified (made unreadable by its mode, changed since), decoded from the archive
    /// again.
    func readBack(
        _ reference: UInt32, from kept: ChunkReuse.Kept, staging: StagingDirectory, open: (path: [UInt8], fd: FileDescriptor),
        entryPath: String
    ) throws(CairnError) -> [UInt8] {
        do throws(CairnError) {
            return try ChunkLocations.readBack(
                kept.location, id: kept.id, ids: source.idFunction, staging: staging, open: open, entryPath: entryPath)
        } catch {
            var cache: Source.PackCache?
            return try source.decode(Int(reference), using: ChunkDecompressor(), cache: &cache)
        }
    }

    /// How many chunks ``next(_:)`` delivered.
    private var delivered = 0

    /// The next chunk's verified raw bytes.
    nonisolated(nonsending) private func next() async throws -> [UInt8] {
        if currentIndex >= current.count {
            schedule()
            guard !tasks.isEmpty else {
                throw CairnError(.invalidArgument, "internal error: more chunks requested than planned")
            }
            let task = tasks.removeFirst()
            current = try await task.value
            currentIndex = 0
            schedule()
        }
        defer { currentIndex += 1 }
        return current[currentIndex]
    }

    /// Cancels the decode tasks still running.
    func cancel() {
        for task in tasks { task.cancel() }
        tasks.removeAll()
    }
}
