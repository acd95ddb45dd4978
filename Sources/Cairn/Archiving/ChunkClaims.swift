import Synchronization

/// Which chunk ordinal first claimed each chunk id, shared by the processing tasks so that a
/// duplicate chunk is not compressed twice.
///
/// A task compresses a chunk only if no chunk with a smaller ordinal (earlier in the output)
/// has claimed its id. The chunk with the smallest ordinal for an id always compresses, and the
/// writer writes chunks in ordinal order, so whenever the writer meets an id for the first time
/// it holds that id's payload, whatever the scheduling.
///
/// Claims are only a hint that saves work: they are keyed by the first 8 bytes of the id (a third
/// of the memory of full ids, which matters for archives of many small files), and a wrong "skip"
/// (two ids sharing a prefix) costs nothing but time, because the writer compresses any new chunk
/// that arrives without a stored form.
package final class ChunkClaims: Sendable {
    private let claims = Mutex<[UInt64: UInt64]>([:])

    package init() {}

    /// Records `ordinal` for `id` unless an earlier ordinal holds it.
    ///
    /// - Returns: true when the caller must produce the stored form.
    package func claim(_ id: Digest, ordinal: UInt64) -> Bool {
        let key = id.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
        return claims.withLock { map in
            if let existing = map[key], existing <= ordinal { return existing == ordinal }
            map[key] = ordinal
            return true
        }
    }
}

/// Hashes (SHA-256) and compresses one batch; runs as its own task, one per batch, so batches
/// in flight use every core.
package enum BatchProcessor {
    package static func process(_ batch: ContentBatch, compression: CompressionMethod, claims: ChunkClaims) throws
        -> ProcessedBatch
    {
        let ranges = batch.chunkRanges
        var ids: [Digest] = []
        var stored: [StoredChunk?] = []
        ids.reserveCapacity(ranges.count)
        stored.reserveCapacity(ranges.count)
        let compressor = ChunkCompressor(method: compression)
        try batch.buffer.withBytes { (raw) throws(CairnError) in
            for (index, range) in ranges.enumerated() {
                let bytes = UnsafeRawBufferPointer(rebasing: raw[range])
                let id = try SHA256.hash(bytes)
                ids.append(id)
                if claims.claim(id, ordinal: batch.firstChunkOrdinal + UInt64(index)) {
                    stored.append(StoredChunk.make(id: id, raw: bytes, compressor: compressor))
                } else {
                    stored.append(nil)
                }
            }
        }
        return ProcessedBatch(ids: ids, stored: stored)
    }
}
