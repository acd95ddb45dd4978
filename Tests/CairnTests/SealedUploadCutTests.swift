import CairnTestSupport
import Testing

@testable import Cairn

/// The cut points a `SealingSink` offers a sink that cuts at commits (an object store's parts,
/// `Spec/0004-trusted-archives.md §6.9`): sealed-block boundaries only, each the first at or
/// after an inner commit, each with the SHA-256 of the plaintext before it.
@Suite("Encrypted archives: cut points of an upload")
struct SealedUploadCutTests {
    /// Collects the outer bytes and the cut points offered.
    final class Collector: CommitAwareArchiveSink {
        var bytes: [UInt8] = []
        var cuts: [CommitPoint] = []
        var finished = false
        func write(_ bytes: [UInt8]) async throws { self.bytes += bytes }
        func write(_ bytes: [UInt8], commits: [CommitPoint]) async throws {
            for commit in commits { #expect(commit.end <= UInt64(self.bytes.count + bytes.count), "a cut lies in the bytes given") }
            self.bytes += bytes
            cuts += commits
        }
        func finish() async throws { finished = true }
        func abandon() async {}
    }

    @Test(
        "§6.9: cuts at E + k(B+40) for k = ⌈commit / B⌉, one per boundary, each with the SHA-256 of the inner bytes before k·B; fed whole or in random slices alike",
        arguments: [false, true])
    func cutsAtBlockBoundaries(sliced: Bool) async throws {
        let sealing = SealedArchiveTests.sealing(7, archiveID: 3)
        let blockSize = Int(sealing.envelope.blockSize)
        var generator = SeededGenerator(seed: 69)
        let inner = generator.bytes(blockSize * 9 + 123)
        // Commits inside blocks, exactly at a boundary, two in one block, and one in the last block.
        let commitEnds: [Int] = [100, blockSize * 2, blockSize * 3 + 5, blockSize * 3 + 900, blockSize * 6 + 1, blockSize * 9 + 50]
        let collector = Collector()
        let sink = try SealingSink(base: collector, envelope: sealing.envelope, secrets: sealing.secrets)
        let zero = try #require(Digest(bytes: [UInt8](repeating: 0, count: 32)))
        var offset = 0
        while offset < inner.count {
            let count = sliced ? min(inner.count - offset, Int.random(in: 1...(blockSize * 3), using: &generator)) : inner.count
            let end = offset + count
            let commits = commitEnds.filter { $0 > offset && $0 <= end }.map {
                CommitPoint(end: UInt64($0), chainDigest: zero)
            }
            try await sink.write(Array(inner[offset..<end]), commits: commits)
            offset = end
        }
        try await sink.finish()
        #expect(collector.finished)
        let dataStart = (EnvelopeRecord.prelude + sealing.envelope.framed()).count
        // Block 9 (holding the last commit) is the final one, sealed at finish: no cut is offered there.
        let expectedBlocks = [1, 2, 4, 7]
        #expect(collector.cuts.map(\.end) == expectedBlocks.map { UInt64(dataStart + $0 * (blockSize + 40)) })
        for (cut, k) in zip(collector.cuts, expectedBlocks) {
            #expect(cut.chainDigest == (try SHA256.hash(Array(inner[0..<(k * blockSize)]))), "the digest of the plaintext before block \(k)")
        }
        // Every block sealed once: nine whole ones and the final one of 123 bytes.
        #expect(collector.bytes.count == dataStart + 9 * (blockSize + 40) + 123 + 40)
    }
}
