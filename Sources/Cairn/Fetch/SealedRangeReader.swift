/// The inner ranges a seeded fetch of an encrypted archive downloads (`Spec/0004-trusted-archives.md
/// §6.10.3`), each at the cost of about the bytes it holds rather than of the sealed blocks that
/// hold it.
///
/// A block opens only whole, so asking for a 300-byte signature record through the blocks that
/// hold it costs 16 KiB. Below ``authenticatedFrom`` (the inner archive's manifest) a range is
/// instead downloaded as its blocks' nonces and the ciphertext bytes it covers (from a 64-byte
/// keystream boundary) and decrypted without the tags (``BlockSealer/decryptUnauthenticated(_:nonce:at:)``).
/// Those bytes are authenticated by what the fetch checks anyway before anything is renamed:
/// chunk records by their keyed ids, every record by its CRC-32, and every byte before the
/// manifest by the chain digest of the footer, which was read from opened blocks (§12.2 of
/// `Spec/0001`). From the manifest on, reads go through ``SealedArchiveSource`` and open whole
/// blocks.
struct SealedRangeReader: Sendable {
    /// The remote's inner archive through its opened blocks: the manifest and footer.
    let inner: SealedArchiveSource
    /// The remote's outer archive.
    let outer: HTTPArchiveSource
    /// The inner offset from which reads open whole blocks: the manifest's.
    let authenticatedFrom: UInt64
    let sealer: BlockSealer

    /// The inner bytes of `range`.
    ///
    /// - Throws: `.truncated` for a range past the inner archive's end; what downloading throws
    ///   (`.network`, `.httpStatus`, `.sourceChanged`), and, from the manifest on, what opening a
    ///   block throws (`.checksumMismatch` naming the block).
    func read(_ range: Range<UInt64>) throws(CairnError) -> [UInt8] {
        guard !range.isEmpty else { return [] }
        guard range.upperBound <= inner.size else {
            throw CairnError(.truncated, "a read of \(range.count) bytes runs past the archive's end", path: inner.name, offset: range.lowerBound)
        }
        guard range.lowerBound < authenticatedFrom else { return try inner.read(ranges: [range])[0] }
        guard range.upperBound <= authenticatedFrom else {
            return try read(range.lowerBound..<authenticatedFrom) + inner.read(ranges: [authenticatedFrom..<range.upperBound])[0]
        }
        let layout = inner.layout
        let nonceLength = UInt64(BlockSealer.nonceByteCount)
        let keystreamBlock = UInt64(BlockSealer.keystreamBlock)
        // Per block: its nonce, then the ciphertext from the keystream block holding the first
        // byte wanted; consecutive blocks' pieces are a tag apart and merge into one request.
        var pieces: [(index: UInt64, from: UInt64, skip: Int, count: Int)] = []
        var asked: [Range<UInt64>] = []
        for index in layout.blocks(covering: range) {
            let held = layout.innerRange(of: index)
            let first = max(range.lowerBound, held.lowerBound) - held.lowerBound
            let end = min(range.upperBound, held.upperBound) - held.lowerBound
            let from = first / keystreamBlock * keystreamBlock
            let start = layout.outerRange(of: index).lowerBound
            asked.append(start..<(start + nonceLength))
            asked.append((start + nonceLength + from)..<(start + nonceLength + end))
            pieces.append((index, from, Int(first - from), Int(end - first)))
        }
        let downloaded = try outer.read(ranges: asked, gap: ArchiveRebuilder.Plan.mergeBelow)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(range.count)
        for (number, piece) in pieces.enumerated() {
            let (nonce, ciphertext) = (downloaded[2 * number], downloaded[2 * number + 1])
            guard nonce.count == BlockSealer.nonceByteCount, ciphertext.count == piece.skip + piece.count else {
                throw CairnError(
                    .network, "the server answered sealed block \(piece.index)'s ranges short", path: outer.url,
                    offset: layout.outerRange(of: piece.index).lowerBound)
            }
            let plaintext = nonce.withUnsafeBytes { nonce in
                ciphertext.withUnsafeBytes { sealer.decryptUnauthenticated($0, nonce: nonce, at: Int(piece.from)) }
            }
            guard let plaintext else {
                throw CairnError(.invalidArgument, "sealed block \(piece.index) cannot be decrypted at \(piece.from)", path: outer.url)
            }
            bytes += plaintext[piece.skip...]
        }
        return bytes
    }
}
