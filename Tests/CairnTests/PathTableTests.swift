import CairnTestSupport
import Testing

@testable import Cairn

/// The compact path set of `create` and `extract` (issue 9, peak RSS for 100,000 files): it
/// answers as a `Dictionary` keyed by the paths does, through inserts, removals and growth.
@Suite("Path table")
struct PathTableTests {
    @Test("inserts, lookups and removals of random paths (empty, long, non-UTF-8, sharing prefixes) match a dictionary", arguments: [1, 2, 3])
    func matchesADictionary(seed: UInt64) {
        var g = SeededGenerator(seed: seed)
        var table = PathTable()
        var mirror: [[UInt8]: UInt8] = [:]
        var known: [[UInt8]] = [[], Array(repeating: 0xFF, count: 5000)]
        for step in 0..<20_000 {
            let path: [UInt8]
            if !known.isEmpty, Bool.random(using: &g) {
                path = known[Int.random(in: 0..<known.count, using: &g)]
            } else {
                let base = known.isEmpty ? [] : known[Int.random(in: 0..<known.count, using: &g)].prefix(6)
                path = Array(base) + (0..<Int.random(in: 0...12, using: &g)).map { _ in UInt8.random(in: 0...255, using: &g) }
                known.append(path)
            }
            switch Int.random(in: 0..<10, using: &g) {
            case 0..<6:
                let value = UInt8.random(in: 0...255, using: &g)
                let inserted = table.insert(path, value: value)
                #expect(inserted == (mirror[path] == nil), "step \(step)")
                if mirror[path] == nil { mirror[path] = value }
            case 6..<8:
                table.remove(path)
                mirror[path] = nil
            default:
                #expect(table.value(of: path) == mirror[path], "step \(step)")
            }
        }
        #expect(table.count == mirror.count)
        for path in known {
            #expect(table.value(of: path) == mirror[path])
            #expect(table.contains(path) == (mirror[path] != nil))
        }
    }
}
