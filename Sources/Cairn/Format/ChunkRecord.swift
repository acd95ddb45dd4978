/// The fixed prefix of a chunk record payload (`Spec/0001-container-format.md §7`):
/// `id[32] | codec u8 | reserved[3] | rawLength u32`, then the stored bytes.
package struct ChunkRecordPrefix: Sendable, Equatable {
    package static let length = 40
    package var id: Digest
    package var codec: ChunkCodec
    package var rawLength: Int

    package func encode(into out: inout [UInt8]) {
        id.append(to: &out)
        out.append(codec.rawValue)
        out.append(contentsOf: [0, 0, 0])
        withUnsafeBytes(of: UInt32(truncatingIfNeeded: rawLength).littleEndian) { out.append(contentsOf: $0) }
    }

    /// The raw length a chunk record payload declares (bytes 36..<40, §7.1), clamped to
    /// 1...``FormatLimits/maximumChunkLength``, for sizing a buffer before the payload is decoded
    /// (the decoder checks the real value); nil when the payload is shorter than the prefix.
    /// The payload starts at `payload[start]` (`start` is ``RecordFraming/headerLength`` for a
    /// framed record).
    package static func declaredRawLength(inPayload payload: [UInt8], start: Int = 0) -> Int? {
        guard start >= 0, payload.count - start >= length else { return nil }
        let at = start + 36
        let raw = Int(payload[at]) | Int(payload[at + 1]) << 8 | Int(payload[at + 2]) << 16 | Int(payload[at + 3]) << 24
        return min(max(raw, 1), FormatLimits.maximumChunkLength)
    }

    /// Decodes and checks the prefix; `storedLength` is the rest of the payload.
    package static func decode(_ r: inout ByteReader, storedLength: Int) throws(CairnError) -> ChunkRecordPrefix {
        let id = try r.digest("chunk id")
        let codecByte = try r.u8("codec")
        guard try r.raw(3, "reserved") == [0, 0, 0] else { throw r.error("reserved bytes are not zero") }
        let raw = Int(try r.u32("raw length"))
        guard let codec = ChunkCodec(rawValue: codecByte) else { throw r.error("unknown codec \(codecByte)") }
        guard raw >= 1, raw <= FormatLimits.maximumChunkLength else {
            throw r.error("raw length \(raw) is outside 1...\(FormatLimits.maximumChunkLength)")
        }
        if codec == .none, storedLength != raw {
            throw r.error("uncompressed chunk stores \(storedLength) bytes but declares \(raw)")
        }
        return ChunkRecordPrefix(id: id, codec: codec, rawLength: raw)
    }
}

/// One reference from a file to a chunk: the chunk's id and raw length
/// (`Spec/0001-container-format.md §8`).
package struct ChunkReference: Sendable, Equatable {
    package static let encodedLength = 36
    package var id: Digest
    package var length: Int
}

/// The chunk-references record payload: `entryIndex u64 | count u32 | count × (id[32], length u32)`.
package enum ChunkReferencesRecord {
    package static func encode(entryIndex: UInt64, references: ArraySlice<ChunkReference>) -> [UInt8] {
        var w = ByteWriter(capacity: 12 + references.count * ChunkReference.encodedLength)
        w.u64(entryIndex)
        w.u32(UInt32(truncatingIfNeeded: references.count))
        for reference in references {
            w.digest(reference.id)
            w.u32(UInt32(truncatingIfNeeded: reference.length))
        }
        return w.bytes
    }

    package static func decode(_ r: inout ByteReader) throws(CairnError) -> (entryIndex: UInt64, references: [ChunkReference]) {
        let entry = try r.u64("entry index")
        let count = Int(try r.u32("reference count"))
        guard count >= 1, count <= FormatLimits.maximumReferencesPerRecord else {
            throw r.error("reference count \(count) is outside 1...\(FormatLimits.maximumReferencesPerRecord)")
        }
        guard r.remaining == count * ChunkReference.encodedLength else {
            throw r.error("payload holds \(r.remaining) bytes for \(count) references")
        }
        var references: [ChunkReference] = []
        references.reserveCapacity(count)
        for _ in 0..<count {
            let id = try r.digest("chunk id")
            let length = Int(try r.u32("chunk length"))
            guard length >= 1, length <= FormatLimits.maximumChunkLength else {
                throw r.error("reference length \(length) is outside 1...\(FormatLimits.maximumChunkLength)")
            }
            references.append(ChunkReference(id: id, length: length))
        }
        return (entry, references)
    }
}

/// The file-end record payload (`§8`): `entryIndex u64 | size u64 | chunkCount u64 | contentDigest[32]`.
package struct FileEndRecord: Sendable, Equatable {
    package var entryIndex: UInt64
    package var size: UInt64
    package var chunkCount: UInt64
    package var contentDigest: Digest

    package func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: 56)
        w.u64(entryIndex)
        w.u64(size)
        w.u64(chunkCount)
        w.digest(contentDigest)
        return w.bytes
    }

    package static func decode(_ r: inout ByteReader) throws(CairnError) -> FileEndRecord {
        FileEndRecord(
            entryIndex: try r.u64("entry index"), size: try r.u64("size"), chunkCount: try r.u64("chunk count"),
            contentDigest: try r.digest("content digest"))
    }
}
