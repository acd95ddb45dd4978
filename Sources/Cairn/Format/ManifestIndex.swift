/// The manifest index (record type 13, format 2.1, `Spec/0001-container-format.md §11.8`): the
/// framed length and record digest `d(m)` of every manifest record, written as a skippable record
/// just before the final commit, so that a receiver holding an earlier archive learns which
/// manifest records it already has before downloading any (§13.6.1).
///
/// Payload: `n` entries of `framedLength u32 | recordDigest[32]`, in manifest order, then `n u32`.
/// The count comes last so that a reader that knows where the record ends (one commit record before
/// the manifest) finds its length from its last bytes: `12 + 36 × n + 4`.
package struct ManifestIndex: Sendable, Equatable {
    /// One manifest record: its framed length and its record digest (SHA-256 of its framed bytes, §1.4).
    package struct Entry: Sendable, Equatable {
        package var framedLength: UInt32
        package var digest: Digest
    }

    package var entries: [Entry]

    /// Bytes per entry in the payload.
    package static let entryLength = 36
    /// The most manifest records an index can list within the record payload limit (466,033,
    /// §14): a writer whose manifest has more writes no index (§11.8).
    package static let maximumCount = (FormatLimits.maximumRecordPayload - 4) / entryLength
    /// The framed length of an index of `count` entries.
    package static func framedLength(count: UInt32) -> UInt64 {
        UInt64(RecordFraming.overhead) + UInt64(count) * UInt64(entryLength) + 4
    }

    /// The bytes of the manifest region it describes.
    package var manifestLength: UInt64 { entries.reduce(0) { $0 + UInt64($1.framedLength) } }

    /// The index of the framed manifest records `records` (one after another, as the writer made them).
    ///
    /// - Throws: `.invalidArgument` when `records` is not a run of whole records.
    package init(manifestRecords records: [UInt8]) throws(CairnError) {
        var entries: [Entry] = []
        var position = 0
        try records.withBytes { (raw) throws(CairnError) in
            while position < raw.count {
                let header = try RecordCodec.parseHeader(UnsafeRawBufferPointer(rebasing: raw[position...]), offset: UInt64(position))
                let end = position + header.framedLength
                guard end <= raw.count else { throw CairnError(.invalidArgument, "internal error: a manifest record runs past the manifest") }
                let digest = try SHA256.hash(UnsafeRawBufferPointer(rebasing: raw[position..<end]))
                entries.append(Entry(framedLength: UInt32(truncatingIfNeeded: header.framedLength), digest: digest))
                position = end
            }
        }
        self.entries = entries
    }

    package init(entries: [Entry]) { self.entries = entries }

    /// The framed record: type 13 with the skippable flag (a 2.0 reader skips it, §3.3).
    package func framed() -> [UInt8] {
        var w = ByteWriter(capacity: entries.count * Self.entryLength + 4)
        for entry in entries {
            w.u32(entry.framedLength)
            w.digest(entry.digest)
        }
        w.u32(UInt32(truncatingIfNeeded: entries.count))
        var out: [UInt8] = []
        RecordCodec.append(.manifestIndex, payload: w.bytes, flags: RecordFraming.skippableFlag, to: &out)
        return out
    }

    /// Decodes a payload.
    ///
    /// - Parameter offset: the payload's archive offset, for messages.
    /// - Throws: `.corrupted` for a payload that is not `36 × n + 4` bytes with `n ≥ 1` its last
    ///   field, or an entry shorter than a manifest record can be (21 bytes framed).
    package static func decode(_ payload: [UInt8], offset: UInt64) throws(CairnError) -> ManifestIndex {
        var r = ByteReader(payload, baseOffset: offset, what: "manifest index")
        guard payload.count >= 4 + entryLength, (payload.count - 4) % entryLength == 0 else {
            throw r.error("a payload of \(payload.count) bytes is not 36 bytes per manifest record and a count")
        }
        let count = (payload.count - 4) / entryLength
        var entries: [Entry] = []
        entries.reserveCapacity(count)
        for _ in 0..<count {
            let length = try r.u32("framed length")
            let digest = try r.digest("record digest")
            guard length >= UInt32(RecordFraming.overhead + 9) else { throw r.error("a manifest record of \(length) bytes") }
            entries.append(Entry(framedLength: length, digest: digest))
        }
        let stated = try r.u32("count")
        guard stated == UInt32(count) else { throw r.error("states \(stated) manifest records and lists \(count)") }
        return ManifestIndex(entries: entries)
    }
}
