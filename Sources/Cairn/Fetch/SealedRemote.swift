/// The encrypted archive at a URL, opened for a seeded fetch (`Spec/0004-trusted-archives.md
/// §6.10.3`): its envelope read and its key block opened with the identities, its inner archive
/// read at random through its sealed blocks. Blocks are asked for as block-rounded outer ranges,
/// neighbours merged only across small gaps (``ArchiveRebuilder/Plan/mergeBelow``) into
/// multi-range requests, as a plain seeded fetch merges its ranges: it counts every byte.
struct SealedRemote: Sendable {
    /// The outer archive at the URL.
    let outer: HTTPArchiveSource
    /// The envelope: its outer bytes before block 0 (copied verbatim into the output), its record
    /// and the keys its key block held.
    let envelope: OpenedEnvelope
    /// The inner archive, read through the sealed blocks that hold it.
    let inner: SealedArchiveSource

    /// Opens the archive at `url`: one suffix request for its end, then its envelope.
    ///
    /// - Throws: `.sourceChanged` when it is no longer the archive `validator` and `length`
    ///   (outer bytes) name; `.untrusted` for a plain archive or a key block no identity of
    ///   `decryption` opens; `.network`, `.httpStatus`; `.invalidArgument` starting with
    ///   ``RangeAnswer/noRangesMessage`` when the server ignores ranges; all naming `url`.
    static func open(
        client: HTTPClient, url: String, validator: String?, length: UInt64?, decryption: ArchiveDecryption
    ) throws(CairnError) -> SealedRemote {
        let outer = try HTTPArchiveSource(url: url, client: client, tailSlack: 0)
        try RemoteManifest.requireUnchanged(outer, validator: validator, length: length)
        do throws(CairnError) {
            let base = SmallGapSource(base: outer)
            var position: UInt64 = 0
            let (record, prefix) = try OpenedEnvelope.readRecord(name: url) { (count) throws(CairnError) in
                let wanted = position..<min(outer.size, position + UInt64(count))
                position = wanted.upperBound
                return try outer.read(ranges: [wanted], gap: 0)[0]
            }
            let envelope = try OpenedEnvelope(record: record, prefix: prefix) { (record) throws(CairnError) in
                try decryption.openKeyBlock(record)
            }
            return SealedRemote(outer: outer, envelope: envelope, inner: try SealedArchiveSource(base: base, envelope: envelope))
        } catch {
            outer.close()
            throw error.withPath(url)
        }
    }

    /// The inner archive's ranges as a seeded fetch downloads them: the footer from opened
    /// blocks, the rest decrypted without the tags and checked against it (``SealedRangeReader``).
    func ranges() throws(CairnError) -> SealedRangeReader {
        SealedRangeReader(inner: inner, outer: outer, sealer: try BlockSealer(key: envelope.secrets.blockKey, archiveID: envelope.record.archiveID))
    }

    /// The sealing of a rebuilt inner archive under the remote's block key and archive id, with
    /// fresh nonces (§6.10.3): its blocks open under the same keys as the remote's.
    func resealing() throws(CairnError) -> FetchWriter.Resealing {
        let ranges = try ranges()
        return FetchWriter.Resealing(
            ranges: ranges, envelopeBytes: envelope.prefix,
            sealing: BlockSealing(sealer: ranges.sealer, blockSize: Int(envelope.record.blockSize)))
    }
}

/// An ``HTTPArchiveSource`` whose ``read(ranges:)`` merges neighbours only across gaps of at
/// most ``ArchiveRebuilder/Plan/mergeBelow`` bytes: the bytes between farther ranges are not
/// downloaded and dropped.
private struct SmallGapSource: ArchiveSource {
    let base: HTTPArchiveSource
    var name: String { base.name }
    var size: UInt64 { base.size }
    var isRemote: Bool { true }

    func read(fromAbsoluteOffset offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws(CairnError) -> Int {
        try base.read(fromAbsoluteOffset: offset, into: buffer)
    }
    func read(ranges: [Range<UInt64>]) throws(CairnError) -> [[UInt8]] {
        try base.read(ranges: ranges, gap: ArchiveRebuilder.Plan.mergeBelow)
    }
    func openSequential() throws(CairnError) -> SequentialArchiveBytes { try base.openSequential() }
    func close() { base.close() }
}
