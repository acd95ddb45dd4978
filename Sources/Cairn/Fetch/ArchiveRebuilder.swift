/// Rebuilds a remote archive from local seeds by running the reference writer over the remote
/// manifest's items (`Spec/0001-container-format.md §13.6`, "Rebuilding by writing").
///
/// The reference writer is deterministic (§9): the same items, chunks and header give the same
/// bytes. The manifest holds every item in order, every file's chunk ids and sizes, and every
/// pack's entries and content digest; a seed holds most chunk records and pack contents. So an
/// ``ArchiveWriter`` given the remote's header, each entry, each chunk record (copied from a
/// seed, or downloaded when no seed has it) and each pack's content (a seed's stored content
/// section, or the downloaded pack) writes every other record itself: entry records,
/// chunk-references and file-end records, packs' item tables, and every commit record with its
/// counts and chain digest. Only the prelude and header, the chunk records and packs no seed
/// has, and the manifest and footer are downloaded.
///
/// Every step is checked against the manifest as it goes (each record starts where its row
/// says, each file's content digest is its row's, a downloaded pack comes out byte for byte);
/// a difference is an error whose message starts with ``divergedMessage``, and the fetch then
/// plans copies and downloads instead (``DeltaPlan``). What the writer made is trusted for
/// nothing: the result is verified as a stream like any fetched bytes, and the footer's chain
/// digest, which the remote wrote, covers every byte before the manifest (§12.2). A rebuild that
/// does not verify is likewise replaced by the plan of copies and downloads.
package final class ArchiveRebuilder {
    /// The start of the message of the error a rebuild throws when its bytes would differ from
    /// what the remote manifest describes.
    package static let divergedMessage = "the archive rebuilt from seeds would differ from the remote one"

    /// What a rebuild downloads and copies, decided before it starts.
    package struct Plan: Sendable {
        /// Ranges of the remote archive to download, in order (each whole records: chunk records
        /// and packs no seed has; neighbours less than ``mergeBelow`` apart are one request).
        package var downloads: [Range<UInt64>]
        /// Bytes of chunk records and pack contents to copy from seeds.
        package var seedBytes: UInt64

        /// Bytes ``downloads`` asks for.
        package var downloadBytes: UInt64 { downloads.reduce(0) { $0 + ($1.upperBound - $1.lowerBound) } }

        /// Two downloads at most this many bytes apart are one request (the bytes between, a few
        /// commit or chunk-references records, are downloaded and dropped; ``RangeCoalescer``).
        package static let mergeBelow: UInt64 = 1024
        /// The longest merged request, in bytes (a single longer record is one request).
        package static let longestRequest: UInt64 = 8 << 20

        /// Plans the rebuild of `remote` from `seeds`, or nil when a rebuild does not apply: an
        /// archive of a version this writer cannot write (it writes 2.0 and 2.1), a remote seed
        /// (copies from it would be one request per chunk), or an archive without items.
        package init?(remote: RemoteManifest, seeds: SeedIndex) {
            guard remote.version.major == Prelude.majorVersion, remote.version.minor <= Prelude.minorVersion,
                !seeds.seeds.isEmpty, seeds.seeds.allSatisfy({ $0.remote == nil }), !remote.manifest.entries.isEmpty
            else { return nil }
            let manifest = remote.manifest
            var wanted: [Range<UInt64>] = []
            var copied: UInt64 = 0
            for chunk in manifest.chunks where chunk.pack == nil {
                let framed = UInt64(RecordFraming.overhead + ChunkRecordPrefix.length) + UInt64(chunk.storedLength)
                if seeds.chunk(id: chunk.id, codec: chunk.codec, framedLength: Int(framed)) != nil {
                    copied += framed
                } else {
                    wanted.append(chunk.offset..<(chunk.offset + framed))
                }
            }
            let starts = KnownStarts(
                manifest, manifestOffset: remote.footer.manifestOffset, manifestIndexLength: remote.manifestIndexLength)
            for (packIndex, pack) in manifest.packs.enumerated() {
                if let found = seeds.packs(contentDigest: pack.contentDigest, contentLength: pack.contentLength).first {
                    copied += UInt64(found.contentStoredLength)
                    continue
                }
                if ArchiveRebuilder.inlineFiles(of: packIndex, in: manifest, seeds: seeds) != nil {
                    copied += UInt64(pack.contentLength)
                    continue
                }
                // A pack is followed by its commit (§10.2), then the next known record.
                guard let end = starts.next(after: pack.offset), end > pack.offset + UInt64(CommitRecord.framedLength) else { return nil }
                wanted.append(pack.offset..<(end - UInt64(CommitRecord.framedLength)))
            }
            downloads = RangeCoalescer.coalesce(wanted, gap: Self.mergeBelow, maximum: Self.longestRequest)
            seedBytes = copied
        }
    }

    private let remote: RemoteManifest
    private let url: String
    private let seeds: SeedIndex
    private lazy var knownStarts = KnownStarts(
        remote.manifest, manifestOffset: remote.footer.manifestOffset, manifestIndexLength: remote.manifestIndexLength)
    private var downloads: DownloadQueue
    private let deliver: (UnsafeRawBufferPointer) throws(CairnError) -> Void
    private let decompressor = ChunkDecompressor()
    /// The remote's header (set by ``startWriter()``).
    private var header = ArchiveHeader()
    /// Bytes copied from seeds so far.
    package private(set) var seedBytes: UInt64 = 0

    /// - Parameters:
    ///   - remote: the remote archive's head, footer and manifest.
    ///   - url: the archive's URL, for messages.
    ///   - plan: what to download (``Plan``).
    ///   - seeds: the local seeds the plan was made from.
    ///   - download: downloads one range of the remote archive (a range request with its
    ///     validator, answered exactly).
    ///   - deliver: takes the rebuilt bytes, in order, from offset 0.
    package init(
        remote: RemoteManifest, url: String, plan: Plan, seeds: SeedIndex,
        download: @escaping (Range<UInt64>) throws(CairnError) -> [UInt8],
        deliver: @escaping (UnsafeRawBufferPointer) throws(CairnError) -> Void
    ) {
        self.remote = remote
        self.url = url
        self.seeds = seeds
        self.downloads = DownloadQueue(ranges: plan.downloads, download: download)
        self.deliver = deliver
    }

    /// Writes the archive from offset 0 up to its manifest through `deliver`.
    ///
    /// - Throws: `.corrupted` whose message starts with ``divergedMessage`` (naming the offset and
    ///   what differed) when the writer's bytes would not be those the manifest describes;
    ///   what downloading and reading seeds throw (`.network`, `.httpStatus`, `.sourceChanged`,
    ///   `.io`).
    package func run() throws(CairnError) {
        let manifest = remote.manifest
        let writer = try startWriter()
        var ids = [Digest](repeating: .zero, count: manifest.chunks.count)
        var inlineChunks = [[Int]](repeating: [], count: manifest.packs.count)
        for (index, chunk) in manifest.chunks.enumerated() {
            if let pack = chunk.pack {
                guard pack < inlineChunks.count else { throw diverged(at: chunk.offset, "chunk \(index) lies in no pack") }
                inlineChunks[pack].append(index)
            } else {
                ids[index] = chunk.id
            }
        }
        var entry = 0
        while entry < manifest.entries.count {
            let row = manifest.entries[entry]
            if let pack = row.pack {
                guard pack < manifest.packs.count, manifest.packs[pack].firstEntry == entry else {
                    throw diverged(at: row.recordOffset, "entry \(entry) does not begin its pack")
                }
                try appendPack(pack, to: writer, ids: &ids, inline: inlineChunks[pack])
                entry += manifest.packs[pack].entryCount
            } else {
                try appendEntry(entry, row, to: writer)
                entry += 1
            }
            if writer.pendingOutputCount >= 1 << 20 { try take(writer) }
        }
        // Format 2.1: the remote's manifest index goes before the final commit (§11.8), which is
        // then written again over it.
        if let index = remote.manifestIndex {
            guard try writer.insertBeforeLastCommit(index) else {
                throw diverged(at: writer.offset, "the manifest index has no final commit to go before")
            }
        }
        guard writer.offset == remote.footer.manifestOffset else {
            throw diverged(at: writer.offset, "the records end at \(writer.offset), the manifest starts at \(remote.footer.manifestOffset)")
        }
        let bytes = writer.takeOutput(holdingLastCommit: false)
        try bytes.withBytes { (raw) throws(CairnError) in try deliver(raw) }
    }

    /// A writer with the remote's header, whose prelude and header record must be the remote's
    /// bytes (a header this writer would encode otherwise is not rebuilt).
    private func startWriter() throws(CairnError) -> ArchiveWriter {
        let head = remote.head
        guard head.count > Prelude.length + RecordFraming.overhead else { throw diverged(at: 0, "no header record") }
        let payload = Array(head[(Prelude.length + RecordFraming.headerLength)..<(head.count - RecordFraming.trailerLength)])
        header = try ArchiveHeader.decode(payload, offset: UInt64(Prelude.length + RecordFraming.headerLength))
        let writer = try ArchiveWriter(header: header, minorVersion: remote.version.minor)
        let written = writer.takeOutput()
        guard written.count > head.count, written[0..<head.count].elementsEqual(head) else {
            throw diverged(at: UInt64(Prelude.length), "the header record would be written differently")
        }
        try written.withBytes { (raw) throws(CairnError) in try deliver(raw) }
        return writer
    }

    /// An entry record and, for a file, its chunks, references and file end.
    private func appendEntry(_ index: Int, _ row: Manifest.EntryRow, to writer: ArchiveWriter) throws(CairnError) {
        let manifest = remote.manifest
        guard writer.offset == row.recordOffset else {
            throw diverged(at: writer.offset, "entry \(index) would start at \(writer.offset), its row says \(row.recordOffset)")
        }
        try writer.beginEntry(try declared(row))
        guard row.entry.kind == .file else { return }
        let first = Int(clamping: row.firstReference)
        let count = Int(clamping: row.referenceCount)
        guard first <= manifest.references.count, count <= manifest.references.count - first else {
            throw diverged(at: row.recordOffset, "entry \(index) names references past the table")
        }
        for reference in manifest.references[first..<(first + count)] {
            let chunkIndex = Int(reference)
            guard chunkIndex < manifest.chunks.count, manifest.chunks[chunkIndex].pack == nil else {
                throw diverged(at: writer.offset, "entry \(index) names chunk \(chunkIndex), which is not a chunk record")
            }
            let chunk = manifest.chunks[chunkIndex]
            if writer.contains(chunk.id) {
                try writer.appendChunk(id: chunk.id, rawLength: Int(chunk.rawLength), codec: chunk.codec, stored: nil)
                continue
            }
            guard writer.offset == chunk.offset else {
                throw diverged(at: writer.offset, "chunk \(chunkIndex) would start at \(writer.offset), its row says \(chunk.offset)")
            }
            let record = try chunkRecord(chunk)
            let digest = try SHA256.hash(record)
            try record.withBytes { (raw) throws(CairnError) in
                try writer.appendChunkRecord(
                    id: chunk.id, rawLength: Int(chunk.rawLength), codec: chunk.codec, record: raw, storedLength: Int(chunk.storedLength),
                    recordDigest: digest)
            }
            if writer.pendingOutputCount >= 4 << 20 { try take(writer) }
        }
        let digest = try writer.endFile()
        guard digest == row.contentDigest else {
            throw diverged(at: row.recordOffset, "entry \(index)'s chunks give another content digest than its row")
        }
    }

    /// The entry as its entry record holds it. A file's record declares the size expected when
    /// the entry began (`Spec/0001 §6.4`), the manifest the size read: the same unless the file
    /// changed while it was read, or came from a stream (declared 0). When the record is
    /// followed by a chunk record the manifest places, the record's length is known, and a
    /// declared size of 0 is taken if the read size does not give that length. When both give it
    /// (sizes under 128 encode in one byte, as 0 does), the entry record is downloaded (a few
    /// dozen bytes) and its declared size taken, if it is one of the two.
    private func declared(_ row: Manifest.EntryRow) throws(CairnError) -> ArchiveEntry {
        guard row.entry.kind == .file, row.entry.size > 0 else { return row.entry }
        let manifest = remote.manifest
        guard let next = knownStarts.next(after: row.recordOffset), row.referenceCount > 0, row.firstReference < UInt64(manifest.references.count) else { return row.entry }
        let first = Int(manifest.references[Int(row.firstReference)])
        guard first < manifest.chunks.count, manifest.chunks[first].pack == nil, manifest.chunks[first].offset == next else {
            return row.entry
        }
        let length = next - row.recordOffset
        func framed(_ entry: ArchiveEntry) -> UInt64 { UInt64(RecordFraming.overhead + EntryCodec.encode(entry).count) }
        var streamed = row.entry
        streamed.size = 0
        guard framed(streamed) == length else { return row.entry }
        guard framed(row.entry) == length else { return streamed }
        let record = try downloads.bytes(row.recordOffset..<next)
        guard SeedIndex.isWholeRecord(record, offset: row.recordOffset) else { return row.entry }
        var r = ByteReader(
            Array(record[RecordFraming.headerLength..<(record.count - RecordFraming.trailerLength)]),
            baseOffset: row.recordOffset + UInt64(RecordFraming.headerLength), what: "entry record")
        guard let entry = try? EntryCodec.decodeRecord(&r), entry.size == 0 else { return row.entry }
        return streamed
    }

    /// Seed chunk records that failed their framing or CRC-32 when read, and were downloaded.
    private(set) var damagedSeedRecords = 0

    /// A chunk record's bytes: from a seed, when they are that record intact there, or downloaded.
    private func chunkRecord(_ chunk: Manifest.ChunkRow) throws(CairnError) -> [UInt8] {
        let framed = RecordFraming.overhead + ChunkRecordPrefix.length + Int(chunk.storedLength)
        if let found = seeds.chunk(id: chunk.id, codec: chunk.codec, framedLength: framed) {
            if let bytes = try seeds.checkedRecord(seed: found.seed, at: found.offset, framedLength: framed) {
                seedBytes += UInt64(framed)
                return bytes
            }
            damagedSeedRecords += 1
        }
        return try downloads.bytes(chunk.offset..<(chunk.offset + UInt64(framed)))
    }

    /// A pack and its commit: the items from the manifest's rows, the content from a seed's pack
    /// with the same content digest, or from the downloaded pack (which must come out the same).
    private func appendPack(_ index: Int, to writer: ArchiveWriter, ids: inout [Digest], inline: [Int]) throws(CairnError) {
        let manifest = remote.manifest
        let pack = manifest.packs[index]
        guard writer.offset == pack.offset else {
            throw diverged(at: writer.offset, "pack \(index) would start at \(writer.offset), its row says \(pack.offset)")
        }
        // The content section as stored, its codec, and the content.
        var stored: [UInt8] = []
        var codec = ChunkCodec.none
        var content: [UInt8]?
        var downloaded: [UInt8]?
        if let found = seeds.packs(contentDigest: pack.contentDigest, contentLength: pack.contentLength).first,
            let record = try seeds.checkedRecord(seed: found.seed, at: found.offset, framedLength: found.framedLength)
        {
            stored = Array(record[found.contentStart..<(found.framedLength - RecordFraming.trailerLength)])
            codec = found.prefix.contentCodec
            seedBytes += UInt64(stored.count)
        } else if let files = Self.inlineFiles(of: index, in: manifest, seeds: seeds), let raw = try? contentOf(files),
            (try? PackContent.inlineIDs(
                of: raw, lengths: files.map(\.length), ids: remote.idFunction, expected: pack.contentDigest, offset: pack.offset)) != nil
        {
            // Its files are in the seeds' other packs (an item left or joined the pack): the
            // content compressed as the writer compresses it (`PackContentBuilder`).
            let built = try PackContentBuilder.build(raw: raw, inlineIDs: [], compression: header.compression)
            (stored, codec, content) = (built.stored, built.codec, raw)
            seedBytes += UInt64(raw.count)
        } else {
            guard let next = knownStarts.next(after: pack.offset), next > pack.offset + UInt64(CommitRecord.framedLength) else {
                throw diverged(at: pack.offset, "where pack \(index) ends is not known")
            }
            let record = try downloads.bytes(pack.offset..<(next - UInt64(CommitRecord.framedLength)))
            guard record.count > RecordFraming.overhead + PackRecordPrefix.length else {
                throw diverged(at: pack.offset, "the downloaded pack \(index) is too short")
            }
            var r = ByteReader(
                Array(record[RecordFraming.headerLength..<(RecordFraming.headerLength + PackRecordPrefix.length)]),
                baseOffset: pack.offset + UInt64(RecordFraming.headerLength), what: "pack record")
            let prefix = try PackRecordPrefix.decode(&r, payloadLength: record.count - RecordFraming.overhead)
            let contentStart = RecordFraming.headerLength + PackRecordPrefix.length + prefix.tableStoredLength
            guard contentStart <= record.count - RecordFraming.trailerLength else {
                throw diverged(at: pack.offset, "the downloaded pack \(index)'s item table runs past it")
            }
            stored = Array(record[contentStart..<(record.count - RecordFraming.trailerLength)])
            codec = prefix.contentCodec
            downloaded = record
        }
        if content == nil {
            do throws(CairnError) {
                content =
                    pack.contentLength == 0
                    ? []
                    : try stored.withBytes { (raw) throws(CairnError) in
                        try decompressor.decompress(codec: codec, stored: raw, rawLength: pack.contentLength)
                    }
            } catch {
                throw diverged(at: pack.offset, "pack \(index)'s content does not decode: \(error.message)")
            }
        }
        let lengths = inline.map { Int(manifest.chunks[$0].rawLength) }
        let inlineIDs: [Digest]
        do throws(CairnError) {
            inlineIDs = try PackContent.inlineIDs(
                of: content ?? [], lengths: lengths, ids: remote.idFunction, expected: pack.contentDigest, offset: pack.offset)
        } catch {
            throw diverged(at: pack.offset, "pack \(index)'s content: \(error.message)")
        }
        for (chunk, id) in zip(inline, inlineIDs) { ids[chunk] = id }
        var items: [ArchiveWriter.PackInput] = []
        items.reserveCapacity(pack.entryCount)
        for row in manifest.entries[pack.firstEntry..<(pack.firstEntry + pack.entryCount)] {
            var chunk: (id: Digest, length: Int)?
            if row.entry.kind == .file, row.referenceCount == 1, row.firstReference < UInt64(manifest.references.count) {
                let chunkIndex = Int(manifest.references[Int(row.firstReference)])
                guard chunkIndex < ids.count else { throw diverged(at: pack.offset, "pack \(index) names chunk \(chunkIndex)") }
                chunk = (ids[chunkIndex], Int(row.entry.size))
            }
            items.append(ArchiveWriter.PackInput(entry: row.entry, chunk: chunk))
        }
        if pack.contentLength == 0 { (stored, codec) = ([], .none) }
        // Everything before the pack goes out first, the held commit of the previous item too,
        // so that what the writer makes next starts with the pack and compares with the download.
        if downloaded != nil { try take(writer, holdingLastCommit: false) }
        do throws(CairnError) {
            _ = try writer.appendPack(
                items,
                content: ArchiveWriter.PackContent(
                    codec: codec, stored: stored, rawLength: pack.contentLength, digest: pack.contentDigest, inlineIDs: inlineIDs))
        } catch where error.code == .invalidArgument {
            throw diverged(at: pack.offset, "pack \(index): \(error.message)")
        }
        if let downloaded {
            let written = writer.takeOutput()
            guard written.count >= downloaded.count, written[0..<downloaded.count].elementsEqual(downloaded) else {
                throw diverged(at: pack.offset, "pack \(index) would be written differently from the downloaded one")
            }
            try written.withBytes { (raw) throws(CairnError) in try deliver(raw) }
        }
    }

    /// The seeds' inline files holding the inline chunks of pack `index`, in content order, by
    /// the path and size of each (nil when one is missing).
    static func inlineFiles(of index: Int, in manifest: Manifest, seeds: SeedIndex) -> [SeedIndex.PackedFile]? {
        guard index >= 0, index < manifest.packs.count else { return nil }
        let pack = manifest.packs[index]
        guard pack.contentLength > 0, pack.firstEntry <= manifest.entries.count,
            pack.entryCount <= manifest.entries.count - pack.firstEntry
        else { return nil }
        var files: [SeedIndex.PackedFile] = []
        for row in manifest.entries[pack.firstEntry..<(pack.firstEntry + pack.entryCount)]
        where row.entry.kind == .file && row.referenceCount == 1 {
            guard row.firstReference < UInt64(manifest.references.count) else { return nil }
            let chunk = Int(manifest.references[Int(row.firstReference)])
            guard chunk < manifest.chunks.count, manifest.chunks[chunk].pack == index else { continue }
            guard let file = seeds.packedFile(path: row.entry.pathBytes, length: Int(row.entry.size)) else { return nil }
            files.append(file)
        }
        return files
    }

    /// The bytes of `files`, concatenated, from their packs' contents (each pack decompressed once).
    private func contentOf(_ files: [SeedIndex.PackedFile]) throws(CairnError) -> [UInt8] {
        var raw: [UInt8] = []
        var contents: [UInt64: [UInt8]] = [:]
        for file in files {
            let key = file.pack.offset &+ UInt64(file.pack.seed) << 56
            if contents[key] == nil {
                let record = try seeds.read(seed: file.pack.seed, at: file.pack.offset, count: file.pack.framedLength)
                let stored = record[file.pack.contentStart..<(file.pack.framedLength - RecordFraming.trailerLength)]
                contents[key] = try Array(stored).withBytes { (bytes) throws(CairnError) in
                    try decompressor.decompress(codec: file.pack.prefix.contentCodec, stored: bytes, rawLength: file.pack.prefix.contentRawLength)
                }
            }
            guard let content = contents[key], file.contentOffset <= content.count, file.length <= content.count - file.contentOffset else {
                throw CairnError(.corrupted, "a seed's pack holds less than its item table says", offset: file.pack.offset)
            }
            raw.append(contentsOf: content[file.contentOffset..<(file.contentOffset + file.length)])
        }
        return raw
    }

    private func take(_ writer: ArchiveWriter, holdingLastCommit: Bool = true) throws(CairnError) {
        let bytes = writer.takeOutput(holdingLastCommit: holdingLastCommit)
        guard !bytes.isEmpty else { return }
        try bytes.withBytes { (raw) throws(CairnError) in try deliver(raw) }
    }

    private func diverged(at offset: UInt64, _ what: String) -> CairnError {
        CairnError(.corrupted, "\(Self.divergedMessage): \(what)", path: url, offset: offset)
    }
}

/// Where records are known to start in a remote archive, from its manifest: every chunk record,
/// pack and entry record, and the manifest itself (`Spec/0001 §13.6` step 3). Each known start
/// but the first follows a record or a commit record; a pack is followed by its commit (§10.2),
/// and in format 2.1 the last record before the final commit is followed by the manifest index
/// first (§11.8), which is why the manifest counts as starting the index's length earlier. When
/// that length is not known (a 2.1 archive whose index could not be read), neither is where the
/// last record before the final commit ends: ``next(after:)`` then answers nil for it.
package struct KnownStarts {
    private var starts: [UInt64]
    private let end: UInt64?

    /// - Parameter manifestIndexLength: the framed length of the manifest index before the final
    ///   commit: 0 when the archive has none, nil when it is not known.
    package init(_ manifest: Manifest, manifestOffset: UInt64, manifestIndexLength: UInt64?) {
        let end = manifestIndexLength.map { manifestOffset >= $0 ? manifestOffset - $0 : manifestOffset }
        var starts: [UInt64] = end.map { [$0] } ?? []
        starts.reserveCapacity(manifest.chunks.count + manifest.packs.count + manifest.entries.count + 1)
        for chunk in manifest.chunks where chunk.pack == nil { starts.append(chunk.offset) }
        for pack in manifest.packs { starts.append(pack.offset) }
        for row in manifest.entries where row.pack == nil { starts.append(row.recordOffset) }
        starts.sort()
        self.starts = starts
        self.end = end
    }

    /// The first known start after `offset`: the manifest's offset, less the index's length, when
    /// none is; nil when that is not known either.
    package func next(after offset: UInt64) -> UInt64? {
        var low = 0
        var high = starts.count
        while low < high {
            let mid = (low + high) / 2
            if starts[mid] <= offset { low = mid + 1 } else { high = mid }
        }
        return low < starts.count ? starts[low] : end
    }
}

/// The downloads of a rebuild, requested in order, one merged range at a time.
private struct DownloadQueue {
    private let ranges: [Range<UInt64>]
    private var next = 0
    private var current: (range: Range<UInt64>, bytes: [UInt8])?
    private let download: (Range<UInt64>) throws(CairnError) -> [UInt8]

    init(ranges: [Range<UInt64>], download: @escaping (Range<UInt64>) throws(CairnError) -> [UInt8]) {
        self.ranges = ranges
        self.download = download
    }

    /// The bytes of `range`: from the planned download that holds it (requested when first
    /// needed), or requested on its own when none does (a pack whose files turned out not to be
    /// in the seeds).
    mutating func bytes(_ range: Range<UInt64>) throws(CairnError) -> [UInt8] {
        func slice(_ piece: (range: Range<UInt64>, bytes: [UInt8])) -> [UInt8]? {
            guard piece.range.lowerBound <= range.lowerBound, range.upperBound <= piece.range.upperBound else { return nil }
            let from = Int(range.lowerBound - piece.range.lowerBound)
            return Array(piece.bytes[from..<(from + Int(range.upperBound - range.lowerBound))])
        }
        if let current, let bytes = slice(current) { return bytes }
        while next < ranges.count, ranges[next].upperBound <= range.lowerBound { next += 1 }
        let planned = next < ranges.count && ranges[next].lowerBound <= range.lowerBound && range.upperBound <= ranges[next].upperBound
        let asked = planned ? ranges[next] : range
        if planned { next += 1 }
        let body = try download(asked)
        guard UInt64(body.count) == asked.upperBound - asked.lowerBound else {
            throw CairnError(.network, "the server ended the range early", offset: asked.lowerBound + UInt64(body.count))
        }
        let piece = (asked, body)
        if planned { current = piece }
        return slice(piece) ?? []
    }
}
