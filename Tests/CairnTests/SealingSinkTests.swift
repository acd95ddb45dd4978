import CairnTestSupport
import Testing

@testable import Cairn

/// The sealing sink cuts the inner archive into blocks (`Spec/0004-trusted-archives.md §6.2`,
/// §6.3) the same way however its writes are sliced: whole, byte by byte around block
/// boundaries, or at random, and an abandoned sink still hands over every block it sealed.
@Suite("Encrypted archives: the sealing sink")
struct SealingSinkTests {
    static let secrets = SealedArchiveTests.secrets(3)
    static let envelope = EnvelopeRecord(archiveID: [UInt8](repeating: 9, count: 16), keyBlock: secrets.encoded())

    /// The inner bytes `outer` seals, opened block by block (the last as final), or nil when a
    /// block does not open or the layout is not prefix + blocks of 16 KiB + 40.
    static func opened(_ outer: [UInt8], final: Bool = true) throws -> [UInt8]? {
        let prefix = EnvelopeRecord.prelude + envelope.framed()
        guard outer.starts(with: prefix) else { return nil }
        let sealer = try BlockSealer(key: secrets.blockKey, archiveID: envelope.archiveID)
        let sealedSize = Int(envelope.blockSize) + BlockSealer.overhead
        var inner: [UInt8] = []
        var offset = prefix.count
        var index: UInt64 = 0
        while offset < outer.count {
            let end = min(outer.count, offset + sealedSize)
            var plaintext = [UInt8](repeating: 0, count: end - offset - BlockSealer.overhead)
            let isFinal = final && end == outer.count
            let ok = outer[offset..<end].withUnsafeBytes { sealed in
                plaintext.withUnsafeMutableBytes { sealer.open(sealed, index: index, isFinal: isFinal, into: $0) }
            }
            guard ok else { return nil }
            inner += plaintext
            offset = end
            index += 1
        }
        return inner
    }

    static func sealed(_ inner: [UInt8], in slices: [Int]) async throws -> [UInt8] {
        let base = PublicAPITests.CollectingSink()
        let sink = try SealingSink(base: base, envelope: envelope, secrets: secrets)
        var offset = 0
        for length in slices {
            try await sink.write(Array(inner[offset..<(offset + length)]))
            offset += length
        }
        try await sink.write(Array(inner[offset...]))
        try await sink.finish()
        #expect(base.state.withLock(\.finished) == 1)
        return base.state.withLock(\.bytes)
    }

    @Test("§6.3: the same blocks, in order, whatever the slicing of the writes (empty, 1 byte, a block ± 1, several blocks, random)")
    func slicing() async throws {
        var generator = SeededGenerator(seed: 2525)
        let block = Int(Self.envelope.blockSize)
        let inner = generator.bytes(7 * block + 1234)
        var random: [Int] = []
        var left = inner.count
        while left > 40_000 {
            let n = Int(generator.next() % 40_000)
            random.append(n)
            left -= n
        }
        let slicings: [[Int]] = [
            [], [0, 0], [1, block - 2, 1, 0, block, block + 1, block - 1], [block], [block + 1], [3 * block], [2 * block - 1, 1, 1],
            Array(repeating: 999, count: 40), random,
        ]
        for slices in slicings {
            let outer = try await Self.sealed(inner, in: slices)
            #expect(try Self.opened(outer) == inner, "slices \(slices.prefix(8))")
            let prefix = EnvelopeRecord.prelude.count + Self.envelope.framed().count
            #expect(outer.count == prefix + inner.count + 8 * BlockSealer.overhead, "8 blocks, the last one partial")
        }
        // A length that is a whole number of blocks ends with a full final block.
        let whole = Array(inner[0..<(2 * block)])
        let outer = try await Self.sealed(whole, in: [block, block])
        #expect(try Self.opened(outer) == whole)
    }

    @Test("§6.3: abandon hands over the blocks still being sealed (a resumable prefix), but never seals the last one as final")
    func abandonWritesSealedBlocks() async throws {
        var generator = SeededGenerator(seed: 2526)
        let block = Int(Self.envelope.blockSize)
        let inner = generator.bytes(3 * block + 100)
        let base = PublicAPITests.CollectingSink()
        let sink = try SealingSink(base: base, envelope: Self.envelope, secrets: Self.secrets)
        try await sink.write(Array(inner[0..<(2 * block + 5)]))
        try await sink.write(Array(inner[(2 * block + 5)...]))
        await sink.abandon()
        let state = base.state.withLock { $0 }
        #expect(state.abandoned == 1 && state.finished == 0)
        // Blocks 0-2 are whole and followed by more bytes: all sealed, none final; the last
        // 100 bytes were never sealed.
        #expect(try Self.opened(state.bytes, final: false) == Array(inner[0..<(3 * block)]))
    }

    @Test("§6.10.3: any piece of a sealed block's ciphertext from a 64-byte boundary decrypts without the tag to the plaintext there (the keystream from counter 1 + offset / 64); a flipped byte flips the same plaintext byte, which is why a fetch checks those bytes by the inner archive's own rules; a misaligned offset is refused")
    func unauthenticatedPieces() throws {
        var generator = SeededGenerator(seed: 61003)
        let sealer = try BlockSealer(key: generator.bytes(32), archiveID: generator.bytes(16))
        let plaintext = generator.bytes(16384)
        let sealed = plaintext.withUnsafeBytes { sealer.seal($0, index: 7, isFinal: false) }
        let nonce = Array(sealed[0..<BlockSealer.nonceByteCount])
        let ciphertext = Array(sealed[BlockSealer.nonceByteCount..<(sealed.count - BlockSealer.tagByteCount)])
        for _ in 0..<200 {
            let from = Int.random(in: 0..<(plaintext.count / 64), using: &generator) * 64
            let to = Int.random(in: from...plaintext.count, using: &generator)
            let piece = Array(ciphertext[from..<to])
            let opened = nonce.withUnsafeBytes { n in piece.withUnsafeBytes { sealer.decryptUnauthenticated($0, nonce: n, at: from) } }
            #expect(opened == Array(plaintext[from..<to]), "\(from)..<\(to)")
        }
        var flipped = Array(ciphertext[128..<256])
        flipped[5] ^= 0x20
        let opened = nonce.withUnsafeBytes { n in flipped.withUnsafeBytes { sealer.decryptUnauthenticated($0, nonce: n, at: 128) } }
        var expected = Array(plaintext[128..<256])
        expected[5] ^= 0x20
        #expect(opened == expected)
        let misaligned = nonce.withUnsafeBytes { n in flipped.withUnsafeBytes { sealer.decryptUnauthenticated($0, nonce: n, at: 100) } }
        #expect(misaligned == nil)
    }
}
