import CairnTestSupport
import Foundation
import Glibc
import Testing

import Cairn

/// Runs the built `cairn` executable as a child process and checks its output, files and exit
/// statuses (0 success, 1 failure, 2 usage error, 3 completed with warnings).
@Suite("Command line")
struct CommandLineTests {
    // MARK: The main workflow

    @Test("create, list, info, verify and extract round-trip a tree")
    func createListInfoVerifyExtract() throws {
        let work = try Scratch()
        let tree = try SampleTree.make(in: work.path("src"))
        let archive = work.path("tree.cairn")

        let create = try CLI.run(
            ["create", "-o", archive, "--resources-version", "cli-1", "--app-id", "org.cairn.cli-test",
             "--size-estimate", "123456", "--meta", "k=v", "tree"],
            in: work.path("src"))
        #expect(create.status == 0, "\(create.stderr)")
        #expect(create.stdout.contains("created"))

        let list = try CLI.run(["list", archive])
        #expect(list.status == 0, "\(list.stderr)")
        #expect(list.stdoutLines == tree.expectedListing, "one line per entry, depth first in byte order (Spec §6.2)")

        let info = try CLI.run(["info", archive, "--json"])
        #expect(info.status == 0, "\(info.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(info.stdout.utf8)) as? [String: Any])
        #expect(object["resourcesVersion"] as? String == "cli-1")
        #expect(object["appIdentifier"] as? String == "org.cairn.cli-test")
        #expect((object["uncompressedBytes"] as? NSNumber)?.uint64Value == tree.contentBytes)
        #expect((object["compressedBytes"] as? NSNumber) != nil, "compressedBytes is a number for a compressible archive")
        #expect((object["sizeEstimate"] as? NSNumber)?.uint64Value == 123_456)
        // create records its PATH operands under the reserved key cairn.sources (Spec/0003 §3.1).
        #expect(object["metadata"] as? [String: String] == ["k": "v", "cairn.sources": "tree"])
        #expect((object["entryCount"] as? NSNumber)?.intValue == tree.expectedListing.count)

        let plainInfo = try CLI.run(["info", archive])
        #expect(plainInfo.status == 0)
        #expect(plainInfo.stdout.contains("resources version: cli-1"))

        let verify = try CLI.run(["verify", archive])
        #expect(verify.status == 0, "\(verify.stderr)")
        #expect(verify.stdout.hasPrefix("OK"))

        let destination = work.path("out")
        let extract = try CLI.run(["extract", archive, "-C", destination])
        #expect(extract.status == 0, "\(extract.stderr)")
        try TreeComparison.expectEqual(tree.root, destination + "/tree")
        // The hard link is restored as a hard link.
        let a = try RawFS.lstat(destination + "/tree/a.txt")
        let hard = try RawFS.lstat(destination + "/tree/hard")
        #expect(a.st_ino == hard.st_ino, "tree/hard should be a hard link to tree/a.txt")
    }

    @Test("list --json prints a JSON array with one object per entry")
    func listJSON() throws {
        let work = try Scratch()
        let tree = try SampleTree.make(in: work.path("src"))
        let archive = work.path("tree.cairn")
        #expect(try CLI.run(["create", "-q", "-o", archive, "tree"], in: work.path("src")).status == 0)
        let result = try CLI.run(["list", "--json", archive])
        #expect(result.status == 0, "\(result.stderr)")
        let array = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]])
        #expect(array.count == tree.expectedListing.count)
        #expect(array.map { $0["path"] as? String ?? "?" } == tree.expectedListing)
        let byPath = Dictionary(uniqueKeysWithValues: array.map { ($0["path"] as? String ?? "?", $0) })
        #expect(byPath["tree"]?["kind"] as? String == "directory")
        #expect(byPath["tree/a.txt"]?["kind"] as? String == "file")
        #expect(byPath["tree/a.txt"]?["modeOctal"] as? String == "644")
        #expect(byPath["tree/hard"]?["kind"] as? String == "hardlink")
        #expect(byPath["tree/hard"]?["target"] as? String == "tree/a.txt")
        #expect(byPath["tree/link"]?["kind"] as? String == "symlink")
        #expect(byPath["tree/link"]?["target"] as? String == "a.txt")
        #expect((byPath["tree/big.bin"]?["chunkCount"] as? NSNumber)?.intValue ?? 0 > 1)
        #expect((byPath["tree/big.bin"]?["size"] as? NSNumber)?.intValue == SampleTree.bigLength)
        let mtime = Timestamp(nanosecondsSinceEpoch: SampleTree.mtime + 2)
        #expect((byPath["tree/big.bin"]?["mtimeSeconds"] as? NSNumber)?.int64Value == mtime.seconds)
        #expect((byPath["tree/big.bin"]?["mtimeNanoseconds"] as? NSNumber)?.uint32Value == mtime.nanoseconds)
        // Each entry is on its own line between the brackets.
        #expect(result.stdoutLines.count == tree.expectedListing.count + 2)
    }

    @Test("create -o - writes a valid archive to standard output and messages to standard error")
    func createToStandardOutput() async throws {
        let work = try Scratch()
        let tree = try SampleTree.make(in: work.path("src"))
        let result = try CLI.run(["create", "-o", "-", "tree"], in: work.path("src"))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutBytes.starts(with: [0x89, 0x43, 0x41, 0x49, 0x52, 0x4E, 0x0D, 0x0A]))
        #expect(result.stderr.contains("created"), "the summary goes to standard error")
        let archive = work.path("piped.cairn")
        try Data(result.stdoutBytes).write(to: URL(fileURLWithPath: archive))
        let report = try await Extractor.verifyArchive(at: .file(path: archive))
        #expect(report.entryCount == tree.expectedListing.count)
        #expect(report.contentBytes == tree.contentBytes)
        #expect(try CLI.run(["verify", archive]).status == 0)
    }

    @Test("verify - reads the archive from standard input, and names it <stdin> as its errors do")
    func verifyStandardInput() throws {
        let work = try Scratch()
        _ = try SampleTree.make(in: work.path("src"))
        let archive = work.path("tree.cairn")
        #expect(try CLI.run(["create", "-q", "-o", archive, "tree"], in: work.path("src")).status == 0)
        let result = try CLI.run(["verify", "-"], standardInput: archive)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("OK <stdin>: "), "\(result.stdout)")
    }

    @Test("extract into a destination that already holds a top-level name exits 1 and changes nothing")
    func extractCollision() throws {
        let work = try Scratch()
        _ = try SampleTree.make(in: work.path("src"))
        let archive = work.path("tree.cairn")
        #expect(try CLI.run(["create", "-q", "-o", archive, "tree"], in: work.path("src")).status == 0)
        let destination = work.path("dest")
        try RawFS.check(mkdir(destination, 0o755), "mkdir", destination)
        try RawFS.check(mkdir(destination + "/tree", 0o755), "mkdir", destination + "/tree")
        try RawFS.writeFile(Array((destination + "/tree/mine").utf8), [1, 2, 3], mode: 0o600, mtime: 0)
        let result = try CLI.run(["extract", archive, "-C", destination])
        #expect(result.status == 1)
        #expect(result.stderr.contains("already exists"), "\(result.stderr)")
        #expect(try RawFS.names(Array(destination.utf8)) == [Array("tree".utf8)])
        #expect(try RawFS.names(Array((destination + "/tree").utf8)) == [Array("mine".utf8)])
    }

    @Test("an archive written inside the tree it archives does not contain itself")
    func archiveInsideItsOwnTree() throws {
        let work = try Scratch()
        _ = try SampleTree.make(in: work.path("src"))
        let create = try CLI.run(["create", "-q", "-o", "tree/self.cairn", "tree"], in: work.path("src"))
        #expect(create.status == 0, "\(create.stderr)")
        let list = try CLI.run(["list", "tree/self.cairn"], in: work.path("src"))
        #expect(list.status == 0)
        // Like tar ("file is the archive; not dumped"), the archive being written, still under
        // its temporary name `tree/self.cairn.partial`, is left out of the tree it archives.
        #expect(!list.stdoutLines.contains { $0.hasPrefix("tree/self.cairn") }, "\(list.stdoutLines)")
        #expect(list.stdoutLines.contains("tree"))
    }

    // MARK: Found by a first-user review

    @Test("extraction drops set-user-ID and set-group-ID bits (owners are not restored)")
    func setuidBitsAreDropped() throws {
        let work = try Scratch()
        try FileManager.default.createDirectory(atPath: work.path("su"), withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: work.path("su/tool"), contents: Data("#!/bin/sh\n".utf8))
        #expect(chmod(work.path("su/tool"), 0o6755) == 0)
        #expect(chmod(work.path("su"), 0o3775) == 0)
        #expect(try CLI.run(["create", "-q", "-o", "su.cairn", "su"], in: work.root).status == 0)
        let listed = try CLI.run(["list", "--long", "su.cairn"], in: work.root)
        #expect(listed.stdout.contains("6755"), "the archive keeps the bits: \(listed.stdout)")
        #expect(try CLI.run(["extract", "-q", "su.cairn", "-C", "out"], in: work.root).status == 0)
        var st = stat()
        #expect(lstat(work.path("out/su/tool"), &st) == 0)
        #expect(st.st_mode & 0o7777 == 0o0755)
        #expect(lstat(work.path("out/su"), &st) == 0)
        #expect(st.st_mode & 0o7777 == 0o1775, "the sticky bit is kept")
    }

    @Test("a second create writing the same archive is refused and the first completes intact")
    func concurrentCreateIsRefused() throws {
        let work = try Scratch()
        _ = try SampleTree.make(in: work.path("src"))
        // Hold the lock the way a running create does.
        let partial = work.path("a.cairn.partial")
        let fd = open(partial, O_WRONLY | O_CREAT, 0o644)
        #expect(fd >= 0)
        defer { close(fd) }
        #expect(flock(fd, LOCK_EX | LOCK_NB) == 0)
        _ = write(fd, "sentinel", 8)
        let second = try CLI.run(["create", "-q", "-o", "a.cairn", "src"], in: work.root)
        #expect(second.status == 1)
        #expect(second.stderr.contains("another cairn process is writing"), "\(second.stderr)")
        var st = stat()
        #expect(stat(partial, &st) == 0 && st.st_size == 8, "the running writer's file was not cut")
    }

    @Test("a second extraction into a destination that is being extracted into is refused and touches nothing")
    func concurrentExtractIsRefused() throws {
        let work = try Scratch()
        _ = try SampleTree.make(in: work.path("src"))
        #expect(try CLI.run(["create", "-q", "-o", "a.cairn", "src"], in: work.root).status == 0)
        // What a running extraction into a missing `out` holds: its staging directory, with a
        // journal, locked.
        let staging = work.path(".out.cairn-staging")
        try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: staging + "/.cairn-journal", contents: Data("cairn-journal 1 stream\n".utf8))
        let fd = open(staging, O_RDONLY | O_DIRECTORY)
        #expect(fd >= 0)
        defer { close(fd) }
        #expect(flock(fd, LOCK_EX | LOCK_NB) == 0)
        let second = try CLI.run(["extract", "--resume", "a.cairn", "-C", "out"], in: work.root)
        #expect(second.status == 1)
        #expect(second.stderr.contains("another cairn process is extracting"), "\(second.stderr)")
        #expect(!FileManager.default.fileExists(atPath: work.path("out")))
        #expect(try FileManager.default.contentsOfDirectory(atPath: staging) == [".cairn-journal"])
    }

    @Test("create refuses up front what would only fail at the end")
    func createChecksUpFront() throws {
        let work = try Scratch()
        _ = try SampleTree.make(in: work.path("src"))
        try FileManager.default.createDirectory(atPath: work.path("other/src"), withIntermediateDirectories: true)
        let directory = try CLI.run(["create", "-o", "src", "src"], in: work.root)
        #expect(directory.status == 1)
        #expect(directory.stderr.contains("is a directory"), "\(directory.stderr)")
        let twice = try CLI.run(["create", "-o", "x.cairn", "src", "other/src/"], in: work.root)
        #expect(twice.status == 2)
        #expect(twice.stderr.contains("both be stored as 'src'"), "\(twice.stderr)")
        let tiny = try CLI.run(["create", "-o", "x.cairn", "--chunking", "fixed:1", "src"], in: work.root)
        #expect(tiny.status == 2)
        #expect(!FileManager.default.fileExists(atPath: work.path("x.cairn.partial")))
    }

    @Test("extract follows a destination that is a symlink to a directory, and takes list's escaped names")
    func extractDestinationSymlinkAndEscapedSelection() throws {
        let work = try Scratch()
        _ = try SampleTree.make(in: work.path("src"))
        #expect(try CLI.run(["create", "-q", "-o", "a.cairn", "src"], in: work.root).status == 0)
        try FileManager.default.createDirectory(atPath: work.path("real"), withIntermediateDirectories: true)
        #expect(symlink("real", work.path("link")) == 0)
        let viaLink = try CLI.run(["extract", "-q", "a.cairn", "-C", "link"], in: work.root)
        #expect(viaLink.status == 0, "\(viaLink.stderr)")
        #expect(FileManager.default.fileExists(atPath: work.path("real/src")))
        // A name printed escaped by `list` selects the entry, and so does one with a trailing slash.
        let listed = try CLI.run(["list", "a.cairn"], in: work.root).stdoutLines
        let escaped = try #require(listed.first { $0.contains("\\x") })
        let one = try CLI.run(["extract", "a.cairn", "-C", "one", escaped], in: work.root)
        #expect(one.status == 0, "\(one.stderr)")
        #expect(one.stdout.contains("extracted 1 entry,"), "only the selection is counted: \(one.stdout)")
        let directory = try CLI.run(["extract", "-q", "a.cairn", "-C", "two", "./src/tree/bin/"], in: work.root)
        #expect(directory.status == 0, "\(directory.stderr)")
    }

    // MARK: Help and usage errors

    @Test("--help exits 0 and prints usage", arguments: ["create", "extract", "list", "info", "verify"])
    func help(command: String) throws {
        let result = try CLI.run([command, "--help"])
        #expect(result.status == 0)
        #expect(result.stdout.contains("usage: cairn \(command)"), "\(result.stdout)")
        let short = try CLI.run([command, "-h"])
        #expect(short.status == 0)
        #expect(short.stdout == result.stdout)
    }

    @Test("cairn --help and no arguments")
    func topLevelHelp() throws {
        let help = try CLI.run(["--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("usage: cairn <command>"))
        let none = try CLI.run([])
        #expect(none.status == 2)
        #expect(none.stderr.contains("usage: cairn"))
    }

    struct UsageCase: Sendable, CustomTestStringConvertible {
        var arguments: [String]
        var message: String
        var testDescription: String { arguments.joined(separator: " ") }
    }

    @Test(
        "usage errors exit 2 with a message on standard error",
        arguments: [
            UsageCase(arguments: ["frobnicate"], message: "unknown command 'frobnicate'"),
            UsageCase(arguments: ["list", "--bogus", "x.cairn"], message: "unknown option --bogus"),
            UsageCase(arguments: ["create", "--frobnicate", "-o", "x.cairn", "."], message: "unknown option --frobnicate"),
            UsageCase(arguments: ["create", "."], message: "missing -o"),
            UsageCase(arguments: ["create", "-o", "x.cairn"], message: "no PATH"),
            UsageCase(arguments: ["create", "--compression", "bogus", "-o", "x.cairn", "."], message: "unknown compression 'bogus'"),
            UsageCase(arguments: ["create", "--chunking", "cdc:1:2:3", "-o", "x.cairn", "."], message: "invalid chunking"),
            UsageCase(arguments: ["verify"], message: "missing ARCHIVE"),
            UsageCase(arguments: ["extract"], message: "missing ARCHIVE"),
        ])
    func usageError(_ usage: UsageCase) throws {
        let work = try Scratch()
        let result = try CLI.run(usage.arguments, in: work.root)
        #expect(result.status == 2, "\(result.stderr)")
        #expect(result.stderr.contains(usage.message), "\(result.stderr)")
        #expect(result.stdout.isEmpty)
        // Nothing was written.
        #expect(try FileManager.default.contentsOfDirectory(atPath: work.root).filter { $0 != ".cairn-test-io" }.isEmpty)
    }

    // MARK: Failures

    @Test("a missing input path exits 1 and names the path; no archive appears")
    func missingInput() throws {
        let work = try Scratch()
        let missing = work.path("does-not-exist")
        let archive = work.path("out.cairn")
        let result = try CLI.run(["create", "-o", archive, missing])
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains(missing), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: archive), "an archive appears only when complete")
    }

    @Test("a missing archive exits 1 for list, info, verify and extract", arguments: ["list", "info", "verify", "extract"])
    func missingArchive(command: String) throws {
        let work = try Scratch()
        let archive = work.path("nope.cairn")
        let result = try CLI.run([command, archive], in: work.root)
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains(archive), "\(result.stderr)")
    }

    @Test("a flipped byte: verify exits 1 naming the offset; extract exits 1 and leaves no destination")
    func corruptedArchive() throws {
        let work = try Scratch()
        _ = try SampleTree.make(in: work.path("src"))
        let archive = work.path("tree.cairn")
        #expect(try CLI.run(["create", "-q", "-o", archive, "tree"], in: work.path("src")).status == 0)

        // Flip a byte in the middle of the stored data of the largest chunk, so both the verifier
        // and the seekable extractor (which reads chunks, not commits: Spec §13.1) must see it.
        let chunk = try #require(
            try Extractor.withReader(archive) { $0.reader.manifest.chunks.max { $0.storedLength < $1.storedLength } })
        let flipAt = Int(chunk.offset) + 12 + 40 + Int(chunk.storedLength) / 2
        let corrupted = work.path("corrupted.cairn")
        var bytes = try Array(Data(contentsOf: URL(fileURLWithPath: archive)))
        bytes[flipAt] ^= 0x40
        try Data(bytes).write(to: URL(fileURLWithPath: corrupted))

        let verify = try CLI.run(["verify", corrupted])
        #expect(verify.status == 1, "\(verify.stdout)")
        #expect(verify.stderr.contains("offset"), "\(verify.stderr)")
        #expect(verify.stderr.contains("offset \(chunk.offset)"), "the error names the damaged record: \(verify.stderr)")

        let destination = work.path("restored")
        let extract = try CLI.run(["extract", corrupted, "-C", destination])
        #expect(extract.status == 1, "\(extract.stdout)")
        #expect(!extract.stderr.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: destination), "all-or-nothing: no destination directory")
        let left = try FileManager.default.contentsOfDirectory(atPath: work.root).sorted()
        #expect(left == [".cairn-test-io", "corrupted.cairn", "src", "tree.cairn"], "no staging directory is left behind")
    }

    @Test("a flipped byte in the exact middle of the archive fails verify with an offset")
    func corruptedMiddle() throws {
        let work = try Scratch()
        _ = try SampleTree.make(in: work.path("src"))
        let archive = work.path("tree.cairn")
        #expect(try CLI.run(["create", "-q", "-o", archive, "tree"], in: work.path("src")).status == 0)
        var bytes = try Array(Data(contentsOf: URL(fileURLWithPath: archive)))
        bytes[bytes.count / 2] ^= 0x01
        try Data(bytes).write(to: URL(fileURLWithPath: archive))
        let verify = try CLI.run(["verify", archive])
        #expect(verify.status == 1)
        #expect(verify.stderr.contains("offset"), "\(verify.stderr)")
    }

    // MARK: Warnings
}

// MARK: - Running the executable

private enum CLI {
    typealias Result = ChildProcess.Result

    /// Runs the `cairn` built next to this test bundle (see ``ChildProcess``).
    static func run(
        _ arguments: [String], in directory: String? = nil, standardInput: String? = nil, timeout: Double = Await.safetyBound
    ) throws -> Result {
        try ChildProcess.run(
            ChildProcess.cairnExecutable(besideBundle: Bundle.module.bundleURL), arguments, in: directory,
            standardInput: standardInput, timeout: timeout)
    }
}

extension Extractor {
    fileprivate static func withReader<R>(_ path: String, _ body: (Extractor) throws -> R) throws -> R {
        let extractor = try Extractor(reader: ArchiveReader(path: path))
        defer { extractor.close() }
        return try body(extractor)
    }
}

/// A temporary directory removed at the end of the test.
private final class Scratch {
    let root: String

    init() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("cairn-cli-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        root = url.path
        // A marker so the tests can tell their own scratch files apart.
        _ = FileManager.default.createFile(atPath: root + "/.cairn-test-io", contents: nil)
    }

    func path(_ name: String) -> String { root + "/" + name }

    deinit {
        // Directories were made read-only in places; restore write access so removal works.
        _ = try? FileManager.default.removeItem(atPath: root)
    }
}

// MARK: - A small tree built with Glibc

/// ```
/// tree/            0755
///   a.txt          0644  "hello, cairn\n" (hard-linked as tree/hard)
///   big.bin        0600  300 KiB, several chunks
///   bin/           0750
///     tool.sh      0755
///   caf\xE9        0640  (a name that is not UTF-8)
///   empty          0644
///   hard           hard link to a.txt
///   link           -> a.txt
/// ```
private struct SampleTree {
    static let mtime: Int64 = 1_700_000_000_123_456_789
    static let bigLength = 300 * 1024

    var root: String
    var contentBytes: UInt64
    var expectedListing: [String] {
        [
            "tree", "tree/a.txt", "tree/big.bin", "tree/bin", "tree/bin/tool.sh", "tree/caf\\xe9", "tree/empty",
            "tree/hard", "tree/link",
        ]
    }

    static func make(in parent: String) throws -> SampleTree {
        try RawFS.check(mkdir(parent, 0o755), "mkdir", parent)
        let root = parent + "/tree"
        try RawFS.check(mkdir(root, 0o755), "mkdir", root)
        try RawFS.check(mkdir(root + "/bin", 0o755), "mkdir", root + "/bin")
        let hello = Array("hello, cairn\n".utf8)
        let tool = Array("#!/bin/sh\necho hi\n".utf8)
        let latin = Array("latin-1 name\n".utf8)
        var generator = SeededGenerator(seed: 42)
        var big: [UInt8] = []
        while big.count < bigLength {
            big += generator.bytes(8 * 1024)
            big += Array(repeating: UInt8(ascii: "z"), count: 8 * 1024)
        }
        big.removeLast(big.count - bigLength)
        try RawFS.writeFile(Array((root + "/a.txt").utf8), hello, mode: 0o644, mtime: mtime + 1)
        try RawFS.writeFile(Array((root + "/big.bin").utf8), big, mode: 0o600, mtime: mtime + 2)
        try RawFS.writeFile(Array((root + "/bin/tool.sh").utf8), tool, mode: 0o755, mtime: mtime + 3)
        try RawFS.writeFile(Array((root + "/caf").utf8) + [0xE9], latin, mode: 0o640, mtime: mtime + 4)
        try RawFS.writeFile(Array((root + "/empty").utf8), [], mode: 0o644, mtime: mtime + 5)
        try RawFS.check(link(root + "/a.txt", root + "/hard"), "link", root + "/hard")
        try RawFS.check(symlink("a.txt", root + "/link"), "symlink", root + "/link")
        try RawFS.setTimes(Array((root + "/link").utf8), mtime + 6)
        try RawFS.check(chmod(root + "/bin", 0o750), "chmod", root + "/bin")
        try RawFS.setTimes(Array((root + "/bin").utf8), mtime + 7)
        try RawFS.check(chmod(root, 0o755), "chmod", root)
        try RawFS.setTimes(Array(root.utf8), mtime)
        let content = UInt64(hello.count + big.count + tool.count + latin.count)
        return SampleTree(root: root, contentBytes: content)
    }
}

/// File system helpers on raw path bytes.
private enum RawFS {
    static func check(_ rc: Int32, _ what: String, _ path: String) throws {
        guard rc == 0 else { throw CairnError(.io, "\(what) failed: errno \(errno)", path: path) }
    }

    static func withPath<R>(_ path: [UInt8], _ body: (UnsafePointer<CChar>) throws -> R) rethrows -> R {
        try (path + [0]).withUnsafeBufferPointer { buffer in
            try buffer.withMemoryRebound(to: CChar.self) { try body($0.baseAddress!) }
        }
    }

    static func writeFile(_ path: [UInt8], _ bytes: [UInt8], mode: mode_t, mtime: Int64) throws {
        let fd = withPath(path) { open($0, O_WRONLY | O_CREAT | O_EXCL, 0o600) }
        let display = String(decoding: path, as: UTF8.self)
        guard fd >= 0 else { throw CairnError(.io, "open failed: errno \(errno)", path: display) }
        defer { close(fd) }
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
            guard n > 0 else { throw CairnError(.io, "write failed: errno \(errno)", path: display) }
            written += n
        }
        try check(fchmod(fd, mode), "fchmod", display)
        try setTimes(path, mtime)
    }

    /// Sets atime and mtime (nanoseconds) without following a symlink.
    static func setTimes(_ path: [UInt8], _ nanoseconds: Int64) throws {
        let spec = timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
        let times = [spec, spec]
        let rc = withPath(path) { p in times.withUnsafeBufferPointer { utimensat(AT_FDCWD, p, $0.baseAddress, AT_SYMLINK_NOFOLLOW) } }
        try check(rc, "utimensat", String(decoding: path, as: UTF8.self))
    }

    static func lstat(_ path: String) throws -> stat {
        try lstat(Array(path.utf8))
    }

    static func lstat(_ path: [UInt8]) throws -> stat {
        var status = stat()
        let rc = withPath(path) { Glibc.lstat($0, &status) }
        try check(rc, "lstat", String(decoding: path, as: UTF8.self))
        return status
    }

    /// The names in a directory as raw bytes, sorted, without `.` and `..`.
    static func names(_ path: [UInt8]) throws -> [[UInt8]] {
        guard let dir = withPath(path, { opendir($0) }) else {
            throw CairnError(.io, "opendir failed: errno \(errno)", path: String(decoding: path, as: UTF8.self))
        }
        defer { closedir(dir) }
        return try DirectoryReader.names(in: FileDescriptor(rawValue: dirfd(dir), path: String(decoding: path, as: UTF8.self)))
    }

    static func readFile(_ path: [UInt8]) throws -> [UInt8] {
        let fd = withPath(path) { open($0, O_RDONLY | O_NOFOLLOW) }
        guard fd >= 0 else { throw CairnError(.io, "open failed: errno \(errno)", path: String(decoding: path, as: UTF8.self)) }
        defer { close(fd) }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { break }
            out += buffer[0..<n]
        }
        return out
    }

    static func readLink(_ path: [UInt8]) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 4097)
        let n = withPath(path) { p in buffer.withUnsafeMutableBytes { readlink(p, $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count) } }
        guard n >= 0 else { throw CairnError(.io, "readlink failed: errno \(errno)", path: String(decoding: path, as: UTF8.self)) }
        return Array(buffer[0..<n])
    }
}

/// Compares two trees: names, kinds, permission bits, modification times, contents, link targets.
private enum TreeComparison {
    static func expectEqual(_ expected: String, _ actual: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        try compare(Array(expected.utf8), Array(actual.utf8), display: "tree", sourceLocation: sourceLocation)
    }

    private static func compare(_ a: [UInt8], _ b: [UInt8], display: String, sourceLocation: SourceLocation) throws {
        let sa = try RawFS.lstat(a)
        let sb = try RawFS.lstat(b)
        let kindA = sa.st_mode & S_IFMT
        let kindB = sb.st_mode & S_IFMT
        #expect(kindA == kindB, "kind of \(display)", sourceLocation: sourceLocation)
        guard kindA == kindB else { return }
        if kindA != S_IFLNK {
            #expect(
                String(sa.st_mode & 0o7777, radix: 8) == String(sb.st_mode & 0o7777, radix: 8), "mode of \(display)",
                sourceLocation: sourceLocation)
        }
        #expect(
            Int64(sa.st_mtim.tv_sec) * 1_000_000_000 + Int64(sa.st_mtim.tv_nsec)
                == Int64(sb.st_mtim.tv_sec) * 1_000_000_000 + Int64(sb.st_mtim.tv_nsec),
            "mtime of \(display)", sourceLocation: sourceLocation)
        switch kindA {
        case S_IFREG:
            #expect(sa.st_size == sb.st_size, "size of \(display)", sourceLocation: sourceLocation)
            #expect(try RawFS.readFile(a) == RawFS.readFile(b), "content of \(display)", sourceLocation: sourceLocation)
        case S_IFLNK:
            #expect(try RawFS.readLink(a) == RawFS.readLink(b), "target of \(display)", sourceLocation: sourceLocation)
        case S_IFDIR:
            let namesA = try RawFS.names(a)
            let namesB = try RawFS.names(b)
            #expect(namesA == namesB, "names in \(display)", sourceLocation: sourceLocation)
            for name in namesA where namesB.contains(name) {
                try compare(
                    a + [0x2F] + name, b + [0x2F] + name, display: display + "/" + String(decoding: name, as: UTF8.self),
                    sourceLocation: sourceLocation)
            }
        default:
            break
        }
    }
}
