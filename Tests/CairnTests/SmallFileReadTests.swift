import CairnTestSupport
import Glibc
import Testing

@testable import Cairn

/// What `create` does per small file so that it reads it once and stats it once by descriptor
/// (issue 9, `create` on 100,000 small files): the SQLite test on bytes already read, the
/// directory listing's type hints and byte order, and the one-probe chunk claims.
@Suite("Small-file reads")
struct SmallFileReadTests {
    @Test("isDatabase(firstBytes:) is true exactly when the bytes begin with the 16-byte SQLite header")
    func databaseHeaderFromBytes() {
        let header = Array("SQLite format 3".utf8) + [0]
        func check(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBytes { SQLiteSnapshot.isDatabase(firstBytes: $0) } }
        #expect(check(header))
        #expect(check(header + [0x10, 0x00, 2, 2] + [UInt8](repeating: 7, count: 100)))
        #expect(!check(Array(header.prefix(15))), "one byte short")
        #expect(!check([]))
        var altered = header
        altered[15] = 0x20
        #expect(!check(altered), "no NUL after the text")
        #expect(!check(Array("sqlite format 3".utf8) + [0]), "case matters")
        #expect(!check([0] + header), "not at the start")
    }

    @Test("isDatabase(_:) on a descriptor answers as isDatabase(firstBytes:) on the file's bytes")
    func databaseHeaderFromFile() throws {
        let directory = try TemporaryDirectory(prefix: "cairn-smallfile")
        defer { directory.remove() }
        let cases: [[UInt8]] = [Array("SQLite format 3".utf8) + [0, 1, 2], Array("SQLite format 3".utf8), Array("plain text file".utf8) + [0]]
        for (index, bytes) in cases.enumerated() {
            let path = directory.appending("f\(index)")
            try FileSystem.writeDurably(bytes, to: path, mode: 0o644, syncing: false)
            let file = try FileDescriptor.open(path, flags: O_RDONLY)
            defer { _ = try? file.close() }
            #expect(SQLiteSnapshot.isDatabase(file) == bytes.withUnsafeBytes { SQLiteSnapshot.isDatabase(firstBytes: $0) })
            #expect(SQLiteSnapshot.isDatabase(file) == (index == 0))
        }
    }

    @Test("a directory's entries say which names are regular files, and come in byte order, as names(in:) does")
    func directoryEntries() throws {
        let directory = try TemporaryDirectory(prefix: "cairn-smallfile")
        defer { directory.remove() }
        var tree = TreeBuilder()
        tree.file("b", Array("x".utf8))
        tree.file(bytes: [0xFF, 0x41], Array("not UTF-8".utf8))
        tree.file("a", [])
        tree.file("ab", Array("y".utf8))
        tree.directory("a-dir")
        tree.symlink("a-link", target: "b")
        tree.fifo("a-fifo")
        tree.hardLink("b2", to: "b")
        try tree.materialize(at: directory.appending("t"))
        let opened = try FileDescriptor.open(directory.appending("t"), flags: O_RDONLY | O_DIRECTORY)
        defer { _ = try? opened.close() }
        let entries = try DirectoryReader.entries(in: opened)
        let names = entries.map(\.name)
        #expect(names == [Array("a".utf8), Array("a-dir".utf8), Array("a-fifo".utf8), Array("a-link".utf8), Array("ab".utf8), Array("b".utf8), Array("b2".utf8), [0xFF, 0x41]])
        #expect(try DirectoryReader.names(in: opened) == names)
        let regular = Set(entries.filter(\.isRegularFile).map { PathBytes.display($0.name) })
        #expect(regular == ["a", "ab", "b", "b2", "\\xffA"])
    }

    @Test("precedes orders byte strings as lexicographicallyPrecedes does", arguments: [1, 2])
    func byteOrder(seed: UInt64) {
        var generator = SeededGenerator(seed: seed)
        let alphabet: [UInt8] = [0x00, 0x2E, 0x41, 0x61, 0x7F, 0x80, 0xFF]
        func name() -> [UInt8] {
            (0..<Int.random(in: 0...6, using: &generator)).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] }
        }
        for _ in 0..<3000 {
            let a = name()
            let b = Bool.random(using: &generator) ? a + name() : name()
            #expect(DirectoryReader.precedes(a, b) == a.lexicographicallyPrecedes(b), "\(a) \(b)")
            #expect(DirectoryReader.precedes(b, a) == b.lexicographicallyPrecedes(a), "\(b) \(a)")
        }
    }

    @Test("a chunk id is produced by its earliest ordinal: later claims skip it, an earlier one takes it over")
    func chunkClaims() throws {
        let claims = ChunkClaims()
        let id = try SHA256.hash([1, 2, 3])
        let other = try SHA256.hash([4, 5, 6])
        #expect(claims.claim(id, ordinal: 5))
        #expect(!claims.claim(id, ordinal: 7), "a later chunk with the same id")
        #expect(claims.claim(id, ordinal: 5), "the claimer asked again")
        #expect(claims.claim(other, ordinal: 6), "another id")
        #expect(claims.claim(id, ordinal: 3), "an earlier chunk takes the id over")
        #expect(!claims.claim(id, ordinal: 5), "the first claimer is now later")
        #expect(!claims.claim(id, ordinal: 4))
        #expect(claims.claim(id, ordinal: 3))
        #expect(!claims.claim(other, ordinal: 9))
    }
}
