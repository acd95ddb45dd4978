import Glibc
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
            // One probe for the common case, an id not claimed before (a second one only to put
            // an earlier claim back).
            guard let existing = map.updateValue(ordinal, forKey: key) else { return true }
            if existing < ordinal { map[key] = existing }
            return existing >= ordinal
        }
    }

    /// Forgets every claim (once no chunk will be processed any more: the archive's manifest
    /// is being written), so their memory is not held while the manifest is encoded.
    package func removeAll() {
        claims.withLock { $0 = [:] }
    }
}

/// Hashes (by the archive's ``ChunkIDFunction``) and compresses one batch; runs as its own task, one per batch, so batches
/// in flight use every core.
package enum BatchProcessor {
    package static func process(_ batch: ContentBatch, ids chunkIDs: ChunkIDFunction, compression: CompressionMethod, claims: ChunkClaims)
        throws -> ProcessedBatch
    {
        if batch.isPack { return try processPack(batch, ids: chunkIDs, compression: compression, claims: claims) }
        var ids: [Digest] = []
        var stored: [StoredChunk?] = []
        ids.reserveCapacity(batch.events.count)
        stored.reserveCapacity(batch.events.count)
        let compressor = ChunkCompressor(method: compression)
        try batch.buffer.withBytes { (raw) throws(CairnError) in
            for event in batch.events {
                let ordinal = batch.firstChunkOrdinal + UInt64(ids.count)
                switch event {
                case .chunk(let range):
                    let bytes = UnsafeRawBufferPointer(rebasing: raw[range])
                    let id = try chunkIDs.id(of: bytes)
                    ids.append(id)
                    if claims.claim(id, ordinal: ordinal) {
                        stored.append(try StoredChunk.make(id: id, raw: bytes, compressor: compressor))
                    } else {
                        stored.append(nil)
                    }
                case .zeroChunk(let length):
                    // Never hashed byte by byte: the id is cached, and only the first chunk of
                    // each length in the archive is compressed (from zeros that were not read).
                    let id = try ZeroChunks.id(length: length, ids: chunkIDs)
                    ids.append(id)
                    if claims.claim(id, ordinal: ordinal) {
                        stored.append(try ZeroChunks.withZeros(length) { (raw) throws(CairnError) in try StoredChunk.make(id: id, raw: raw, compressor: compressor) })
                    } else {
                        stored.append(nil)
                    }
                case .entry, .endFile, .discardOpenFile:
                    continue
                }
            }
        }
        return ProcessedBatch(ids: ids, stored: stored)
    }
}

extension BatchProcessor {
    /// A pack batch: every chunk hashed, and the chunks it claims (the first occurrence of each
    /// id) put together, in order, into the pack's content section and compressed as one frame
    /// (§7.5).
    static func processPack(_ batch: ContentBatch, ids chunkIDs: ChunkIDFunction, compression: CompressionMethod, claims: ChunkClaims)
        throws(CairnError)
        -> ProcessedBatch
    {
        var ids: [Digest] = []
        var inlineIDs: [Digest] = []
        var inlineRanges: [Range<Int>] = []
        ids.reserveCapacity(batch.events.count)
        inlineIDs.reserveCapacity(batch.events.count)
        inlineRanges.reserveCapacity(batch.events.count)
        // Whether the claimed chunks lie one after another in the buffer (the files were read so,
        // and usually every one is new): then they are compressed where they lie, not copied.
        var adjacent = true
        var inlineBytes = 0
        try batch.buffer.withBytes { (bytes) throws(CairnError) in
            for event in batch.events {
                guard case .chunk(let range) = event else { continue }
                let ordinal = batch.firstChunkOrdinal + UInt64(ids.count)
                let id = try chunkIDs.id(of: UnsafeRawBufferPointer(rebasing: bytes[range]))
                ids.append(id)
                if claims.claim(id, ordinal: ordinal) {
                    if let last = inlineRanges.last, last.upperBound != range.lowerBound { adjacent = false }
                    inlineRanges.append(range)
                    inlineIDs.append(id)
                    inlineBytes += range.count
                }
            }
        }
        let pack = try batch.buffer.withBytes { (bytes) throws(CairnError) in
            if adjacent {
                let start = inlineRanges.first?.lowerBound ?? 0
                return try PackContentBuilder.build(
                    rawBytes: UnsafeRawBufferPointer(rebasing: bytes[start..<(start + inlineBytes)]), inlineIDs: inlineIDs,
                    compression: compression)
            }
            var raw: [UInt8] = []
            raw.reserveCapacity(inlineBytes)
            for range in inlineRanges { raw.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[range])) }
            return try PackContentBuilder.build(raw: raw, inlineIDs: inlineIDs, compression: compression)
        }
        return ProcessedBatch(ids: ids, stored: [], pack: pack)
    }
}

/// Builds a pack's content section (§7.5) from its inline chunks.
package enum PackContentBuilder {
    /// - Parameters:
    ///   - raw: the inline chunks' bytes, concatenated in order.
    ///   - inlineIDs: their ids.
    /// - Returns: the stored content (stored raw when compressing does not make it smaller, §7.3)
    ///   and the digest over the ids.
    package static func build(raw: [UInt8], inlineIDs: [Digest], compression: CompressionMethod) throws(CairnError)
        -> ArchiveWriter.PackContent
    {
        try raw.withBytes { (bytes) throws(CairnError) in try build(rawBytes: bytes, inlineIDs: inlineIDs, compression: compression) }
    }

    /// ``build(raw:inlineIDs:compression:)`` from bytes wherever they lie (a batch's buffer).
    package static func build(rawBytes raw: UnsafeRawBufferPointer, inlineIDs: [Digest], compression: CompressionMethod)
        throws(CairnError) -> ArchiveWriter.PackContent
    {
        let digest = try PackContent.digest(ofIDs: inlineIDs)
        var stored: [UInt8] = []
        var codec = ChunkCodec.none
        if !raw.isEmpty {
            stored.reserveCapacity(raw.count / 2 + 64)
            codec = ChunkCompressor(method: compression).compress(raw, appendingTo: &stored)
        }
        return ArchiveWriter.PackContent(codec: codec, stored: stored, rawLength: raw.count, digest: digest, inlineIDs: inlineIDs)
    }
}
