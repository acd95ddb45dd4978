/// The format 2.0 manifest (`Spec/0001-container-format.md §11`): one byte string, the *body*,
/// split into manifest records (type 12) of at most 4 MiB each before compression (the
/// reference writer cuts them by content, ``segmentPolicy``), each compressed on its own
/// (payload `codec u8 | reserved[3] | rawLength u32 | stored`).
///
/// Body, in order (varints and columns as in ``EntryCodec``):
/// 1. chunk table: `count` varint; per chunk a `form` u8, then for a chunk record (form 0)
///    `id[32]`, the offset's increase over the previous chunk record's (varint), `rawLength`,
///    `storedLength` (varints) and `codec` u8; for a packed chunk (form 1) the pack index's
///    increase over the previous packed chunk's and `rawLength` (varints); its place in the
///    pack's content follows the packed chunks before it in the same pack;
/// 2. pack table: `count` varint; per pack the offset's increase over the previous pack's,
///    `entryCount`, `contentLength` (varints) and `contentDigest[32]`;
/// 3. reference table: `count` varint; per reference the zigzag varint of
///    `chunkIndex − (previous chunkIndex + 1)` (the first against −1);
/// 4. the entries (``EntryCodec``), with for files the authoritative size;
/// 5. per entry a location: 0 and the record offset's increase over the previous entry
///    record's, or 1 and the pack index's increase over the previous packed entry's;
/// 6. per file entry its reference count (varint), the references following on from the
///    previous file's;
/// 7. per file entry with an entry record of its own, its content digest (§8.3).
extension Manifest {
    /// The most raw bytes a manifest record may hold (§11.2).
    package static let segmentLength = 4 * 1024 * 1024
    /// The largest body a reader accepts: 1 GiB at most, and no more than 64 MiB or 256 times
    /// the stored manifest, whichever is larger, so a small forged manifest cannot make a
    /// reader allocate gigabytes (64 MiB covers honest manifests of highly compressible names
    /// and attributes).
    package static let maximumBodyLength = 1 << 30
    package static let bodyAllowance = 64 << 20

    package static func maximumBodyLength(storedLength: UInt64) -> Int {
        let (scaled, overflow) = storedLength.multipliedReportingOverflow(by: 256)
        guard !overflow, scaled < UInt64(maximumBodyLength) else { return maximumBodyLength }
        return max(bodyAllowance, Int(scaled))
    }

    /// The body of the 2.0 manifest.
    package func encodedBody() -> [UInt8] {
        // Roughly the body's length (a packed chunk's row takes a few bytes, a chunk record's
        // about 45, an entry's a few dozen): the buffer is live with the compressor's tables.
        let packedChunks = chunks.count { $0.pack != nil }
        var w = ByteWriter(
            capacity: 48 * (chunks.count - packedChunks) + 6 * packedChunks + 48 * packs.count + 40 * entries.count + 2 * references.count
                + 64)
        w.varint(UInt64(chunks.count))
        var previousOffset: UInt64 = 0
        var previousPack = 0
        for row in chunks {
            if let pack = row.pack {
                w.u8(1)
                w.varint(UInt64(pack - previousPack))
                w.varint(UInt64(row.rawLength))
                previousPack = pack
            } else {
                w.u8(0)
                w.digest(row.id)
                w.varint(row.offset &- previousOffset)
                w.varint(UInt64(row.rawLength))
                w.varint(UInt64(row.storedLength))
                w.u8(row.codec.rawValue)
                previousOffset = row.offset
            }
        }
        w.varint(UInt64(packs.count))
        previousOffset = 0
        for pack in packs {
            w.varint(pack.offset &- previousOffset)
            w.varint(UInt64(pack.entryCount))
            w.varint(UInt64(pack.contentLength))
            w.digest(pack.contentDigest)
            previousOffset = pack.offset
        }
        w.varint(UInt64(references.count))
        var previous: Int64 = -1
        for reference in references {
            w.signedVarint(Int64(reference) - (previous + 1))
            previous = Int64(reference)
        }
        EntryCodec.encode(entries.lazy.map(\.entry), into: &w)
        // Sections 5 to 7 in one pass over the rows (each read of a packed row decodes it).
        var counts = ByteWriter(capacity: 0)
        var digests = ByteWriter(capacity: 0)
        previousOffset = 0
        previousPack = 0
        for row in entries {
            if let pack = row.pack {
                w.u8(1)
                w.varint(UInt64(pack - previousPack))
                previousPack = pack
            } else {
                w.u8(0)
                w.varint(row.recordOffset &- previousOffset)
                previousOffset = row.recordOffset
            }
            guard row.entry.kind == .file else { continue }
            counts.varint(row.referenceCount)
            if row.pack == nil { digests.digest(row.contentDigest) }
        }
        w.bytes.append(contentsOf: counts.bytes)
        w.bytes.append(contentsOf: digests.bytes)
        return w.bytes
    }

    /// Where the reference writer cuts the body into segments (`Spec/0001 §11.2`): FastCDC
    /// (`Spec/0002-chunking.md`) with a 256-byte minimum, 1 KiB average and 8 KiB maximum, so
    /// that a change to the archive changes only the segments around the rows it touches, and a
    /// seeded fetch finds every other manifest record in the previous export (§13.6.1).
    package static let segmentPolicy = ChunkingPolicy.contentDefined(minimum: 256, average: 1024, maximum: 8192)

    /// Frames `body` as manifest records, each segment compressed with `compressor` (stored raw
    /// when that does not make it smaller, §7.3), appended to `out`.
    ///
    /// - Parameter cutByContent: true (format 2.1): cut where ``segmentPolicy`` cuts; false
    ///   (format 2.0's writer): fixed segments of ``segmentLength`` bytes.
    package static func appendRecords(body: [UInt8], compressor: ChunkCompressor, cutByContent: Bool = true, to out: inout [UInt8]) {
        // The published gear table in every archive: the manifest is not file content, and in a
        // keyed archive it is sealed whole with the rest (`Spec/0004-trusted-archives.md §6.7`).
        let chunker = Chunker(policy: segmentPolicy, keying: nil)
        var start = 0
        while start < body.count {
            let length =
                cutByContent
                ? body.withUnsafeBytes { raw in
                    chunker.nextChunkLength(in: UnsafeRawBufferPointer(rebasing: raw[start...]), isFinal: true) ?? (raw.count - start)
                } : min(segmentLength, body.count - start)
            let end = start + max(1, length)
            let recordStart = RecordCodec.beginRecord(.manifest, in: &out)
            let codecOffset = out.count
            out.append(contentsOf: [0, 0, 0, 0])
            withUnsafeBytes(of: UInt32(truncatingIfNeeded: end - start).littleEndian) { out.append(contentsOf: $0) }
            let codec = body.withUnsafeBytes { raw in
                compressor.compress(UnsafeRawBufferPointer(rebasing: raw[start..<end]), appendingTo: &out)
            }
            out[codecOffset] = codec.rawValue
            RecordCodec.endRecord(startingAt: recordStart, in: &out)
            start = end
        }
    }

    /// Decodes one manifest record's payload into its segment of the body.
    ///
    /// - Throws: `.corrupted` for an unknown codec, reserved bytes, an empty or over-long
    ///   segment, or stored bytes that do not decode to exactly `rawLength` bytes.
    package static func decodeSegment(_ payload: [UInt8], offset: UInt64, decompressor: ChunkDecompressor) throws(CairnError) -> [UInt8] {
        var r = ByteReader(payload, baseOffset: offset + UInt64(RecordFraming.headerLength), what: "manifest record")
        let codecByte = try r.u8("codec")
        guard try r.raw(3, "reserved") == [0, 0, 0] else { throw r.error("reserved bytes are not zero") }
        let raw = Int(try r.u32("raw length"))
        guard let codec = ChunkCodec(rawValue: codecByte) else { throw r.error("unknown codec \(codecByte)") }
        guard raw >= 1, raw <= segmentLength else { throw r.error("segment of \(raw) bytes is outside 1 … \(segmentLength)") }
        do throws(CairnError) {
            return try payload.withBytes { (bytes) throws(CairnError) in
                try decompressor.decompress(codec: codec, stored: UnsafeRawBufferPointer(rebasing: bytes[8...]), rawLength: raw)
            }
        } catch {
            throw CairnError(.corrupted, "manifest record: \(error.message)", offset: offset)
        }
    }

    /// Decodes one manifest record's segment and appends it to `body`, within the body limit for
    /// a manifest of `storedLength` stored bytes (``maximumBodyLength(storedLength:)``): the
    /// whole manifest's for the seekable reader, the bytes read so far for the streaming one.
    ///
    /// - Throws: as ``decodeSegment(_:offset:decompressor:)``; `.limitExceeded` past the limit.
    package static func appendSegment(
        _ payload: [UInt8], offset: UInt64, storedLength: UInt64, to body: inout [UInt8], decompressor: ChunkDecompressor
    ) throws(CairnError) {
        let segment = try decodeSegment(payload, offset: offset, decompressor: decompressor)
        let limit = maximumBodyLength(storedLength: storedLength)
        guard body.count + segment.count <= limit else {
            throw CairnError(.limitExceeded, "the manifest decompresses to more than \(limit) bytes", offset: offset)
        }
        body.append(contentsOf: segment)
    }

    /// Decodes a 2.0 manifest body, checking every row (§11.6).
    ///
    /// - Parameter offset: the manifest's offset, for messages.
    /// - Throws: `.corrupted` naming the table and the problem.
    package static func decodeBody(_ body: [UInt8], offset: UInt64) throws(CairnError) -> Manifest {
        var r = ByteReader(body, baseOffset: offset, what: "manifest")
        var m = Manifest()
        let packedRows = try decodeChunkRows(&r, into: &m)
        try decodePackRows(&r, into: &m)
        try placePackedChunks(packedRows, in: &m, reader: r)
        try decodeReferences(&r, into: &m)
        let entries = try EntryCodec.decode(&r)
        // The columns after the entries are read whole, then each row is added once (rewriting
        // rows of the packed ``EntryTable`` field by field would re-encode each several times).
        let (recordOffsets, entryPacks) = try decodeEntryLocations(&r, of: entries, into: &m)
        let referenceCounts = try decodeReferenceCounts(&r, of: entries, packs: entryPacks, references: m.references.count)
        m.entries.reserveCapacity(entries.count)
        var nextReference: UInt64 = 0
        for (index, var entry) in entries.enumerated() {
            var row = EntryRow(
                recordOffset: recordOffsets[index], firstReference: nextReference, referenceCount: 0, contentDigest: .zero,
                entry: entry, pack: entryPacks[index] >= 0 ? entryPacks[index] : nil)
            if entry.kind == .file {
                row.referenceCount = referenceCounts[index]
                entry.chunkCount = Int(referenceCounts[index])
                nextReference += referenceCounts[index]
                if row.pack == nil {
                    let digest = try r.digest("content digest")
                    row.contentDigest = digest
                    entry.contentDigest = digest
                }
                row.entry = entry
            }
            m.entries.append(row)
        }
        m.entries.shrinkToFit()
        guard r.isAtEnd else { throw r.error("\(r.remaining) byte\(r.remaining == 1 ? "" : "s") after the last field") }
        return m
    }

    /// The chunk table (§11.6): stored chunks by id, offset and lengths, packed ones by pack and
    /// raw length (placed once the packs are known).
    ///
    /// - Returns: the indices of the packed chunk rows, in order.
    private static func decodeChunkRows(_ r: inout ByteReader, into m: inout Manifest) throws(CairnError) -> [Int] {
        // Every row takes at least one byte, so counts are bounded by the bytes left.
        let chunkCount = try r.count("chunk count", limit: r.remaining)
        m.chunks.reserveCapacity(chunkCount)
        var previousOffset: UInt64 = 0
        var previousPack = 0
        var packedRows: [Int] = []
        for index in 0..<chunkCount {
            let form = try r.u8("chunk form")
            switch form {
            case 0:
                let id = try r.digest("chunk id")
                let (chunkOffset, overflow) = previousOffset.addingReportingOverflow(try r.varint("chunk offset"))
                guard !overflow, chunkOffset > previousOffset || index == 0 else { throw r.error("chunk offsets do not increase") }
                let raw = try r.varint("raw length", limit: UInt64(FormatLimits.maximumChunkLength))
                let stored = try r.varint("stored length", limit: UInt64(FormatLimits.maximumRecordPayload))
                let codecByte = try r.u8("codec")
                guard let codec = ChunkCodec(rawValue: codecByte) else { throw r.error("unknown codec \(codecByte)") }
                guard raw >= 1 else { throw r.error("chunk raw length 0") }
                guard codec != .none || stored == raw else {
                    throw r.error("uncompressed chunk row stores \(stored) bytes but declares \(raw)")
                }
                m.chunks.append(
                    ChunkRow(id: id, offset: chunkOffset, rawLength: UInt32(raw), storedLength: UInt32(stored), codec: codec))
                previousOffset = chunkOffset
            case 1:
                let pack = previousPack + (try r.count("pack index", limit: Int(UInt32.max)))
                let raw = try r.varint("raw length", limit: UInt64(PackRecordPrefix.maximumSectionLength))
                guard raw >= 1 else { throw r.error("chunk raw length 0") }
                m.chunks.append(ChunkRow(id: .zero, offset: 0, rawLength: UInt32(raw), storedLength: 0, codec: .none, pack: pack))
                packedRows.append(index)
                previousPack = pack
            default:
                throw r.error("unknown chunk form \(form)")
            }
        }
        return packedRows
    }

    /// The pack table (§11.6): offsets increasing, each pack holding at least one entry.
    private static func decodePackRows(_ r: inout ByteReader, into m: inout Manifest) throws(CairnError) {
        let packCount = try r.count("pack count", limit: r.remaining)
        var previousOffset: UInt64 = 0
        for index in 0..<packCount {
            let (packOffset, overflow) = previousOffset.addingReportingOverflow(try r.varint("pack offset"))
            guard !overflow, packOffset > previousOffset || index == 0 else { throw r.error("pack offsets do not increase") }
            let entryCount = try r.count("pack entry count", limit: PackItemTable.maximumItems)
            let length = try r.count("pack content length", limit: PackRecordPrefix.maximumSectionLength)
            let digest = try r.digest("pack content digest")
            guard entryCount >= 1 else { throw r.error("pack \(index) holds no entry") }
            m.packs.append(
                PackRow(offset: packOffset, entryCount: entryCount, contentLength: length, contentDigest: digest, firstEntry: 0))
            previousOffset = packOffset
        }
    }

    /// Places the packed chunks within their packs' content, in order, filling each exactly.
    ///
    /// - Parameter reader: where the pack table ended, for messages.
    private static func placePackedChunks(_ packedRows: [Int], in m: inout Manifest, reader r: ByteReader) throws(CairnError) {
        var filled = [Int](repeating: 0, count: m.packs.count)
        for index in packedRows {
            guard let pack = m.chunks[index].pack, pack < m.packs.count else {
                throw r.error("chunk \(index) lies in pack \(m.chunks[index].pack ?? -1) of \(m.packs.count)")
            }
            m.chunks[index].offset = m.packs[pack].offset
            m.chunks[index].packOffset = filled[pack]
            filled[pack] += Int(m.chunks[index].rawLength)
            guard filled[pack] <= m.packs[pack].contentLength else { throw r.error("the chunks of pack \(pack) overrun its content") }
        }
        for (pack, row) in m.packs.enumerated() where filled[pack] != row.contentLength {
            throw r.error("the chunks of pack \(pack) fill \(filled[pack]) of its \(row.contentLength) content bytes")
        }
    }

    /// The reference table (§11.6): chunk indices, each a signed step from the one before.
    private static func decodeReferences(_ r: inout ByteReader, into m: inout Manifest) throws(CairnError) {
        let referenceCount = try r.count("reference count", limit: r.remaining)
        m.references.reserveCapacity(referenceCount)
        var previous: Int64 = -1
        for _ in 0..<referenceCount {
            let (value, overflow) = (previous + 1).addingReportingOverflow(try r.signedVarint("reference"))
            guard !overflow, value >= 0, value < Int64(m.chunks.count) else {
                throw r.error("a reference names chunk \(value) of \(m.chunks.count)")
            }
            m.references.append(UInt32(truncatingIfNeeded: value))
            previous = value
        }
    }

    /// The entry location column (§11.6): each entry's record offset (increasing), or its pack,
    /// whose entries must be consecutive and as many as its row says; sets each pack's first entry.
    ///
    /// - Returns: each entry's record offset, and its pack (-1 for none).
    private static func decodeEntryLocations(_ r: inout ByteReader, of entries: [ArchiveEntry], into m: inout Manifest)
        throws(CairnError) -> (recordOffsets: [UInt64], packs: [Int])
    {
        var recordOffsets = [UInt64](repeating: 0, count: entries.count)
        var entryPacks = [Int](repeating: -1, count: entries.count)
        var previousOffset: UInt64 = 0
        var previousPack = 0
        var packEntries = [Int](repeating: 0, count: m.packs.count)
        var sawRecord = false
        for index in entries.indices {
            switch try r.u8("entry location") {
            case 0:
                let (recordOffset, overflow) = previousOffset.addingReportingOverflow(try r.varint("entry offset"))
                guard !overflow, recordOffset > previousOffset || !sawRecord else { throw r.error("entry offsets do not increase") }
                recordOffsets[index] = recordOffset
                previousOffset = recordOffset
                sawRecord = true
            case 1:
                let pack = previousPack + (try r.count("pack index", limit: Int(UInt32.max)))
                guard pack < m.packs.count else { throw r.error("entry \(index) lies in pack \(pack) of \(m.packs.count)") }
                if packEntries[pack] == 0 { m.packs[pack].firstEntry = index }
                guard m.packs[pack].firstEntry + packEntries[pack] == index else {
                    throw r.error("the entries of pack \(pack) are not consecutive")
                }
                packEntries[pack] += 1
                entryPacks[index] = pack
                recordOffsets[index] = m.packs[pack].offset
                previousPack = pack
            case let other:
                throw r.error("unknown entry location \(other)")
            }
        }
        for (pack, row) in m.packs.enumerated() where packEntries[pack] != row.entryCount {
            throw r.error("pack \(pack) holds \(row.entryCount) entries, the entry table places \(packEntries[pack]) there")
        }
        return (recordOffsets, entryPacks)
    }

    /// The reference count column (§11.6): each file's count, a packed file's at most 1, all of
    /// them together the reference table's.
    ///
    /// - Parameter packs: each entry's pack (-1 for none).
    private static func decodeReferenceCounts(_ r: inout ByteReader, of entries: [ArchiveEntry], packs entryPacks: [Int], references: Int)
        throws(CairnError) -> [UInt64]
    {
        var referenceCounts = [UInt64](repeating: 0, count: entries.count)
        var nextReference: UInt64 = 0
        for index in entries.indices where entries[index].kind == .file {
            let count = try r.varint("reference count", limit: UInt64(references) - nextReference)
            referenceCounts[index] = count
            nextReference += count
            if entryPacks[index] >= 0 {
                guard count <= 1 else { throw r.error("the packed file \(entries[index].path) has \(count) references") }
            }
        }
        guard nextReference == UInt64(references) else {
            throw r.error("the files use \(nextReference) of \(references) references")
        }
        return referenceCounts
    }
}

extension Manifest {
    /// Appends the 2.0 manifest records (§11) to `out`, compressed as the reference writer
    /// compresses them: with zstd (``Manifest/compression``), or stored raw when
    /// `compressible` is false (the header's `isCompressible`); segments cut by content for 2.1,
    /// of fixed length for 2.0 (`minorVersion` 0).
    package func encode(into out: inout [UInt8], compressible: Bool = true, minorVersion: UInt16 = Prelude.minorVersion) {
        let method = compressible ? Manifest.compression : .none
        Manifest.appendRecords(
            body: encodedBody(), compressor: ChunkCompressor(method: method), cutByContent: Prelude.hasManifestIndex(minor: minorVersion), to: &out)
    }
}

extension Manifest {
    /// Decodes a manifest region: the records from `offset` up to the footer, held in
    /// `region`, as the footer describes them (§11, §12). Checks every record's framing and
    /// CRC-32, then decodes the 1.x tables or the 2.0 body.
    ///
    /// - Returns: the manifest and the SHA-256 of the region (the footer's `manifestDigest`).
    /// - Throws: `.corrupted` for a record that is not a manifest record of `version` or fails
    ///   its checks, `.limitExceeded` for a 2.0 body over its limit.
    package static func decode(region: [UInt8], offset: UInt64, version: FormatVersion) throws(CairnError) -> (Manifest, Digest) {
        var manifest = Manifest()
        var body: [UInt8] = []
        let decompressor = ChunkDecompressor()
        var position = 0
        while position < region.count {
            let at = offset + UInt64(position)
            guard region.count - position >= RecordFraming.overhead else {
                throw CairnError(.truncated, "the manifest ends inside a record", offset: at)
            }
            let header = try region.withBytes { (raw) throws(CairnError) in
                try RecordCodec.parseHeader(UnsafeRawBufferPointer(rebasing: raw[position..<(position + RecordFraming.headerLength)]), offset: at)
            }
            guard header.framedLength <= region.count - position else {
                throw CairnError(.truncated, "a manifest record runs past the manifest", offset: at)
            }
            let end = position + header.framedLength
            try region.withBytes { (raw) throws(CairnError) in
                try RecordCodec.checkCRC(UnsafeRawBufferPointer(rebasing: raw[position..<end]), offset: at)
            }
            let payload = Array(region[(position + RecordFraming.headerLength)..<(end - RecordFraming.trailerLength)])
            guard let type = header.type else {
                throw CairnError(.corrupted, "unknown record type \(header.typeByte) in the manifest", offset: at)
            }
            if version.isVersion1 {
                try manifest.add(type, payload: payload, offset: at)
            } else {
                guard type == .manifest else {
                    throw CairnError(.corrupted, "\(RecordType.withArticle(type.name)) record in the manifest", offset: at)
                }
                try appendSegment(payload, offset: at, storedLength: UInt64(region.count), to: &body, decompressor: decompressor)
            }
            position = end
        }
        if !version.isVersion1, !region.isEmpty { manifest = try decodeBody(body, offset: offset) }
        return (manifest, try SHA256.hash(region))
    }
}
