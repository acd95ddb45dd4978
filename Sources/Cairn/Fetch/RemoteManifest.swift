/// The footer and manifest of an archive at a URL, read through the seekable reader over an
/// ``HTTPArchiveSource`` (a suffix range request, then what the manifest needs): what a seeded
/// fetch plans from (`Spec/0001-container-format.md §13.6`).
package struct RemoteManifest: Sendable {
    /// Bytes of the archive (Content-Range's complete length).
    package var length: UInt64
    /// The strong validator the server gave (ETag or Last-Modified), if any.
    package var validator: String?
    package var version: FormatVersion
    package var footer: Footer
    package var manifest: Manifest
    /// The archive's bytes from the manifest's offset to its end (manifest records and footer),
    /// appended as they are once everything before them is rebuilt.
    package var tail: [UInt8]
    /// The archive's prelude and header record (from the opening read of its first block).
    package var head: [UInt8]
    /// Format 2.1: the framed manifest index record before the final commit (§11.8), when the
    /// archive has one and it was read.
    package var manifestIndex: [UInt8]? = nil
    /// Bytes of the manifest copied from seeds' manifest records instead of downloaded.
    package var manifestSeedBytes: UInt64 = 0
    /// The archive's chunk id rule (from the fetch's keys), by which a rebuild checks the packs
    /// it assembles.
    package var idFunction = ChunkIDFunction.sha256
    /// The remote archive as opened, with its validator and the fetch's connections: a plain
    /// archive's planned downloads are read through it (``PlannedDownloads``); nil for an
    /// encrypted one's inner archive.
    var source: HTTPArchiveSource?

    /// The framed length of the manifest index before the final commit (§11.8): 0 for a 2.0
    /// archive; nil for a 2.1 archive whose index was not read, where the last record before the
    /// final commit therefore has no known end (``KnownStarts``).
    package var manifestIndexLength: UInt64? {
        Prelude.hasManifestIndex(minor: version.minor) ? manifestIndex.map { UInt64($0.count) } : 0
    }

    /// Whether the archive at the source is still the one `validator` and `length` name (closing
    /// the source when not).
    static func requireUnchanged(_ source: HTTPArchiveSource, validator: String?, length: UInt64?) throws(CairnError) {
        if let validator, let now = source.validator, now != validator {
            source.close()
            throw CairnError(.sourceChanged, "the archive at the URL changed (its validator is now \(now), was \(validator))", path: source.url)
        }
        if let length, source.size != length {
            source.close()
            throw CairnError(.sourceChanged, "the archive at the URL changed (it is now \(source.size) bytes, was \(length))", path: source.url)
        }
    }

    /// Bytes of the archive's start read first: the prelude and the header record, which is
    /// usually far shorter (a longer one is read on).
    static let headRead: UInt64 = 1024

    /// Reads the footer and manifest of the archive at `url`, with the checks of the seekable
    /// reader (`Spec/0001 §11.5`, §12.3), taking the manifest records that local seeds hold from
    /// them (§13.6 step 1): the opening request asks for the footer alone; then the prelude and
    /// header; for a 2.1 archive the count at the end of the manifest index (§11.8, the record
    /// that ends one commit record before the manifest) and the index itself. The index names
    /// every manifest record by framed length and record digest, and only those no seed has are
    /// downloaded. The assembled manifest then goes through the seekable reader's checks (its
    /// SHA-256 against the footer's, its table sizes against the footer's counts). An archive
    /// without an index (format 2.0), or whose index is not usable, has its manifest downloaded
    /// whole.
    ///
    /// - Parameters:
    ///   - validator: when resuming, the validator recorded for the partial file;
    ///   - length: when resuming, the archive length recorded for it. The archive must still
    ///     have both, or it changed.
    ///   - seeds: the indexed seeds whose manifest records may be copied.
    ///   - keying: the archive's chunk keys (`Spec/0004-trusted-archives.md §6.6`); nil for a
    ///     plain archive.
    ///   - trustedKeys: when not empty, the root signature is verified before the manifest is
    ///     read (`Spec/0004 §4.3`): an archive that is not signed, or signed by another key, is
    ///     refused here, before anything is planned, downloaded or set aside.
    /// - Throws: `.untrusted` naming the URL for an archive no trusted key signed (§4.1);
    ///   `.sourceChanged` naming the URL when the archive is not the one `validator` and
    ///   `length` name, or a range answer does not match its request; `.invalidArgument` whose
    ///   message starts with ``RangeAnswer/noRangesMessage`` when the server ignores
    ///   ranges; what ``ArchiveReader/init(source:verifyingStructure:keepingManifestRegion:trustedKeys:)``
    ///   throws for a footer or manifest that fails its checks; `.network` and `.httpStatus`
    ///   (transient ones retried).
    /// - Parameter connections: requests the source keeps in flight (`Spec/0001 §13.9`).
    package static func fetch(
        client: HTTPClient, url: String, validator: String?, length: UInt64?, seeds: SeedIndex, keying: ChunkKeying?,
        trustedKeys: [PublicKey], connections: Int = RemoteReadOptions.defaultConnections
    ) throws(CairnError) -> RemoteManifest {
        let source = try HTTPArchiveSource(url: url, client: client, tailSlack: 0, connections: connections)
        try requireUnchanged(source, validator: validator, length: length)
        defer { source.close() }
        var remote = try read(source, name: url, validator: source.validator, seeds: seeds, keying: keying, trustedKeys: trustedKeys) {
            (ranges, gap) throws(CairnError) in
            try source.read(ranges: ranges, gap: gap)
        }
        remote.source = source
        return remote
    }

    /// The footer and manifest of the inner archive of an encrypted archive at a URL
    /// (`Spec/0004-trusted-archives.md §6.10.3`), read as ``fetch(client:url:validator:length:seeds:keying:)``
    /// reads a plain one, through the sealed blocks that hold them: ``length`` and every offset
    /// are the inner archive's; ``validator`` is the outer archive's.
    ///
    /// The footer is read from opened blocks; everything else is decrypted without the tags
    /// (``SealedRangeReader``) and checked against it: the manifest by its digest, here, before
    /// it is used. With `trustedKeys`, the inner archive's root signature is verified first.
    static func fetch(sealed remote: SealedRemote, seeds: SeedIndex, trustedKeys: [PublicKey]) throws(CairnError) -> RemoteManifest {
        let inner = remote.inner
        let ranges = try remote.ranges()
        return try read(
            inner, name: remote.outer.url, validator: remote.outer.validator, seeds: seeds, keying: inner.keying, trustedKeys: trustedKeys
        ) {
            (wanted, _) throws(CairnError) in try ranges.read(ranges: wanted)
        }
    }

    /// What both fetches read, from `source` (`name` in messages), whose ranges `read` gives,
    /// neighbours merged across gaps of at most the given bytes.
    private static func read(
        _ source: any ArchiveSource, name url: String, validator: String?, seeds: SeedIndex, keying: ChunkKeying?, trustedKeys: [PublicKey],
        ranges read: ([Range<UInt64>], UInt64) throws(CairnError) -> [[UInt8]]
    ) throws(CairnError) -> RemoteManifest {
        let size = source.size
        do throws(CairnError) {
            // The head first: its prelude says what the archive is (an encrypted one read without
            // an identity is named as such, `Spec/0004 §6.2` rule 1, not as a footer that does
            // not parse).
            var head = try read([0..<min(size, headRead)], 0)[0]
            _ = try Prelude.parse(Array(head.prefix(Prelude.length)))
            let footer = try source.readFooter(fileSize: size)
            if head.count >= Prelude.length + RecordFraming.headerLength {
                let header = try head.withBytes { (raw) throws(CairnError) in
                    try RecordCodec.parseHeader(UnsafeRawBufferPointer(rebasing: raw[Prelude.length...]), offset: UInt64(Prelude.length))
                }
                let end = UInt64(Prelude.length + header.framedLength)
                guard end <= size else { throw CairnError(.truncated, "the header record runs past the archive's end", offset: 12) }
                if end > UInt64(head.count) { head += try read([UInt64(head.count)..<end], 0)[0] }
                head = Array(head[0..<Int(end)])
            }
            if !trustedKeys.isEmpty {
                // `Spec/0004 §4.3`: the seekable reader's check, before the manifest is used.
                _ = try ArchiveReader.verifyRootSignature(of: source, footer: footer, start: head, trustedKeys: trustedKeys)
            }
            let manifestOffset = footer.manifestOffset
            let manifestEnd = manifestOffset + footer.manifestLength
            var index: (record: [UInt8], parsed: ManifestIndex)?
            // Only a 2.1 archive has an index (a 2.0 one is not probed); one that cannot be read
            // or checked (a failed request included) leaves the manifest to be downloaded whole.
            let version = try? Prelude.parse(head)
            if let version, Prelude.hasManifestIndex(minor: version.minor), manifestOffset >= UInt64(head.count) + UInt64(CommitRecord.framedLength) + ManifestIndex.framedLength(count: 1) {
                index = try? readIndex(
                    read, before: manifestOffset - UInt64(CommitRecord.framedLength), after: UInt64(head.count),
                    records: footer.manifestLength / UInt64(RecordFraming.overhead + 9))
            }
            if let found = index, found.parsed.manifestLength != footer.manifestLength { index = nil }
            var region: [UInt8] = []
            var copied: UInt64 = 0
            if let index {
                var pieces: [[UInt8]?] = []
                var wanted: [Range<UInt64>] = []
                var position = manifestOffset
                for entry in index.parsed.entries {
                    let length = Int(entry.framedLength)
                    if let found = seeds.manifestRecord(digest: entry.digest, framedLength: length),
                        let bytes = try? seeds.read(seed: found.seed, at: found.offset, count: length)
                    {
                        pieces.append(bytes)
                        copied += UInt64(length)
                    } else {
                        pieces.append(nil)
                        wanted.append(position..<(position + UInt64(length)))
                    }
                    position += UInt64(length)
                }
                var downloaded = try read(wanted, ArchiveRebuilder.Plan.mergeBelow).makeIterator()
                region.reserveCapacity(Int(footer.manifestLength))
                for piece in pieces {
                    guard let bytes = piece ?? downloaded.next() else { break }
                    region += bytes
                }
            }
            if index != nil, let manifest = try? assemble(source, name: url, validator: validator, read, head: head, region: region, footer: footer, keying: keying) {
                var remote = manifest
                remote.manifestIndex = index?.record
                remote.manifestSeedBytes = copied
                return remote
            }
            // No usable index, or what it gave did not check: the manifest whole.
            region = try read([manifestOffset..<manifestEnd], 0)[0]
            var remote = try assemble(source, name: url, validator: validator, read, head: head, region: region, footer: footer, keying: keying)
            remote.manifestIndex = index?.record
            return remote
        } catch {
            throw error.withPath(url)
        }
    }

    /// The manifest index record that ends at `end` (§11.8), read with two range requests (its
    /// count, then the record), checked (framing, CRC-32, payload); nil when there is none or its
    /// count is more than `records`, the most manifest records the manifest's length allows
    /// (every framed manifest record is at least 21 bytes).
    private static func readIndex(_ read: ([Range<UInt64>], UInt64) throws(CairnError) -> [[UInt8]], before end: UInt64, after start: UInt64, records: UInt64)
        throws(CairnError) -> (record: [UInt8], parsed: ManifestIndex)?
    {
        let countBytes = try read([(end - 8)..<(end - 4)], 0)[0]
        let count = countBytes.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }.littleEndian
        let length = ManifestIndex.framedLength(count: count)
        guard count > 0, UInt64(count) <= records, length <= UInt64(RecordFraming.overhead + FormatLimits.maximumRecordPayload),
            end >= start + length
        else {
            return nil
        }
        let record = try read([(end - length)..<end], 0)[0]
        let header = try record.withBytes { (raw) throws(CairnError) in try RecordCodec.parseHeader(raw, offset: end - length) }
        guard header.typeByte == RecordType.manifestIndex.rawValue, header.isSkippable, UInt64(header.framedLength) == length else {
            return nil
        }
        try record.withBytes { (raw) throws(CairnError) in try RecordCodec.checkCRC(raw, offset: end - length) }
        let payload = Array(record[RecordFraming.headerLength..<(record.count - RecordFraming.trailerLength)])
        return (record, try ManifestIndex.decode(payload, offset: end - length + UInt64(RecordFraming.headerLength)))
    }

    /// The manifest through the seekable reader's checks, from the pieces read.
    private static func assemble(
        _ source: any ArchiveSource, name url: String, validator: String?, _ read: ([Range<UInt64>], UInt64) throws(CairnError) -> [[UInt8]],
        head: [UInt8], region: [UInt8], footer: Footer, keying: ChunkKeying?
    ) throws(CairnError) -> RemoteManifest {
        let size = source.size
        let footerOffset = size - UInt64(Footer.framedLength)
        let footerBytes = try read([footerOffset..<size], 0)[0]
        let sparse = SparseArchiveSource(
            name: url, size: size, pieces: [(0, head), (footer.manifestOffset, region), (footerOffset, footerBytes)])
        let reader = try ArchiveReader(source: sparse, verifyingStructure: false, keepingManifestRegion: true, keying: keying)
        guard let kept = reader.manifestRegion else {
            throw CairnError(.truncated, "the manifest could not be read whole", path: url, offset: footer.manifestOffset)
        }
        return RemoteManifest(
            length: size, validator: validator, version: reader.version, footer: reader.footer, manifest: reader.manifest,
            tail: kept + footerBytes, head: head, idFunction: reader.idFunction)
    }
}
