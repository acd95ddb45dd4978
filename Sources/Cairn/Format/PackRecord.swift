/// A pack record (type 11, format 2.0, `Spec/0001-container-format.md §7.5`): a run of complete
/// small items, their entries in one compressed item table and the content of their small files
/// in one compressed content section, so that many small files cost a few bytes each instead of
/// a record set each, and compress together as `tar | lz4` does.
///
/// Payload: a 48-byte prefix
/// `tableCodec u8 | contentCodec u8 | reserved[2] | tableRawLength u32 | tableStoredLength u32 |
/// contentRawLength u32 | contentDigest[32]`, then the stored item table, then the stored content
/// (the rest of the payload). Each section is stored as its codec says (§7.2) and follows the
/// stored-raw rule (§7.3); an empty content section is stored as zero bytes with codec 0.
///
/// Each small file's content is one chunk: either *inline* (the next `size` bytes of the
/// content section, a new chunk whose id is their SHA-256) or the same bytes as an earlier chunk
/// of the archive, named by its chunk index. `contentDigest` is SHA-256 over the ids of the
/// inline chunks in order (SHA-256 of no bytes for none), so a reader checks every chunk it
/// takes from the pack, and the writer, which hashes each chunk for deduplication anyway,
/// computes it without reading the content again.
package struct PackRecordPrefix: Sendable, Equatable {
    package static let length = 48
    /// The largest item table and content section, uncompressed: 8 MiB each.
    package static let maximumSectionLength = FormatLimits.maximumChunkLength

    package var tableCodec: ChunkCodec
    package var contentCodec: ChunkCodec
    package var tableRawLength: Int
    package var tableStoredLength: Int
    package var contentRawLength: Int
    package var contentDigest: Digest

    package func encode(into out: inout [UInt8]) {
        var w = ByteWriter(capacity: Self.length)
        w.u8(tableCodec.rawValue)
        w.u8(contentCodec.rawValue)
        w.zeros(2)
        w.u32(UInt32(truncatingIfNeeded: tableRawLength))
        w.u32(UInt32(truncatingIfNeeded: tableStoredLength))
        w.u32(UInt32(truncatingIfNeeded: contentRawLength))
        w.digest(contentDigest)
        out.append(contentsOf: w.bytes)
    }

    /// Decodes and checks the prefix of a pack payload of `payloadLength` bytes.
    ///
    /// - Throws: `.corrupted` for an unknown codec, non-zero reserved bytes, a section over
    ///   8 MiB, an empty item table, a table that does not fit the payload, or a section stored
    ///   with codec 0 whose stored length differs from its raw length.
    package static func decode(_ r: inout ByteReader, payloadLength: Int) throws(CairnError) -> PackRecordPrefix {
        let tableByte = try r.u8("item table codec")
        let contentByte = try r.u8("content codec")
        guard try r.raw(2, "reserved") == [0, 0] else { throw r.error("reserved bytes are not zero") }
        let tableRaw = Int(try r.u32("item table raw length"))
        let tableStored = Int(try r.u32("item table stored length"))
        let contentRaw = Int(try r.u32("content raw length"))
        let digest = try r.digest("content digest")
        guard let tableCodec = ChunkCodec(rawValue: tableByte) else { throw r.error("unknown item table codec \(tableByte)") }
        guard let contentCodec = ChunkCodec(rawValue: contentByte) else { throw r.error("unknown content codec \(contentByte)") }
        guard tableRaw >= 1, tableRaw <= maximumSectionLength, contentRaw <= maximumSectionLength else {
            throw r.error("section lengths \(tableRaw) and \(contentRaw) are outside the limits (1 and 0 … \(maximumSectionLength))")
        }
        guard tableStored <= payloadLength - length else {
            throw r.error("item table of \(tableStored) stored bytes runs past the record")
        }
        let contentStored = payloadLength - length - tableStored
        guard tableCodec != .none || tableStored == tableRaw else {
            throw r.error("uncompressed item table stores \(tableStored) bytes but declares \(tableRaw)")
        }
        guard contentCodec != .none || contentStored == contentRaw else {
            throw r.error("uncompressed content stores \(contentStored) bytes but declares \(contentRaw)")
        }
        guard contentRaw > 0 || (contentStored == 0 && contentCodec == .none) else {
            throw r.error("an empty content section must be stored as no bytes with codec 0")
        }
        return PackRecordPrefix(
            tableCodec: tableCodec, contentCodec: contentCodec, tableRawLength: tableRaw, tableStoredLength: tableStored,
            contentRawLength: contentRaw, contentDigest: digest)
    }

    /// Bytes of the stored content section in a payload of `payloadLength` bytes.
    package func contentStoredLength(payloadLength: Int) -> Int { payloadLength - Self.length - tableStoredLength }
}

/// One item of a pack's item table.
package struct PackItem: Sendable, Equatable {
    /// Where a packed file's content is.
    package enum Content: Sendable, Equatable {
        /// No content: not a file, or an empty file.
        case none
        /// The next `entry.size` bytes of the pack's content section: a new chunk.
        case inline
        /// The same bytes as the earlier chunk with this chunk index (§8.5).
        case chunk(UInt64)
    }

    package var entry: ArchiveEntry
    package var content: Content

    package init(entry: ArchiveEntry, content: Content) {
        self.entry = entry
        self.content = content
    }
}

/// The item table of a pack (§7.5): the entries in ``EntryCodec``'s encoding, then for each
/// file entry one `content` varint: 0 for inline (or nothing, for an empty file), k ≥ 1 for
/// "the same bytes as chunk k − 1".
package enum PackItemTable {
    /// The most items in one pack.
    package static let maximumItems = 65_536

    package static func encode(_ items: [PackItem]) -> [UInt8] {
        var w = ByteWriter(capacity: 64 * items.count + 16)
        EntryCodec.encode(items.lazy.map(\.entry), into: &w)
        for item in items where item.entry.kind == .file {
            switch item.content {
            case .none, .inline: w.varint(0)
            case .chunk(let index): w.varint(index &+ 1)
            }
        }
        return w.bytes
    }

    /// Decodes a table; `chunkCount` is the number of chunks before the pack (a content
    /// reference must name one of them or an inline chunk earlier in this pack).
    ///
    /// - Parameter packOffset: the pack record's archive offset, which every error names
    ///   (`Spec/0001-container-format.md §7.5.2`): the table is decompressed, so a position
    ///   inside it is no place in the archive.
    /// - Throws: `.corrupted` at `packOffset` for an empty table, a bad entry list, a reference to
    ///   a chunk not before it, a reference for an empty file, or bytes after the last field.
    package static func decode(_ bytes: [UInt8], packOffset: UInt64, chunkCount: UInt64) throws(CairnError) -> [PackItem] {
        do throws(CairnError) {
            return try decodeItems(bytes, chunkCount: chunkCount)
        } catch {
            var atPack = error
            atPack.offset = packOffset
            throw atPack
        }
    }

    private static func decodeItems(_ bytes: [UInt8], chunkCount: UInt64) throws(CairnError) -> [PackItem] {
        var r = ByteReader(bytes, baseOffset: 0, what: "pack item table")
        let entries = try EntryCodec.decode(&r, maximumCount: maximumItems)
        guard !entries.isEmpty else { throw r.error("a pack holds no item") }
        var items: [PackItem] = []
        items.reserveCapacity(entries.count)
        var chunks = chunkCount
        for entry in entries {
            guard entry.kind == .file else {
                items.append(PackItem(entry: entry, content: .none))
                continue
            }
            let value = try r.varint("content")
            // A packed file is one chunk, inline in a section of at most 8 MiB or a chunk of at
            // most 8 MiB: a larger size is a lie, refused before any arithmetic on it.
            guard entry.size <= UInt64(PackRecordPrefix.maximumSectionLength) else {
                throw r.error("the packed file \(entry.path) declares \(entry.size) bytes, more than a pack can hold")
            }
            if value == 0 {
                items.append(PackItem(entry: entry, content: entry.size == 0 ? .none : .inline))
                if entry.size > 0 { chunks += 1 }
            } else {
                guard entry.size > 0 else { throw r.error("the empty file \(entry.path) names a chunk") }
                guard value - 1 < chunks else {
                    throw r.error("\(entry.path) names chunk \(value - 1), but only \(chunks) come before it")
                }
                items.append(PackItem(entry: entry, content: .chunk(value - 1)))
            }
        }
        guard r.isAtEnd else { throw r.error("\(r.remaining) byte\(r.remaining == 1 ? "" : "s") after the last field") }
        return items
    }
}

/// Reading a pack record (§7.5), the same way for every reader: the streaming checker, the
/// seekable walk (which skipped the content) and the seekable extractor.
package enum PackContent {
    /// A pack record read back.
    package struct Decoded {
        package var prefix: PackRecordPrefix
        package var items: [PackItem]
        /// The decompressed content section, checked against the content digest; nil when the
        /// caller skipped the stored content.
        package var content: [UInt8]?
        /// The ids of the inline chunks, in order (empty when the content was skipped).
        package var inlineIDs: [Digest]
    }

    /// SHA-256 over the concatenated ids (§7.5.3): a pack's content digest (and the content
    /// digest of a file, §8.3, over its chunk ids).
    package static func digest(ofIDs ids: [Digest]) throws(CairnError) -> Digest {
        var joined: [UInt8] = []
        joined.reserveCapacity(32 * ids.count)
        for id in ids { id.append(to: &joined) }
        return try SHA256.hash(joined)
    }

    /// The ids of the inline chunks of `content` (their lengths in order), each by the archive's
    /// id rule `ids`, after checking that SHA-256 over them is `expected`.
    ///
    /// - Throws: `.corrupted` when the lengths do not fill the content; `.checksumMismatch` at
    ///   `offset` when the digest differs.
    package static func inlineIDs(
        of content: [UInt8], lengths: [Int], ids chunkIDs: ChunkIDFunction, expected: Digest, offset: UInt64
    ) throws(CairnError) -> [Digest]
    {
        guard lengths.reduce(0, +) == content.count else {
            throw CairnError(.corrupted, "the pack's inline files do not fill its content", offset: offset)
        }
        var ids: [Digest] = []
        ids.reserveCapacity(lengths.count)
        var position = 0
        try content.withBytes { (raw) throws(CairnError) in
            for length in lengths {
                ids.append(try chunkIDs.id(of: UnsafeRawBufferPointer(rebasing: raw[position..<(position + length)])))
                position += length
            }
        }
        guard try digest(ofIDs: ids) == expected else {
            throw CairnError(.checksumMismatch, "the pack's content does not match its content digest", offset: offset)
        }
        return ids
    }

    /// Decodes one stored section of a pack payload.
    package static func section(
        _ payload: [UInt8], _ range: Range<Int>, codec: ChunkCodec, rawLength: Int, what: String,
        using decompressor: ChunkDecompressor, offset: UInt64
    ) throws(CairnError) -> [UInt8] {
        guard rawLength > 0 else { return [] }
        do throws(CairnError) {
            return try payload.withBytes { (raw) throws(CairnError) in
                try decompressor.decompress(codec: codec, stored: UnsafeRawBufferPointer(rebasing: raw[range]), rawLength: rawLength)
            }
        } catch {
            throw CairnError(.corrupted, "pack record's \(what): \(error.message)", offset: offset)
        }
    }

    /// Reads a pack record's payload: the prefix, the item table and, when given the archive's
    /// chunk id rule, the content, checking everything §7.5 says a reader checks.
    ///
    /// - Parameters:
    ///   - payload: the payload, or only its prefix and stored item table when the content was
    ///     skipped (`payloadLength` is then the whole payload's length).
    ///   - chunkCount: chunks before the pack, for checking its references.
    ///   - contentIDs: the archive's chunk id rule, by which the content's inline chunks' ids are
    ///     computed and checked; nil: the content is not read.
    /// - Throws: `.truncated` when the item table runs past `payload`; `.corrupted` for a bad
    ///   prefix, table or section, or inline sizes that do not total the content;
    ///   `.checksumMismatch` when the content does not match its digest.
    package static func read(
        payload: [UInt8], payloadLength: Int? = nil, offset: UInt64, chunkCount: UInt64, contentIDs: ChunkIDFunction?,
        using decompressor: ChunkDecompressor
    ) throws(CairnError) -> Decoded {
        var r = ByteReader(payload, baseOffset: offset + UInt64(RecordFraming.headerLength), what: "pack record")
        let prefix = try PackRecordPrefix.decode(&r, payloadLength: payloadLength ?? payload.count)
        let tableEnd = PackRecordPrefix.length + prefix.tableStoredLength
        guard payload.count >= tableEnd else {
            throw CairnError(.truncated, "the pack record's item table runs past its end", offset: offset)
        }
        let table = try section(
            payload, PackRecordPrefix.length..<tableEnd, codec: prefix.tableCodec, rawLength: prefix.tableRawLength,
            what: "item table", using: decompressor, offset: offset)
        let items = try PackItemTable.decode(table, packOffset: offset, chunkCount: chunkCount)
        // Sizes are at most 8 MiB each (``PackItemTable/decode``), so the sum cannot overflow.
        let lengths = items.compactMap { $0.content == .inline ? Int($0.entry.size) : nil }
        let inlineTotal = lengths.reduce(0, +)
        guard inlineTotal == prefix.contentRawLength else {
            throw CairnError(
                .corrupted, "the pack's inline files hold \(inlineTotal) bytes, its content section \(prefix.contentRawLength)",
                offset: offset)
        }
        guard let contentIDs else { return Decoded(prefix: prefix, items: items, content: nil, inlineIDs: []) }
        let content = try section(
            payload, tableEnd..<payload.count, codec: prefix.contentCodec, rawLength: prefix.contentRawLength, what: "content",
            using: decompressor, offset: offset)
        let ids = try inlineIDs(of: content, lengths: lengths, ids: contentIDs, expected: prefix.contentDigest, offset: offset)
        return Decoded(prefix: prefix, items: items, content: content, inlineIDs: ids)
    }
}
