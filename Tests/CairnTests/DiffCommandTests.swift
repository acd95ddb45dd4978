import CairnTestSupport
import Foundation
import Glibc
import Testing

import Cairn

/// `cairn diff ARCHIVE DIR` and `ArchiveDiff` (`Spec/0003-command-line.md §12`): content is
/// compared by content digest without extracting.
@Suite("Diff")
struct DiffCommandTests {
    /// tree/ with a multi-chunk file, a small file, a packed file larger than the average chunk, an empty file, a directory, a symlink, a hard
    /// link and a name that is not UTF-8.
    static func tree() -> TreeBuilder {
        var generator = SeededGenerator(seed: 0xD1FF)
        var tree = TreeBuilder()
        tree.directory("tree")
        tree.directory("tree/docs", mode: 0o750, mtime: 1_700_000_000_000_000_001)
        tree.file("tree/docs/big.bin", generator.bytes(180 * 1024), mode: 0o600)
        tree.file("tree/docs/a.txt", Array("hello\n".utf8))
        // Packed (2.0) as one chunk, though the cut points would make several.
        tree.file("tree/docs/mid.bin", generator.bytes(40 * 1024))
        tree.file("tree/empty", [])
        tree.file(bytes: Array("tree/caf".utf8) + [0xE9], Array("latin-1 name\n".utf8))
        tree.symlink("tree/link", target: "docs/a.txt")
        tree.hardLink("tree/hard", to: "tree/docs/a.txt")
        return tree
    }

    static let chunking = "cdc:4k:16k:64k"

    /// Materialises the tree at WORK/src and archives it as WORK/tree.cairn.
    static func fixture(_ work: TemporaryDirectory) throws -> String {
        try tree().materialize(at: work.appending("src"))
        let archive = work.appending("tree.cairn")
        let create = try BehaviourCLI.run(["create", "-q", "--chunking", chunking, "-o", archive, "tree"], in: work.appending("src"))
        guard create.status == 0 else { throw CairnError(.io, "create failed: \(create.stderr)") }
        return archive
    }

    @Test("an identical tree: no output, exit 0; the same after extracting it")
    func identical() throws {
        let work = try TemporaryDirectory(prefix: "cairn-diff-same")
        defer { work.remove() }
        let archive = try Self.fixture(work)
        let result = try BehaviourCLI.run(["diff", archive, work.appending("src")])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.isEmpty)
        let json = try BehaviourCLI.run(["diff", "--json", archive, work.appending("src")])
        #expect(json.status == 0)
        #expect(json.stdout == "[]\n")
        #expect(try BehaviourCLI.run(["extract", "-q", archive, "-C", work.appending("out")]).status == 0)
        let extracted = try BehaviourCLI.run(["diff", archive, work.appending("out")])
        #expect(extracted.status == 0, "an extracted tree is identical: \(extracted.stdout)\(extracted.stderr)")
    }

    @Test("each kind of difference is found, one line each, exit 1")
    func everyKind() throws {
        let work = try TemporaryDirectory(prefix: "cairn-diff-kinds")
        defer { work.remove() }
        let archive = try Self.fixture(work)
        let root = work.appending("src/tree")
        let time = TreeBuilder.defaultTime
        // Content with the same size: only the digest can tell.
        var big = try RawFileSystem.contents(ofFile: Array((root + "/docs/big.bin").utf8))
        big[100_000] ^= 0xFF
        try Self.rewrite(root + "/docs/big.bin", big, mode: 0o600, mtime: time)
        // Content with another size, and a new mode.
        unlink(root + "/empty")
        try Self.rewrite(root + "/empty", Array("now full\n".utf8), mode: 0o644, mtime: time)
        chmod(root + "/docs/a.txt", 0o600)
        // mtime only.
        try RawFileSystem.setModificationTime(Array("caf".utf8) + [0xE9], in: try RawFileSystem.openDirectory(Array(root.utf8)), nanoseconds: time + 1)
        // Link target.
        unlink(root + "/link")
        symlink("elsewhere", root + "/link")
        try RawFileSystem.setModificationTime(Array("link".utf8), in: try RawFileSystem.openDirectory(Array(root.utf8)), nanoseconds: time)
        // Hard link broken into a copy.
        unlink(root + "/hard")
        try Self.rewrite(root + "/hard", Array("hello\n".utf8), mode: 0o644, mtime: time)
        // Extra and missing; a type change (the directory becomes a file).
        try Self.rewrite(root + "/new.txt", Array("new\n".utf8), mode: 0o644, mtime: time)
        try FileManager.default.createDirectory(atPath: root + "/newdir/deeper", withIntermediateDirectories: true)
        let result = try BehaviourCLI.run(["diff", archive, work.appending("src")])
        #expect(result.status == 1, "\(result.stderr)")
        let lines = result.stdoutLines
        func line(_ prefix: String) -> String? { lines.first { $0.hasPrefix(prefix) } }
        #expect(line("M tree/docs/big.bin: content (same size") != nil, "\(lines)")
        #expect(line("M tree/empty: content (0 bytes in the archive, 9 here)") != nil, "\(lines)")
        #expect(line("M tree/docs/a.txt: mode (0644 in the archive, 0600 here)") != nil, "\(lines)")
        #expect(line("M tree/caf\\xe9: mtime (") != nil, "non-UTF-8 names are escaped as list prints them: \(lines)")
        #expect(line("M tree/link: link target (docs/a.txt in the archive, elsewhere here)") != nil, "\(lines)")
        #expect(line("M tree/hard: link target (a hard link to tree/docs/a.txt") != nil, "\(lines)")
        #expect(lines.contains("+ tree/new.txt"), "\(lines)")
        #expect(lines.contains("+ tree/newdir"), "\(lines)")
        #expect(!lines.contains { $0.hasPrefix("+ tree/newdir/") }, "an extra directory is one line")
        // Everything else is unchanged: nothing more is reported (the directories' mtimes
        // changed with the edits, and are reported as such).
        let paths = Set(lines.map { String($0.dropFirst(2).prefix { $0 != ":" }) })
        #expect(paths.isSubset(of: ["tree", "tree/docs", "tree/docs/big.bin", "tree/empty", "tree/docs/a.txt", "tree/caf\\xe9", "tree/link", "tree/hard", "tree/new.txt", "tree/newdir"]), "\(lines)")

        // Type and missing.
        RawFileSystem.removeTree(Array((root + "/docs").utf8))
        try Self.rewrite(root + "/docs", Array("a file now\n".utf8), mode: 0o644, mtime: time)
        unlink(root + "/link")
        let second = try BehaviourCLI.run(["diff", "--json", archive, work.appending("src")])
        #expect(second.status == 1)
        let array = try #require(try JSONSerialization.jsonObject(with: Data(second.stdout.utf8)) as? [[String: Any]])
        let byPath = Dictionary(uniqueKeysWithValues: array.map { ($0["path"] as? String ?? "?", $0) })
        #expect(byPath["tree/docs"]?["change"] as? String == "modified")
        #expect(byPath["tree/docs"]?["aspects"] as? [String] == ["type"])
        #expect((byPath["tree/docs"]?["details"] as? [String])?.first == "directory in the archive, regular file here")
        #expect(byPath["tree/link"]?["change"] as? String == "missing")
        #expect(byPath["tree/docs/a.txt"]?["change"] as? String == "missing", "entries below a replaced directory are missing")
        #expect(byPath["tree/new.txt"]?["change"] as? String == "extra")
    }

    @Test("ArchiveDiff's content digest is the archive's, for content-defined and fixed chunking", arguments: ["cdc:4k:16k:64k", "fixed:8192"])
    func contentDigestMatchesTheArchive(chunking: String) async throws {
        let work = try TemporaryDirectory(prefix: "cairn-diff-digest")
        defer { work.remove() }
        var generator = SeededGenerator(seed: 77)
        let sizes = [0, 1, 4095, 8192, 70_001, 300_000]
        for size in sizes {
            try RawFileSystem.writeFile(Array(work.appending("f\(size)").utf8), generator.bytes(size))
        }
        let archive = work.appending("d.cairn")
        let arguments = ["create", "-q", "--chunking", chunking, "-o", archive] + sizes.map { "f\($0)" }
        #expect(try BehaviourCLI.run(arguments, in: work.path).status == 0)
        let extractor = try await Extractor(at: .file(path: archive))
        defer { extractor.close() }
        let chunker = Chunker(policy: extractor.header.chunking, keying: nil)
        for entry in try extractor.entriesWithContentDigests() {
            let file = try FileDescriptor.open(work.appending(entry.path), flags: O_RDONLY)
            defer { _ = try? file.close() }
            let local = try ArchiveDiff.contentDigest(of: file, chunker: chunker, ids: .sha256)
            #expect(local.size == entry.size, "\(entry.path)")
            #expect(local.digest == entry.contentDigest, "\(entry.path)")
        }
        // And one byte changed changes it.
        var bytes = try RawFileSystem.contents(ofFile: Array(work.appending("f70001").utf8))
        bytes[0] ^= 1
        unlink(work.appending("f70001"))
        try RawFileSystem.writeFile(Array(work.appending("f70001").utf8), bytes)
        let differences = try ArchiveDiff.compare(entries: try extractor.entriesWithContentDigests(), chunking: extractor.header.chunking, keying: nil, with: Array(work.path.utf8))
        #expect(differences.filter { $0.change == .modified && $0.aspects.contains(.content) }.map(\.path) == [Array("f70001".utf8)])
    }

    @Test("a sparse file diffs equal to its archive: holes are zero chunks cut as the archiver cuts them, data runs chunked alone")
    func sparseFileDiffsEqual() throws {
        let work = try TemporaryDirectory(prefix: "cairn-diff-sparse")
        defer { work.remove() }
        var generator = SeededGenerator(seed: 78)
        try FileManager.default.createDirectory(atPath: work.appending("src/t"), withIntermediateDirectories: true)
        // Data, a hole of 2.3 maximum chunks, data not on a chunk boundary, a hole to the end.
        let path = work.appending("src/t/sparse.img")
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        #expect(fd >= 0)
        let pieces: [(offset: off_t, bytes: [UInt8])] = [(0, generator.bytes(100_000)), (700_001, generator.bytes(90_000)), (3_000_000, [0x78])]
        for piece in pieces {
            _ = piece.bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, piece.offset) }
        }
        #expect(ftruncate(fd, 5 << 20) == 0)
        close(fd)
        let archive = work.appending("s.cairn")
        let create = try BehaviourCLI.run(["create", "-q", "--chunking", Self.chunking, "-o", archive, "t"], in: work.appending("src"))
        #expect(create.status == 0, "\(create.stderr)")
        let diff = try BehaviourCLI.run(["diff", archive, "src"], in: work.path)
        #expect(diff.status == 0, "\(diff.stdout)\(diff.stderr)")
        #expect(diff.stdout.isEmpty, "\(diff.stdout)")
        // One byte in the data after the first hole: found.
        let again = open(path, O_WRONLY)
        _ = [UInt8](arrayLiteral: 0x79).withUnsafeBytes { pwrite(again, $0.baseAddress, 1, 700_002) }
        close(again)
        let changed = try BehaviourCLI.run(["diff", archive, "src"], in: work.path)
        #expect(changed.status == 1 && changed.stdout.contains("t/sparse.img"), "\(changed.stdout)")
    }

    @Test("diff needs ARCHIVE and DIR, and a seekable archive")
    func usage() throws {
        #expect(try BehaviourCLI.run(["diff", "only-one"]).status == 2)
        #expect(try BehaviourCLI.run(["diff", "-", "/tmp"]).status == 2)
        let help = try BehaviourCLI.run(["diff", "--help"])
        #expect(help.status == 0 && help.stdout.contains("M PATH"))
    }

    static func rewrite(_ path: String, _ bytes: [UInt8], mode: mode_t, mtime: Int64) throws {
        unlink(path)
        try RawFileSystem.writeFile(Array(path.utf8), bytes)
        chmod(path, mode)
        let spec = timespec(tv_sec: Int(mtime / 1_000_000_000), tv_nsec: Int(mtime % 1_000_000_000))
        let times = [spec, spec]
        _ = times.withUnsafeBufferPointer { utimensat(AT_FDCWD, path, $0.baseAddress, AT_SYMLINK_NOFOLLOW) }
    }
}
