import CairnTestSupport
import Testing

@testable import Cairn

/// The writer's dedup index keyed by 8-byte id prefixes (issue 9, peak RSS): ids that share
/// their first 8 bytes stay apart, through sets, replacements and removals.
@Suite("Chunk index")
struct ChunkIndexTests {
    @Test("ids sharing their first 8 bytes answer as a dictionary of full ids does", arguments: [1, 2])
    func prefixCollisionsStayApart(seed: UInt64) {
        var g = SeededGenerator(seed: seed)
        // 64 ids over 4 prefixes: most share a prefix with others.
        let pool: [Digest] = (0..<64).map { n in
            var bytes = [UInt8](repeating: UInt8(n % 4), count: 8)
            bytes += (0..<24).map { _ in UInt8.random(in: 0...255, using: &g) }
            return Digest(bytes: bytes) ?? .zero
        }
        var ids: [Digest] = []
        var index = ChunkIndex()
        var mirror: [Digest: UInt32] = [:]
        for step in 0..<4000 {
            let id = pool[Int.random(in: 0..<pool.count, using: &g)]
            if Int.random(in: 0..<4, using: &g) == 0 {
                index.remove(id, in: ids)
                mirror[id] = nil
            } else {
                ids.append(id)
                let value = UInt32(ids.count - 1)
                index.set(id, value, in: ids)
                mirror[id] = value
            }
            let probe = pool[Int.random(in: 0..<pool.count, using: &g)]
            #expect(index.lookup(probe, in: ids) == mirror[probe], "step \(step)")
        }
        for id in pool { #expect(index.lookup(id, in: ids) == mirror[id]) }
    }
}
