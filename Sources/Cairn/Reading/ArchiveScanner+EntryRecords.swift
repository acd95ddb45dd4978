extension ArchiveScanner {
    /// The records that define the manifest's entries `indices`, read from `source` and compared
    /// with their rows by the walk's own comparison (``requireAgreement(_:row:index:offset:)``,
    /// ``requirePackAgreement(_:packRow:packIndex:builder:)``): what a reader that cannot walk
    /// every record (a remote archive) checks of each entry it extracts
    /// (`Spec/0001-container-format.md §13.7`).
    ///
    /// For an entry in an entry record: that record (it must be one, pass its CRC, decode, and
    /// give the row's path, kind, mode, owner, mtime, link target, device and extended attributes;
    /// a file's size, reference range and content digest are those of its file-end record, which
    /// is not read: the extractor checks them against the chunks it verifies). For a packed
    /// entry: its pack's record, whose item table gives every row of the pack, the pack row, its
    /// packed chunk rows and its references. Records are fetched together, at most
    /// `batchBytes` at a time.
    ///
    /// - Parameters:
    ///   - limit: where the records end (the manifest's offset).
    ///   - keeping: where the bytes read are kept, for the extraction that decodes the pack and
    ///     chunk records among them next (so each crosses the wire once).
    /// - Throws: `.corrupted` for a record that is not what the manifest says or disagrees with
    ///   it, naming the entry and offset; what reading `source` throws.
    static func checkRecords(
        ofEntries indices: [Int], in manifest: Manifest, version: FormatVersion, source: any ArchiveSource, limit: UInt64,
        batchBytes: UInt64 = 8 << 20, keeping: KeptRecords? = nil
    ) throws(CairnError) {
        let starts = ArchiveReader.recordStarts(of: manifest, end: limit)
        // One record per standalone entry, one per pack (checking all of its rows).
        var seenPacks = Set<Int>()
        var work: [(entry: Int?, pack: Int?, range: Range<UInt64>)] = []
        for index in indices {
            let row = manifest.entries[index]
            if let pack = row.pack {
                guard pack < manifest.packs.count, seenPacks.insert(pack).inserted else { continue }
                let offset = manifest.packs[pack].offset
                work.append((nil, pack, offset..<ArchiveReader.nextRecordStart(after: offset, in: starts, end: limit)))
            } else {
                let offset = row.recordOffset
                guard offset < limit else {
                    throw CairnError(.corrupted, "the manifest places entry \(index) outside the archive body", path: row.entry.path, offset: offset)
                }
                work.append((index, nil, offset..<ArchiveReader.nextRecordStart(after: offset, in: starts, end: limit)))
            }
        }
        let decompressor = ChunkDecompressor()
        var next = 0
        while next < work.count {
            var end = next
            var bytes: UInt64 = 0
            while end < work.count, end == next || bytes + UInt64(work[end].range.count) <= batchBytes {
                bytes += UInt64(work[end].range.count)
                end += 1
            }
            let batch = work[next..<end]
            // The requests themselves (neighbours merged as a remote source merges them), so what
            // lies between the records is kept too: a small file's chunk records, say.
            let requests = RangeCoalescer.coalesce(
                batch.map(\.range), gap: HTTPArchiveSource.coalescingGap, maximum: HTTPArchiveSource.maximumRange)
            let fetched = try PrefetchedArchiveBytes(source, fetching: requests)
            if let keeping {
                for request in requests { keeping.keep(try fetched.bytes(of: request), of: request) }
            }
            for item in batch {
                if let index = item.entry {
                    try checkEntryRecord(index, in: manifest, version: version, source: fetched, limit: limit)
                } else if let pack = item.pack {
                    try checkPackRecord(pack, in: manifest, source: fetched, limit: limit, using: decompressor)
                }
            }
            next = end
        }
    }

    private static func checkEntryRecord(
        _ index: Int, in manifest: Manifest, version: FormatVersion, source: any ArchiveSource, limit: UInt64
    ) throws(CairnError) {
        let manifestRow = manifest.entries[index]
        let offset = manifestRow.recordOffset
        let (record, _) = try source.readRecord(at: offset, fileSize: limit)
        guard record.type == .entry else {
            throw CairnError(
                .corrupted, "the record the manifest names as entry \(index)'s is not an entry record", path: manifestRow.entry.path,
                offset: offset)
        }
        let entry = try decodeEntryRecord(record.payload, offset: offset, version: version)
        var row = self.row(ofEntryRecord: entry, at: offset, firstReference: manifestRow.firstReference)
        if entry.kind == .file {
            // What the file end gives; the extractor checks these against the verified chunks.
            row.referenceCount = manifestRow.referenceCount
            row.contentDigest = manifestRow.contentDigest
            row.entry.size = manifestRow.entry.size
            row.entry.contentDigest = manifestRow.entry.contentDigest
            row.entry.chunkCount = manifestRow.entry.chunkCount
        }
        try requireAgreement(manifest, row: row, index: index, offset: offset)
    }

    private static func checkPackRecord(
        _ packIndex: Int, in manifest: Manifest, source: any ArchiveSource, limit: UInt64, using decompressor: ChunkDecompressor
    ) throws(CairnError) {
        let packRow = manifest.packs[packIndex]
        let offset = packRow.offset
        let (record, _) = try source.readRecord(at: offset, fileSize: limit)
        guard record.type == .pack else {
            throw CairnError(.corrupted, "the record the manifest names as a pack is not one", offset: offset)
        }
        // The chunks before the pack: chunk rows are in archive order.
        var low = 0
        var high = manifest.chunks.count
        while low < high {
            let middle = (low + high) / 2
            if manifest.chunks[middle].offset < offset { low = middle + 1 } else { high = middle }
        }
        let firstChunk = low
        let pack = try PackContent.read(
            payload: record.payload, offset: offset, chunkCount: UInt64(firstChunk), contentIDs: nil, using: decompressor)
        guard packRow.firstEntry <= manifest.entries.count else {
            throw CairnError(.corrupted, "the manifest's rows for pack \(packIndex) disagree with its record", offset: offset)
        }
        let firstReference = packRow.firstEntry < manifest.entries.count
            ? Int(clamping: manifest.entries[packRow.firstEntry].firstReference) : manifest.references.count
        var builder = PackRowBuilder(packIndex: packIndex, offset: offset, firstReference: firstReference, firstChunk: firstChunk)
        // The entry rules were applied to the manifest's rows, which must equal these.
        for (position, item) in pack.items.enumerated() {
            let (row, _, _) = try builder.add(item) { (k) throws(CairnError) in
                guard k < manifest.chunks.count else {
                    throw CairnError(.corrupted, "the manifest has no row for chunk \(k)", offset: offset)
                }
                return manifest.chunks[k].rawLength
            }
            try requireAgreement(manifest, row: row, index: packRow.firstEntry + position, offset: offset)
        }
        let decodedRow = Manifest.PackRow(
            offset: offset, entryCount: pack.items.count, contentLength: pack.prefix.contentRawLength,
            contentDigest: pack.prefix.contentDigest, firstEntry: packRow.firstEntry)
        try requirePackAgreement(manifest, packRow: decodedRow, packIndex: packIndex, builder: builder)
    }
}
