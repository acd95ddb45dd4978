/// The inner ranges a seeded fetch of an encrypted archive downloads (`Spec/0004-trusted-archives.md
/// §6.10.3`), each at the cost of about the bytes it holds rather than of the sealed blocks that
/// hold it.
///
/// A block opens only whole, so asking for a 300-byte signature record through the blocks that
/// hold it costs 16 KiB. Before ``authenticatedFrom`` (the inner archive's footer) a range is
/// instead downloaded as its blocks' nonces and the ciphertext bytes it covers (from a 64-byte
/// keystream boundary) and decrypted without the tags (``BlockSealer/decryptUnauthenticated(_:nonce:at:)``).
/// Those bytes are authenticated by what the fetch checks anyway before they are used or
/// anything is renamed: the manifest by the footer's manifest digest, every byte before the
/// manifest by the footer's chain digest (`Spec/0001 §12`), chunk records by their keyed ids,
/// every record by its CRC-32. The footer itself is read through ``SealedArchiveSource``, from
/// opened blocks.
struct SealedRangeReader: Sendable {
    /// The remote's inner archive through its opened blocks: the footer.
    let inner: SealedArchiveSource
    /// The remote's outer archive.
    let outer: HTTPArchiveSource
    let sealer: BlockSealer

    /// The inner offset from which reads open whole blocks: the start of the block holding the
    /// footer (the last `Footer.framedLength` bytes). That block is read whole anyway, so the
    /// manifest's bytes in it come from it too.
    var authenticatedFrom: UInt64 {
        let layout = inner.layout
        return layout.innerRange(of: layout.block(holding: inner.size - min(inner.size, UInt64(Footer.framedLength)))).lowerBound
    }

    /// The inner bytes of `range`.
    ///
    /// - Throws: as ``read(ranges:)``.
    func read(_ range: Range<UInt64>) throws(CairnError) -> [UInt8] { try read(ranges: [range])[0] }

    /// The inner bytes of each range, downloaded together (neighbours less than 1 KiB apart in
    /// one request, `HTTPArchiveSource.read(ranges:gap:)`).
    ///
    /// - Throws: `.truncated` for a range past the inner archive's end; what downloading throws
    ///   (`.network`, `.httpStatus`, `.sourceChanged`), and, for the footer, what opening a
    ///   block throws (`.checksumMismatch` naming the block).
    func read(ranges: [Range<UInt64>]) throws(CairnError) -> [[UInt8]] {
        for range in ranges where range.upperBound > inner.size {
            throw CairnError(.truncated, "a read of \(range.count) bytes runs past the archive's end", path: inner.name, offset: range.lowerBound)
        }
        let layout = inner.layout
        let boundary = inner.size == 0 ? 0 : authenticatedFrom
        let nonceLength = UInt64(BlockSealer.nonceByteCount)
        let keystreamBlock = UInt64(BlockSealer.keystreamBlock)
        // Per block of each range before the footer: its nonce, then the ciphertext from the
        // keystream block holding the first byte wanted; consecutive blocks' pieces are a tag
        // apart and merge into one request.
        var pieces: [(range: Int, index: UInt64, from: UInt64, skip: Int, count: Int)] = []
        var asked: [Range<UInt64>] = []
        for (number, range) in ranges.enumerated() {
            let below = range.lowerBound..<min(range.upperBound, max(range.lowerBound, boundary))
            for index in layout.blocks(covering: below) {
                let held = layout.innerRange(of: index)
                let first = max(below.lowerBound, held.lowerBound) - held.lowerBound
                let end = min(below.upperBound, held.upperBound) - held.lowerBound
                let from = first / keystreamBlock * keystreamBlock
                let start = layout.outerRange(of: index).lowerBound
                asked.append(start..<(start + nonceLength))
                asked.append((start + nonceLength + from)..<(start + nonceLength + end))
                pieces.append((number, index, from, Int(first - from), Int(end - first)))
            }
        }
        let downloaded = asked.isEmpty ? [] : try outer.read(ranges: asked, gap: ArchiveRebuilder.Plan.mergeBelow)
        var results = [[UInt8]](repeating: [], count: ranges.count)
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
            results[piece.range] += plaintext[piece.skip...]
        }
        // The footer's bytes, from opened blocks.
        let authenticated = ranges.map { max($0.lowerBound, boundary)..<max($0.upperBound, boundary) }
        let opened = try inner.read(ranges: authenticated.filter { !$0.isEmpty })
        var next = opened.makeIterator()
        for (number, range) in authenticated.enumerated() where !range.isEmpty {
            results[number] += next.next() ?? []
        }
        return results
    }
}
