import CairnTestSupport
import Testing

@testable import Cairn

/// The manifest's packed entry table (issue 9, peak RSS for 100,000 files): every field of every
/// row comes back exactly as it went in, through appends, rewrites of any row and replacements.
@Suite("Packed entry table")
struct EntryTableTests {
    typealias Row = Manifest.EntryRow

    static func digest(_ seed: UInt8) -> Digest {
        Digest(bytes: (0..<32).map { seed &+ UInt8($0) }) ?? .zero
    }

    /// Rows at the edges of every field.
    static var edgeRows: [Row] {
        var rows: [Row] = []
        func row(_ entry: ArchiveEntry, offset: UInt64 = 0, first: UInt64 = 0, count: UInt64 = 0, digest: Digest = .zero, pack: Int? = nil) {
            rows.append(Row(recordOffset: offset, firstReference: first, referenceCount: count, contentDigest: digest, entry: entry, pack: pack))
        }
        // An empty name, every number zero.
        row(ArchiveEntry(pathBytes: [], kind: .file, permissions: 0, modificationTime: 0))
        // A very long path of non-UTF-8 bytes; every number at its maximum.
        var huge = ArchiveEntry(
            pathBytes: (0..<70_000).map { UInt8(truncatingIfNeeded: $0 * 131 + 0x80) }, kind: .file, permissions: 0o7777,
            modificationTime: Timestamp(seconds: .max, nanoseconds: 999_999_999), size: .max, userID: .max, groupID: .max)
        huge.chunkCount = .max
        huge.contentDigest = digest(7)
        row(huge, offset: .max, first: .max, count: .max, digest: digest(7), pack: .max)
        // The earliest time, a negative chunk count, an entry digest unlike the row's.
        var early = ArchiveEntry(pathBytes: [0xFF, 0xFE, 0x00, 0x2F], kind: .file, permissions: 0o644, modificationTime: Timestamp(seconds: .min))
        early.chunkCount = -1
        early.contentDigest = digest(200)
        row(early, digest: digest(1), pack: 0)
        // An entry digest of zero bytes, a row digest of zero (the flags must not confuse them).
        var zeroDigest = ArchiveEntry(pathBytes: Array("z".utf8), kind: .file, permissions: 0o600, modificationTime: 1)
        zeroDigest.contentDigest = .zero
        row(zeroDigest, digest: digest(3))
        // Nanoseconds as set directly, without the initializer's carry.
        var odd = ArchiveEntry(pathBytes: Array("odd".utf8), kind: .directory, permissions: 0o755, modificationTime: 0)
        odd.modificationTime.nanoseconds = .max
        row(odd)
        // Links, devices, extended attributes with empty and binary values.
        row(ArchiveEntry(pathBytes: Array("l".utf8), kind: .symlink, permissions: 0o777, modificationTime: 5, linkTarget: Array(repeating: 0x80, count: 5000)))
        row(ArchiveEntry(pathBytes: Array("dev".utf8), kind: .blockDevice, permissions: 0o660, modificationTime: 0, device: .init(major: .max, minor: 0)))
        row(ArchiveEntry(pathBytes: Array("dev0".utf8), kind: .characterDevice, permissions: 0, modificationTime: 0, device: .init(major: 0, minor: 0)))
        row(
            ArchiveEntry(
                pathBytes: Array("x".utf8), kind: ArchiveEntry.Kind(rawValue: 250), permissions: 0, modificationTime: 0,
                extendedAttributes: [
                    .init(name: Array("user.empty".utf8), value: []), .init(name: [0xC3, 0x28], value: (0..<300).map { UInt8($0 % 256) }),
                    .init(name: [], value: [0]),
                ]))
        return rows
    }

    /// A random row, small numbers and large alike.
    static func randomRow(_ g: inout SeededGenerator) -> Row {
        func number(_ g: inout SeededGenerator) -> UInt64 {
            UInt64.random(in: 0...UInt64.max, using: &g) >> UInt64.random(in: 0...63, using: &g)
        }
        let length = Int.random(in: 0...40, using: &g)
        var entry = ArchiveEntry(
            pathBytes: (0..<length).map { _ in UInt8.random(in: 0...255, using: &g) }, kind: ArchiveEntry.Kind(rawValue: UInt8.random(in: 1...7, using: &g)),
            permissions: UInt32.random(in: 0...0o7777, using: &g),
            modificationTime: Timestamp(seconds: Int64(bitPattern: number(&g)), nanoseconds: UInt32.random(in: 0..<1_000_000_000, using: &g)),
            size: number(&g), userID: UInt32.random(in: 0...UInt32.max, using: &g), groupID: UInt32.random(in: 0...UInt32.max, using: &g))
        if Bool.random(using: &g) { entry.contentDigest = digest(UInt8.random(in: 0...255, using: &g)) }
        entry.chunkCount = Int(truncatingIfNeeded: number(&g))
        return Row(
            recordOffset: number(&g), firstReference: number(&g), referenceCount: number(&g),
            contentDigest: Bool.random(using: &g) ? digest(UInt8.random(in: 0...255, using: &g)) : (entry.contentDigest ?? .zero),
            entry: entry, pack: Bool.random(using: &g) ? Int(truncatingIfNeeded: number(&g)) : nil)
    }

    @Test("every field of every edge row comes back equal")
    func edgeRowsRoundTrip() {
        let rows = Self.edgeRows
        var table = Manifest.EntryTable()
        for row in rows { table.append(row) }
        #expect(table.count == rows.count)
        for (index, row) in rows.enumerated() {
            #expect(table[index] == row, "row \(index)")
        }
        #expect(table == Manifest.EntryTable(rows))
        #expect(Array(table) == rows)
    }

    @Test("appends, rewrites of any row (longer, shorter, same length), tail cuts and middle replacements match an array", arguments: [1, 2, 3])
    func mutationsMatchAnArray(seed: UInt64) {
        var g = SeededGenerator(seed: seed)
        var mirror: [Row] = []
        var table = Manifest.EntryTable()
        for step in 0..<3000 {
            switch Int.random(in: 0..<10, using: &g) {
            case 0..<4:
                let row = Self.randomRow(&g)
                mirror.append(row)
                table.append(row)
            case 4..<8 where !mirror.isEmpty:
                let index = Int.random(in: 0..<mirror.count, using: &g)
                var row = mirror[index]
                switch Int.random(in: 0..<3, using: &g) {
                case 0: row = Self.randomRow(&g)
                case 1: row.entry.size = UInt64.random(in: 0...UInt64.max, using: &g)
                default: row.referenceCount = 0
                }
                mirror[index] = row
                table[index] = row
            case 8 where !mirror.isEmpty:
                let cut = Int.random(in: 0...mirror.count, using: &g)
                mirror.removeSubrange(cut...)
                table.removeSubrange(cut...)
            case 9 where !mirror.isEmpty:
                let lower = Int.random(in: 0..<mirror.count, using: &g)
                let upper = Int.random(in: lower...mirror.count, using: &g)
                let new = (0..<Int.random(in: 0...3, using: &g)).map { _ in Self.randomRow(&g) }
                mirror.replaceSubrange(lower..<upper, with: new)
                table.replaceSubrange(lower..<upper, with: new)
            default:
                continue
            }
            guard step % 100 == 0 else { continue }
            #expect(Array(table) == mirror, "step \(step)")
        }
        #expect(Array(table) == mirror)
        #expect(table == Manifest.EntryTable(mirror))
        // Dropping the spare capacity (and the bytes of rows written elsewhere) keeps every row.
        table.shrinkToFit()
        #expect(Array(table) == mirror)
        table.append(Self.randomRow(&g))
        #expect(Array(table.prefix(mirror.count)) == mirror)
    }

    @Test("rewriting rows in place does not grow the table without bound")
    func rewritesAreCompacted() {
        var g = SeededGenerator(seed: 4)
        var table = Manifest.EntryTable((0..<1000).map { _ in Self.randomRow(&g) })
        let before = table.storedByteCount
        for round in 0..<20 {
            for index in 0..<table.count {
                var row = table[index]
                row.entry.size = round % 2 == 0 ? .max : 0
                table[index] = row
            }
        }
        #expect(table.storedByteCount <= 3 * before, "\(before) → \(table.storedByteCount) bytes")
    }

    @Test("a small file's row takes a few dozen bytes, not a struct of 200 and a path block")
    func rowsAreCompact() {
        var table = Manifest.EntryTable()
        for index in 0..<10_000 {
            var entry = ArchiveEntry(
                pathBytes: Array("dir-\(index / 1000)/file-\(index).txt".utf8), kind: .file, permissions: 0o644,
                modificationTime: Timestamp(seconds: 1_764_000_000 + Int64(index), nanoseconds: 123_456_789), size: 1500, userID: 1000,
                groupID: 1000)
            entry.chunkCount = 1
            table.append(.init(recordOffset: 4096, firstReference: UInt64(index), referenceCount: 1, contentDigest: .zero, entry: entry, pack: index / 500))
        }
        #expect(table.storedByteCount / table.count < 64, "\(table.storedByteCount / table.count) bytes a row")
    }
}
