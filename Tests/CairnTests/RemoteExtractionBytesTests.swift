import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import Cairn

/// What a remote extraction costs on the wire, counted by nginx (`$body_bytes_sent` of every
/// request): each stored record crosses it at most once per run, however many files use it, and a
/// resume fetches no more than what is missing (issue 23, fault 4).
extension RemoteHTTPTests {
    /// A tree with deduplicated content: a 5 MiB file and 3 copies, small files (packed) with
    /// copies of their own, and a few distinct files of 1 MiB between them.
    static func deduplicatedTree(seed: UInt64 = 23) -> TreeBuilder {
        var generator = SeededGenerator(seed: seed)
        var tree = TreeBuilder()
        tree.directory("t")
        let big = generator.bytes(5 << 20)
        let small = (0..<6).map { Array("small \($0)\n".utf8) + generator.bytes(700 + $0 * 97) }
        for copy in 0..<4 {
            tree.directory("t/c\(copy)")
            tree.file("t/c\(copy)/big.bin", big)
            tree.file("t/c\(copy)/own.bin", generator.bytes(1 << 20))
            for (index, bytes) in small.enumerated() { tree.file("t/c\(copy)/s\(index).txt", bytes) }
        }
        return tree
    }

    /// `www/a.cairn` of ``deduplicatedTree(seed:)`` served by nginx.
    static func servedDeduplicated(_ directory: TemporaryDirectory) async throws -> (server: NginxServer, archive: String) {
        let www = directory.appending("www")
        try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
        let path = try await Remote.archive(Self.deduplicatedTree(), in: directory)
        try FileManager.default.moveItem(atPath: path, toPath: www + "/a.cairn")
        return (try NginxServer(root: www), www + "/a.cairn")
    }

    /// Body bytes nginx sent for the requests logged after the first `before`.
    static func bodyBytes(_ server: NginxServer, after before: Int) -> (bytes: UInt64, log: [NginxServer.AccessLogEntry]) {
        let log = Array(server.accessLog(waitingFor: before + 1).dropFirst(before))
        return (log.reduce(0) { $0 + $1.bodyBytesSent }, log)
    }

    @Test("a selection whose files share chunks fetches each stored record once: at most the archive's size, and the same tree")
    func deduplicatedSelectionFetchesOnce() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (server, local) = try await Self.servedDeduplicated(directory)
        defer { server.stop() }
        let size = try FileStatus.of(Array(local.utf8)).size
        let result = try Self.cairn(["extract", server.url("a.cairn"), "-C", directory.appending("out"), "t"])
        #expect(result.status == 0, "\(result.stderr)")
        let (transferred, log) = Self.bodyBytes(server, after: 0)
        print("deduplicated remote extract: \(transferred) bytes in \(log.count) requests for a \(size)-byte archive")
        // Before: the 5 MiB file's chunks were fetched once per copy (about 4 times the archive's
        // stored bytes). Now each record at most once; what may cross twice is small: the header's
        // block, which holds the first records too, and records inside the gaps merged into a
        // request (up to 64 KiB apart).
        #expect(transferred <= size + 2 * HTTPArchiveSource.blockSize, "\(transferred) bytes for a \(size)-byte archive: \(log)")
        let expected = try Self.cairn(["extract", local, "-C", directory.appending("expected")])
        #expect(expected.status == 0)
        let a = try TreeSnapshot(at: directory.appending("out/t"), directoryTimes: false)
        let b = try TreeSnapshot(at: directory.appending("expected/t"), directoryTimes: false)
        #expect(a == b, "\(a.diff(b))")
    }

    @Test(
        "extract URL --resume after a cut fetches no more than what is missing, each record once, and ends with the same tree",
        arguments: [3, 7])
    func resumeAfterEarlyCutFetchesOnlyWhatIsMissing(tenthsBeforeTheCut: Int) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (server, local) = try await Self.servedDeduplicated(directory)
        defer { server.stop() }
        let bytes = try RawFileSystem.contents(ofFile: Array(local.utf8))
        // The stream ends after 30% of the archive (inside the first 5 MiB file: nothing but
        // directories is complete), or after 70% (the first copy is complete, and the later
        // copies of its 5 MiB file are read back from it).
        try RawFileSystem.writeFile(
            Array((server.root + "/cut.cairn").utf8), Array(bytes[0..<(bytes.count * tenthsBeforeTheCut / 10)]))
        let out = directory.appending("out")
        let cut = try Self.cairn(["extract", server.url("cut.cairn"), "-C", out])
        #expect(cut.status == 1 && cut.stderr.contains("--resume"), "\(cut.stderr)")
        // What the journal holds decides what is missing: everything from its last commit's entry on.
        let journal = try String(contentsOfFile: directory.appending(".out.cairn-staging/.cairn-journal"), encoding: .utf8)
        let committed = try #require(
            journal.split(separator: "\n").last { $0.hasPrefix("commit ") }.flatMap { Int($0.split(separator: " ")[1]) })
        let reader = try ArchiveReader(path: local)
        defer { reader.close() }
        let missing = UInt64(bytes.count) - reader.manifest.entries[committed].recordOffset
        let before = server.accessLog().count
        let resumed = try Self.cairn(["extract", server.url("a.cairn"), "-C", out, "--resume"])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        let (transferred, log) = Self.bodyBytes(server, after: before)
        // Beyond the missing records: the header's block and the commit that proves the journal
        // (one small block each), and small records inside the gaps merged into a request.
        let allowance = 3 * HTTPArchiveSource.blockSize
        print("remote resume after \(tenthsBeforeTheCut * 10)%: \(transferred) bytes in \(log.count) requests; \(missing) of \(bytes.count) missing")
        #expect(transferred <= missing + allowance, "\(transferred) bytes for \(missing) missing: \(log)")
        let expected = try Self.cairn(["extract", local, "-C", directory.appending("expected")])
        #expect(expected.status == 0)
        let a = try TreeSnapshot(at: out + "/t")
        let b = try TreeSnapshot(at: directory.appending("expected/t"))
        #expect(a == b, "\(a.diff(b))")
    }

    @Test("extract URL --resume after a cut inside a large file keeps its verified chunks and fetches only the rest of it")
    func resumeAfterCutInsideAFileFetchesOnlyItsRest() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let www = directory.appending("www")
        try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
        var generator = SeededGenerator(seed: 2304)
        var tree = TreeBuilder()
        tree.directory("t")
        let content = generator.bytes(24 << 20)
        tree.file("t/big.bin", content)
        let local = www + "/a.cairn"
        try FileManager.default.moveItem(atPath: try await Remote.archive(tree, in: directory), toPath: local)
        let server = try NginxServer(root: www)
        defer { server.stop() }
        let bytes = try RawFileSystem.contents(ofFile: Array(local.utf8))
        // The stream ends after 60% of the archive, inside the file's chunks.
        let cutAt = bytes.count * 6 / 10
        try RawFileSystem.writeFile(Array((server.root + "/cut.cairn").utf8), Array(bytes[0..<cutAt]))
        let out = directory.appending("out")
        let cut = try Self.cairn(["extract", server.url("cut.cairn"), "-C", out])
        #expect(cut.status == 1 && cut.stderr.contains("--resume"), "\(cut.stderr)")
        let staged = try FileStatus.of(Array(directory.appending(".out.cairn-staging/root/t/big.bin").utf8)).size
        // What is missing: every chunk record from the first chunk the staged file does not hold whole.
        let reader = try ArchiveReader(path: local)
        defer { reader.close() }
        let index = try #require(reader.manifest.entries.firstIndex { $0.entry.path == "t/big.bin" })
        let rows = reader.references(ofEntry: index).map { reader.manifest.chunks[Int($0)] }
        #expect(rows.count >= 4, "the file must span several chunks")
        var heldLength: UInt64 = 0
        var firstMissing = rows.endIndex
        for (number, row) in rows.enumerated() {
            guard heldLength + UInt64(row.rawLength) <= staged else {
                firstMissing = number
                break
            }
            heldLength += UInt64(row.rawLength)
        }
        #expect(heldLength > 0 && firstMissing < rows.count, "the cut must leave part of the file staged: \(staged) bytes")
        let missing = UInt64(bytes.count) - (firstMissing < rows.count ? rows[firstMissing].offset : UInt64(bytes.count))
        let before = server.accessLog().count
        let resumed = try Self.cairn(["extract", server.url("a.cairn"), "-C", out, "--resume"])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        let (transferred, log) = Self.bodyBytes(server, after: before)
        // Beyond the missing records: the header's block, the commit that proves the journal and
        // the file's entry record (one small block each).
        let allowance = 3 * HTTPArchiveSource.blockSize
        print("remote resume inside a file: \(transferred) bytes in \(log.count) requests; \(staged) staged, \(missing) of \(bytes.count) missing")
        #expect(transferred <= missing + allowance, "\(transferred) bytes for \(missing) missing: \(log)")
        #expect(try RawFileSystem.contents(ofFile: Array((out + "/t/big.bin").utf8)) == content)
    }
}
