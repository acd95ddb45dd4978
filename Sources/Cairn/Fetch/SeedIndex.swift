import Glibc

/// The records of local archives that a seeded fetch may copy instead of downloading
/// (`Spec/0001-container-format.md §13.6`, rebuilding an archive from seeds).
///
/// A seed is any local file that starts like a Cairn archive: a complete archive (typically the
/// previous export) or an incomplete one (an interrupted fetch of an archive that has since been
/// replaced). Its records are found by walking it front to back with chunk payloads skipped, so
/// its manifest is neither needed nor trusted; the walk stops quietly at the first record that
/// does not parse. Nothing read from a seed is trusted either: whatever is copied is verified in
/// the rebuilt archive, chunk by chunk and commit by commit, like downloaded bytes.
///
/// - Complexity: indexing reads every record header of every seed, O(records); memory is
///   about 100 bytes per chunk record and pack record.
package final class SeedIndex {
    /// A chunk record in a seed.
    package struct ChunkLocation: Sendable {
        /// Index in ``seeds``.
        package var seed: Int
        /// Offset of the record's first byte in the seed.
        package var offset: UInt64
        /// The whole record: header, payload, CRC.
        package var framedLength: Int
        package var codec: ChunkCodec
    }

    /// A pack record in a seed.
    package struct PackLocation: Sendable {
        package var seed: Int
        package var offset: UInt64
        package var framedLength: Int
        package var prefix: PackRecordPrefix

        /// Where the stored content section starts, from the record's first byte.
        package var contentStart: Int { RecordFraming.headerLength + PackRecordPrefix.length + prefix.tableStoredLength }
        /// Bytes of the stored content section.
        package var contentStoredLength: Int { framedLength - RecordFraming.trailerLength - contentStart }
    }

    /// A seed, open for reading: a local file, or a remote archive (an `http(s)://` URL or an
    /// `s3://` object) read with range requests.
    package struct Seed: Sendable {
        /// The path, or the URL or `s3://` location as given.
        package var path: String
        /// The local file; nil for a remote seed.
        package var descriptor: FileDescriptor?
        /// Bytes of the file that were walked (up to the first record that did not parse); for
        /// a remote seed, its manifest's offset.
        package var indexedLength: UInt64
        /// The remote archive; nil for a local seed.
        package var remote: HTTPArchiveSource? = nil
        /// A local encrypted seed's inner archive, read through its opened blocks
        /// (`Spec/0004-trusted-archives.md §6.10.3`): offsets are the inner archive's.
        package var sealed: SealedArchiveSource? = nil

        /// Reads up to `buffer.count` bytes at `offset` (`pread(2)`, or range requests; for an
        /// encrypted seed, the blocks holding them opened).
        ///
        /// - Throws: `.io` for a local file; `.network`, `.httpStatus`, `.sourceChanged` for a
        ///   remote one; `.checksumMismatch` for a sealed block of an encrypted seed that does not open.
        package func read(fromAbsoluteOffset offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws(CairnError) -> Int {
            if let remote { return try remote.read(fromAbsoluteOffset: offset, into: buffer) }
            if let sealed { return try sealed.read(fromAbsoluteOffset: offset, into: buffer) }
            guard let descriptor else { return 0 }
            return try descriptor.read(fromAbsoluteOffset: offset, into: buffer)
        }
    }

    /// A small file stored inline in a seed's pack: where its bytes are in the pack's content.
    package struct PackedFile: Sendable {
        /// The pack record holding it.
        package var pack: PackLocation
        /// Where its bytes start in the pack's decompressed content.
        package var contentOffset: Int
        package var length: Int
    }

    package private(set) var seeds: [Seed] = []
    private var chunks: [Digest: ChunkLocation] = [:]
    private var packs: [Digest: [PackLocation]] = [:]
    /// Inline files of local seeds' packs, by path (the first seen of each path).
    private var packedFiles: [[UInt8]: PackedFile] = [:]
    /// Manifest records of local seeds, by record digest (SHA-256 of the framed record).
    private var manifestRecords: [Digest: ChunkLocation] = [:]
    private let decompressor = ChunkDecompressor()
    /// The chunk keys of the archive being fetched: a remote seed is opened with them. A seed
    /// made with other keys is indexed all the same, but no chunk id of it matches.
    private let keying: ChunkKeying?

    /// - Parameter keying: the fetched archive's chunk keys (`Spec/0004-trusted-archives.md
    ///   §6.6`); nil for a plain archive.
    package init(keying: ChunkKeying?) {
        self.keying = keying
    }

    /// Chunk records indexed, over every seed.
    package var chunkCount: Int { chunks.count }
    /// Pack records indexed, over every seed.
    package var packCount: Int { packs.values.reduce(0) { $0 + $1.count } }

    /// Opens `path` and indexes its chunk and pack records.
    ///
    /// - Throws: `.notFound`/`.io` when it cannot be opened; `.corrupted` or `.unsupportedVersion`
    ///   (naming `path`) when it does not start with a Cairn prelude and header.
    package func add(path: String) throws(CairnError) {
        let descriptor = try FileDescriptor.open(path, flags: O_RDONLY)
        do throws(CairnError) {
            let end = try indexRecords(of: descriptor, size: try descriptor.status().size)
            seeds.append(Seed(path: path, descriptor: descriptor, indexedLength: end))
        } catch {
            _ = try? descriptor.close()
            throw error.withPath(path)
        }
    }

    /// Opens the encrypted archive at `path` with `decryption` (`Spec/0004-trusted-archives.md
    /// §6.10.3`) and indexes its inner archive's records, read through its opened blocks, when
    /// its chunk keys are `keying` (the fetched archive's): a seed with other keys shares no
    /// chunk id with the archive and is not indexed. A seed cut short (an interrupted fetch) is
    /// read up to its last whole block.
    ///
    /// - Returns: whether the seed was indexed (false: its chunk id key is not `keying`'s).
    /// - Throws: `.notFound`/`.io` when it cannot be opened; `.untrusted` when it is not encrypted
    ///   or no identity of `decryption` opens its key block; `.corrupted` for an envelope that
    ///   does not parse, naming `path`.
    package func add(encryptedPath path: String, decryption: ArchiveDecryption, keying: ChunkKeying) throws(CairnError) -> Bool {
        let descriptor = try FileDescriptor.open(path, flags: O_RDONLY)
        do throws(CairnError) {
            let base = LocalArchiveSource(descriptor: descriptor, size: try descriptor.status().size)
            let open = { (partial: Bool) throws(CairnError) -> SealedArchiveSource in
                try SealedArchiveSource.open(base, partial: partial) { (record) throws(CairnError) in try decryption.openKeyBlock(record) }
            }
            // A complete archive, or else a partial one (its last block not taken as final).
            let sealed: SealedArchiveSource
            do throws(CairnError) { sealed = try open(false) } catch where error.code == .truncated { sealed = try open(true) }
            guard sealed.keying.idKey == keying.idKey else {
                _ = try? descriptor.close()
                return false
            }
            let end = try indexRecords(of: sealed, size: sealed.size)
            seeds.append(Seed(path: path, descriptor: descriptor, indexedLength: end, sealed: sealed))
            return true
        } catch {
            _ = try? descriptor.close()
            throw error.withPath(path)
        }
    }

    /// Walks the archive `input` (`size` bytes) and indexes its chunk, pack and manifest records
    /// as those of the next seed.
    ///
    /// - Returns: where the walk stopped: the end of the last record that parsed.
    /// - Throws: `.corrupted` or `.unsupportedVersion` when `input` does not start with a
    ///   Cairn prelude and header.
    private func indexRecords(of input: any PositionalInput, size: UInt64) throws(CairnError) -> UInt64 {
        let stream = RecordStream(skippingChunkPayloadsOf: input, fileSize: size)
        let prelude = try stream.readBytes(Prelude.length)
        _ = try Prelude.parse(prelude)
        let seedIndex = seeds.count
        var end = stream.offset
        while true {
            let record: RecordStream.Record
            do throws(CairnError) {
                guard let next = try stream.next() else { break }
                record = next
            } catch {
                break  // a torn or damaged tail: what came before is still usable
            }
            end = record.offset + UInt64(record.header.framedLength)
            let payload = record.framed[RecordFraming.headerLength...]
            switch record.header.type {
            case .chunk?:
                var r = ByteReader(Array(payload.prefix(ChunkRecordPrefix.length)), baseOffset: record.offset, what: "chunk record")
                let storedLength = record.header.length - ChunkRecordPrefix.length
                guard storedLength >= 0, let prefix = try? ChunkRecordPrefix.decode(&r, storedLength: storedLength) else { continue }
                if chunks[prefix.id] == nil {
                    chunks[prefix.id] = ChunkLocation(
                        seed: seedIndex, offset: record.offset, framedLength: record.header.framedLength, codec: prefix.codec)
                }
            case .manifest?:
                if let digest = try? SHA256.hash(record.framed), manifestRecords[digest] == nil {
                    manifestRecords[digest] = ChunkLocation(
                        seed: seedIndex, offset: record.offset, framedLength: record.header.framedLength, codec: .none)
                }
            case .pack?:
                var r = ByteReader(Array(payload.prefix(PackRecordPrefix.length)), baseOffset: record.offset, what: "pack record")
                guard let prefix = try? PackRecordPrefix.decode(&r, payloadLength: record.header.length) else { continue }
                let location = PackLocation(seed: seedIndex, offset: record.offset, framedLength: record.header.framedLength, prefix: prefix)
                packs[prefix.contentDigest, default: []].append(location)
                indexFiles(of: location, payload: record.payload, payloadLength: record.header.length)
            default:
                continue
            }
        }
        return end
    }

    /// Indexes the inline files of a pack by path (its item table decoded; the content is not
    /// read). A table that does not decode is left out: the seed is not trusted anyway.
    private func indexFiles(of pack: PackLocation, payload: [UInt8], payloadLength: Int) {
        guard
            let decoded = try? PackContent.read(
                payload: payload, payloadLength: payloadLength, offset: pack.offset, chunkCount: 1 << 62, contentIDs: nil,
                using: decompressor)
        else { return }
        var position = 0
        for item in decoded.items where item.entry.kind == .file && item.content == .inline {
            let length = Int(item.entry.size)
            if packedFiles[item.entry.pathBytes] == nil {
                packedFiles[item.entry.pathBytes] = PackedFile(pack: pack, contentOffset: position, length: length)
            }
            position += length
        }
    }

    /// A local seed's manifest record with this record digest and framed length (the same bytes,
    /// unless SHA-256 collides).
    package func manifestRecord(digest: Digest, framedLength: Int) -> ChunkLocation? {
        guard let found = manifestRecords[digest], found.framedLength == framedLength else { return nil }
        return found
    }

    /// Reads exactly `count` bytes of seed `seed` at `offset`.
    ///
    /// - Throws: `.truncated` naming the seed when it ends first; what reading throws.
    package func read(seed: Int, at offset: UInt64, count: Int) throws(CairnError) -> [UInt8] {
        guard seed < seeds.count else { throw CairnError(.invalidArgument, "internal error: no seed \(seed)") }
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = try bytes.withMutableBytes { (raw) throws(CairnError) in
                try seeds[seed].read(fromAbsoluteOffset: offset + UInt64(done), into: UnsafeMutableRawBufferPointer(rebasing: raw[done...]))
            }
            guard n > 0 else {
                throw CairnError(.truncated, "the seed ended before the record it was to give", path: seeds[seed].path, offset: offset + UInt64(done))
            }
            done += n
        }
        return bytes
    }

    /// The record of `framedLength` bytes at `offset` of seed `seed`, when it is one: its
    /// framing (§3.2) gives that length and its CRC-32 holds. Nil otherwise (a seed damaged since
    /// it was indexed, or a torn copy): the caller downloads the record instead, so a damaged
    /// seed costs a download, not a failed verification and another attempt.
    ///
    /// - Throws: what reading the seed throws (a seed shorter than the record is nil).
    package func checkedRecord(seed: Int, at offset: UInt64, framedLength: Int) throws(CairnError) -> [UInt8]? {
        let bytes: [UInt8]
        do throws(CairnError) {
            bytes = try read(seed: seed, at: offset, count: framedLength)
        } catch where error.code == .truncated {
            return nil
        }
        return Self.isWholeRecord(bytes, offset: offset) ? bytes : nil
    }

    /// Whether `bytes` are exactly one record whose CRC-32 holds.
    package static func isWholeRecord(_ bytes: [UInt8], offset: UInt64) -> Bool {
        bytes.withUnsafeBytes { raw in
            guard let header = try? RecordCodec.parseHeader(raw, offset: offset), header.framedLength == raw.count else { return false }
            return (try? RecordCodec.checkCRC(raw, offset: offset)) != nil
        }
    }

    /// The inline file of a local seed's pack at `path`, if one is `length` bytes long.
    package func packedFile(path: [UInt8], length: Int) -> PackedFile? {
        guard let found = packedFiles[path], found.length == length else { return nil }
        return found
    }

    /// Adds a remote seed (an archive at an `http(s)://` URL or an `s3://` object), indexed from
    /// its manifest: one suffix range request, no walk of its records (which would read it
    /// whole). Only its chunk records are offered for copying, read with range requests; its
    /// packs are not (a pack's item-table length needs a read of its record), nor the bridging
    /// of unchanged files' records (``recordTypes(seed:in:)`` answers nil). As for a local seed,
    /// nothing is trusted: what is copied is verified in the rebuilt archive, and a copy that
    /// fails is downloaded instead.
    ///
    /// - Throws: what opening the remote archive and reading its manifest throws, naming it.
    package func add(remote: RemoteArchive) throws(CairnError) {
        let source = try remote.openRandomAccess()
        do throws(CairnError) {
            let reader = try ArchiveReader(source: source, keying: keying)
            let seedIndex = seeds.count
            for row in reader.manifest.chunks where row.pack == nil && chunks[row.id] == nil {
                chunks[row.id] = ChunkLocation(
                    seed: seedIndex, offset: row.offset,
                    framedLength: RecordFraming.overhead + ChunkRecordPrefix.length + Int(row.storedLength), codec: row.codec)
            }
            seeds.append(Seed(path: remote.name, descriptor: nil, indexedLength: reader.footer.manifestOffset, remote: source))
        } catch {
            source.close()
            throw error.withPath(remote.name)
        }
    }

    /// A seed's chunk record with this id, codec and framed length: the same bytes as the
    /// remote's record, unless a compressor made other stored bytes of the same length (the
    /// rebuilt archive's chain digests tell).
    package func chunk(id: Digest, codec: ChunkCodec, framedLength: Int) -> ChunkLocation? {
        guard let found = chunks[id], found.codec == codec, found.framedLength == framedLength else { return nil }
        return found
    }

    /// The seeds' pack records whose inline chunks have these ids (`contentDigest`) and whose
    /// content is `contentLength` bytes uncompressed.
    package func packs(contentDigest: Digest, contentLength: Int) -> [PackLocation] {
        (packs[contentDigest] ?? []).filter { $0.prefix.contentRawLength == contentLength }
    }

    /// The types of the records that tile `range` of a seed exactly (each record's framing read
    /// with `pread`), or nil when they do not (a record crosses an end, or a header is bad).
    package func recordTypes(seed: Int, in range: Range<UInt64>) -> [UInt8]? {
        guard seed < seeds.count, seeds[seed].remote == nil else { return nil }
        var types: [UInt8] = []
        var position = range.lowerBound
        var head = [UInt8](repeating: 0, count: RecordFraming.headerLength)
        while position < range.upperBound {
            let got = try? head.withMutableBytes { (raw) throws(CairnError) in
                try seeds[seed].read(fromAbsoluteOffset: position, into: raw)
            }
            guard got == RecordFraming.headerLength,
                let header = try? head.withBytes({ (raw) throws(CairnError) in try RecordCodec.parseHeader(raw, offset: position) })
            else { return nil }
            types.append(header.typeByte)
            position += UInt64(header.framedLength)
            guard types.count <= 64 else { return nil }
        }
        return position == range.upperBound ? types : nil
    }

    /// Forgets seed `index` (closing it) and every record indexed from it; later seeds keep
    /// their numbers shifted down by one.
    package func remove(at index: Int) {
        guard index < seeds.count else { return }
        _ = try? seeds[index].descriptor?.close()
        seeds[index].remote?.close()
        seeds.remove(at: index)
        chunks = chunks.filter { $0.value.seed != index }.mapValues { var c = $0; if c.seed > index { c.seed -= 1 }; return c }
        packs = packs.mapValues { list in
            list.filter { $0.seed != index }.map { var p = $0; if p.seed > index { p.seed -= 1 }; return p }
        }.filter { !$0.value.isEmpty }
        packedFiles = packedFiles.filter { $0.value.pack.seed != index }.mapValues {
            var f = $0
            if f.pack.seed > index { f.pack.seed -= 1 }
            return f
        }
        manifestRecords = manifestRecords.filter { $0.value.seed != index }.mapValues {
            var m = $0
            if m.seed > index { m.seed -= 1 }
            return m
        }
    }

    /// Closes every seed.
    package func close() {
        for seed in seeds {
            _ = try? seed.descriptor?.close()
            seed.remote?.close()
        }
        seeds = []
        chunks = [:]
        packs = [:]
        packedFiles = [:]
        manifestRecords = [:]
    }
}
