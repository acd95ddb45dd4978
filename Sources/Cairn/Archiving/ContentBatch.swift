/// One unit of work in the archiving pipeline: a buffer of file content and the ordered events
/// (entries, chunks, file ends) that the writer applies.
///
/// Small files are packed several to a batch; a large file spans many batches. The producer
/// takes ``byteCount`` from the ``ByteBudget`` before reading into the buffer, and the writer
/// returns it after the batch's bytes were handed to the sink.
package struct ContentBatch: Sendable {
    /// What the writer does, in order.
    package enum Event: Sendable {
        /// Begin an entry (a file stays open until ``endFile``).
        case entry(ArchiveEntry)
        /// The next chunk of the open file: `buffer[range]`.
        case chunk(Range<Int>)
        /// The next chunk of the open file is this many zero bytes, from a hole
        /// (`Spec/0002-chunking.md §8`): it was never read, and its id and stored form come from
        /// ``ZeroChunks``.
        case zeroChunk(length: Int)
        /// The open file is complete.
        case endFile
        /// Leave the open file out: go back to the last commit before it began
        /// (``ArchiveWriter/rewindToBoundary()``). Sent when a read failed part way (the associated
        /// value is the source path, for messages), and when resuming, if the file left open by
        /// the last commit cannot be continued (it changed or is gone; nil).
        case discardOpenFile(String?)

        /// The raw length of a chunk event in bytes; nil for the other events.
        package var chunkLength: Int? {
            switch self {
            case .chunk(let range): range.count
            case .zeroChunk(let length): length
            case .entry, .endFile, .discardOpenFile: nil
            }
        }
    }

    /// Sequence number, for ordering.
    package var sequence: UInt64
    /// Global ordinal of this batch's first chunk (chunk ordinals decide which duplicate is stored).
    package var firstChunkOrdinal: UInt64
    package var buffer: [UInt8]
    package var events: [Event]
    /// Bytes taken from the budget for this batch.
    package var byteCount: Int
    /// Whether the batch is one pack (§7.5): small items, each file one chunk or none, written
    /// as one pack record.
    package var isPack = false

    /// Calls `body` with a chunk event's raw bytes: `buffer[range]`, or zeros for a
    /// ``Event/zeroChunk(length:)`` (empty for an event that is no chunk).
    package func withChunkBytes<R>(of event: Event, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        switch event {
        case .chunk(let range):
            return buffer.withUnsafeBytes { raw in body(UnsafeRawBufferPointer(rebasing: raw[range])) }
        case .zeroChunk(let length):
            return ZeroChunks.withZeros(length, body)
        case .entry, .endFile, .discardOpenFile:
            return body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
    }
}

/// The hashed, and where needed compressed, chunks of a batch, in event order.
package struct ProcessedBatch: Sendable {
    package var ids: [Digest]
    /// The stored form of each chunk this batch must write; nil where an earlier chunk with the
    /// same id will have been written first. Empty for a pack.
    package var stored: [StoredChunk?]
    /// For a pack: its content section, holding the chunks this batch claimed.
    package var pack: ArchiveWriter.PackContent?
}

/// A chunk's stored form, already framed as a complete chunk record (header, prefix, payload,
/// CRC-32), so the serial writer only copies it (`Spec/0001-container-format.md §3, §7`).
package struct StoredChunk: Sendable {
    package var codec: ChunkCodec
    /// The whole chunk record.
    package var record: [UInt8]
    /// SHA-256 of ``record``: its `d(r)` for the chain digest (§10.3), computed here, on the
    /// processing task, so the serial writer only adds 32 bytes to the chain.
    package var recordDigest: Digest
    /// Bytes of the stored payload inside ``record``.
    package var storedLength: Int {
        record.count - RecordFraming.overhead - ChunkRecordPrefix.length
    }

    /// Compresses `raw` with `compressor` and frames the result as a chunk record for `id`.
    package static func make(id: Digest, raw: UnsafeRawBufferPointer, compressor: ChunkCompressor) throws(CairnError) -> StoredChunk {
        var record: [UInt8] = []
        record.reserveCapacity(raw.count + RecordFraming.overhead + ChunkRecordPrefix.length + 64)
        let start = RecordCodec.beginRecord(.chunk, in: &record)
        let codecOffset = record.count + 32
        ChunkRecordPrefix(id: id, codec: .none, rawLength: raw.count).encode(into: &record)
        let codec = compressor.compress(raw, appendingTo: &record)
        record[codecOffset] = codec.rawValue
        RecordCodec.endRecord(startingAt: start, in: &record)
        return StoredChunk(codec: codec, record: record, recordDigest: try SHA256.hash(record))
    }
}
