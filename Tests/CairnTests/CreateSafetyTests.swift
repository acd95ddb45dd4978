import CairnTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

@testable import Cairn

/// The create side of issue 8 ("Nothing lost by accident", "The habits users reach for"):
/// `create` never replaces or mixes data by accident, leaves out what it could not read whole,
/// and takes tar's and zstd's options (`Spec/0003-command-line.md §3`).
@Suite("Create safety")
struct CreateSafetyTests {
    static func tree(seed: UInt64) -> TreeBuilder {
        var generator = SeededGenerator(seed: seed)
        var tree = TreeBuilder()
        tree.file("a.txt", Array("alpha\n".utf8))
        tree.file("logs/app.log", generator.bytes(3000))
        tree.file("logs/cache/x.bin", generator.bytes(5000))
        tree.file("cache/y.bin", generator.bytes(700))
        tree.file("docs/readme.md", Array("# readme\n".utf8))
        tree.file("docs/old.log", generator.bytes(100))
        return tree
    }

    static func paths(inArchive path: String) throws -> [String] {
        let extractor = try Extractor(reader: ArchiveReader(path: path))
        defer { extractor.close() }
        return extractor.entries.map(\.path)
    }

    static func contents(_ path: String) throws -> [UInt8] {
        try RawFileSystem.contents(ofFile: Array(path.utf8))
    }

    // MARK: - Not replacing what exists (item 1)

    @Test("create -o FILE over an existing FILE exits 1 naming it and saying --force; FILE is untouched")
    func existingArchiveIsRefused() throws {
        let work = try TemporaryDirectory(prefix: "cairn-create-force")
        defer { work.remove() }
        try Self.tree(seed: 1).materialize(at: work.appending("src"))
        try Data("precious".utf8).write(to: URL(fileURLWithPath: work.appending("a.cairn")))
        let refused = try CreateCLI.run(["create", "-q", "-o", "a.cairn", "src"], in: work.path)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("a.cairn: already exists; use --force"), "\(refused.stderr)")
        #expect(try Self.contents(work.appending("a.cairn")) == Array("precious".utf8))
        #expect(!FileManager.default.fileExists(atPath: work.appending("a.cairn.partial")))
        let forced = try CreateCLI.run(["create", "-q", "-f", "-o", "a.cairn", "src"], in: work.path)
        #expect(forced.status == 0, "\(forced.stderr)")
        #expect(try CreateCLI.run(["verify", "a.cairn"], in: work.path).status == 0)
    }

    @Test("create --resume of a format 2.0 FILE.partial exits 1 naming the version and leaves it; with --force it starts over")
    func olderFormatPartialIsKept() throws {
        let work = try TemporaryDirectory(prefix: "cairn-create-v20-partial")
        defer { work.remove() }
        try Self.tree(seed: 3).materialize(at: work.appending("src"))
        // The 2.0 golden archive cut after its second commit: committed work of a 2.0 cairn.
        let golden = try GoldenArchiveV2.fixtureBytes()
        let commits = try GoldenArchiveV2.records(golden).filter { $0.type == RecordType.commit.rawValue }
        let cut = commits[1].offset + 12 + commits[1].length
        let partial = Array(golden[0..<cut])
        try RawFileSystem.writeFile(Array(work.appending("a.cairn.partial").utf8), partial)
        let refused = try CreateCLI.run(["create", "-q", "--resume", "-o", "a.cairn", "src"], in: work.path)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("format 2.0") && refused.stderr.contains("--force"), "\(refused.stderr)")
        #expect(try Self.contents(work.appending("a.cairn.partial")) == partial)
        #expect(!FileManager.default.fileExists(atPath: work.appending("a.cairn")))
        let forced = try CreateCLI.run(["create", "--resume", "--force", "-o", "a.cairn", "src"], in: work.path)
        #expect(forced.status == 0, "\(forced.stderr)")
        #expect(forced.stderr.contains("starting over"), "\(forced.stderr)")
        #expect(try CreateCLI.run(["verify", "a.cairn"], in: work.path).status == 0)
    }

    @Test("create over an existing FILE.partial exits 1 saying --resume or --force and leaves it; --force starts over")
    func existingPartialIsRefused() throws {
        let work = try TemporaryDirectory(prefix: "cairn-create-partial")
        defer { work.remove() }
        try Self.tree(seed: 2).materialize(at: work.appending("src"))
        try Data("interrupted".utf8).write(to: URL(fileURLWithPath: work.appending("a.cairn.partial")))
        let refused = try CreateCLI.run(["create", "-q", "-o", "a.cairn", "src"], in: work.path)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("a.cairn.partial: an interrupted archive is here; use --resume"), "\(refused.stderr)")
        #expect(refused.stderr.contains("--force"), "\(refused.stderr)")
        #expect(try Self.contents(work.appending("a.cairn.partial")) == Array("interrupted".utf8))
        let forced = try CreateCLI.run(["create", "-q", "--force", "-o", "a.cairn", "src"], in: work.path)
        #expect(forced.status == 0, "\(forced.stderr)")
        #expect(!FileManager.default.fileExists(atPath: work.appending("a.cairn.partial")))
        #expect(try CreateCLI.run(["verify", "a.cairn"], in: work.path).status == 0)
    }

    @Test("FileSink does not overwrite by default: an existing path is refused, and one appearing while writing is not clobbered")
    func fileSinkDoesNotOverwrite() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-sink-noreplace")
        defer { work.remove() }
        let path = work.appending("a.cairn")
        try Data("old".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: CairnError.self) { _ = try FileSink(path: path) }
        #expect(try Self.contents(path) == Array("old".utf8))
        unlink(path)

        // A file that appears while the archive is written survives; the archive stays .partial.
        let archiver = try await Archiver(writingTo: .file(path: path))
        try await archiver.append(contentsOf: Self.single(Array("x".utf8)), pathInArchive: "x")
        try Data("appeared".utf8).write(to: URL(fileURLWithPath: path))
        let error = await #expect(throws: CairnError.self) { _ = try await archiver.finish() }
        #expect(error?.code == .alreadyExists)
        #expect(error?.path == path)
        #expect(try Self.contents(path) == Array("appeared".utf8))
        #expect(FileManager.default.fileExists(atPath: path + ".partial"))

        // With overwrite, the old file is replaced, but only at the final rename.
        unlink(path + ".partial")
        let sink = try FileSink(path: path, overwrite: true)
        let replacing = try Archiver(sink: sink)
        try await replacing.append(contentsOf: Self.single(Array("y".utf8)), pathInArchive: "y")
        sink.beforeRename = {
            #expect((try? Self.contents(path)) == Array("appeared".utf8), "the old file is still there before the rename")
        }
        _ = try await replacing.finish()
        #expect(try Self.paths(inArchive: path) == ["y"])
    }

    static func single(_ bytes: [UInt8]) -> AsyncStream<[UInt8]> {
        AsyncStream { continuation in
            continuation.yield(bytes)
            continuation.finish()
        }
    }

    // MARK: - The lock is held across the rename (item 2)

    @Test("the lock on FILE.partial is held until after the rename: a second writer during finish is refused as busy")
    func lockHeldAcrossRename() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-sink-lock")
        defer { work.remove() }
        let path = work.appending("a.cairn")
        let sink = try FileSink(path: path)
        let archiver = try Archiver(sink: sink)
        try await archiver.append(contentsOf: Self.single(Array(repeating: 7, count: 100_000)), pathInArchive: "seven")
        let second = Mutex<CairnError?>(nil)
        sink.beforeRename = {
            // What a second `create -f` of the same archive does at this moment.
            do throws(CairnError) {
                _ = try FileSink(path: path, overwrite: true)
            } catch {
                second.withLock { $0 = error }
            }
        }
        _ = try await archiver.finish()
        #expect(second.withLock { $0 }?.code == .busy)
        let report = try await Extractor.verifyArchive(at: .file(path: path))
        #expect(report.contentBytes == 100_000)
    }

    // MARK: - A read error leaves the file out (item 4)

    /// Archives `tree` (materialised at `<work>/<name>`) into a file; reads of sources whose path
    /// ends with `failing` fail with EIO after `failAt` bytes.
    static func archive(
        _ tree: TreeBuilder, in work: TemporaryDirectory, name: String, failing: String? = nil, failAt: UInt64 = 0,
        configure: (inout Archiver.Configuration) -> Void = { _ in }
    ) async throws -> (bytes: [UInt8], properties: ExportProperties) {
        try tree.materialize(at: work.appending(name))
        var configuration = Archiver.Configuration()
        configuration.chunking = .contentDefined(minimum: 2048, average: 8192, maximum: 32768)
        if let failing {
            let suffix = Array(failing.utf8)
            configuration.readFailure = { path in path.count >= suffix.count && Array(path.suffix(suffix.count)) == suffix ? failAt : nil }
        }
        configure(&configuration)
        let archive = work.appending(name + ".cairn")
        let archiver = try await Archiver(writingTo: .file(path: archive), configuration: configuration)
        try await archiver.appendItem(atPath: Array(work.appending(name).utf8), pathInArchive: Array("tree".utf8))
        let properties = try await archiver.finish()
        return (try Self.contents(archive), properties)
    }

    static func readErrorTree(bad: [UInt8]?, copy: [UInt8]) -> TreeBuilder {
        var tree = TreeBuilder()
        tree.file("a.txt", Array("first\n".utf8))
        if let bad { tree.file("bad.bin", bad) }
        tree.file("copy.bin", copy)
        tree.file("z.txt", Array("last\n".utf8))
        return tree
    }

    @Test(
        "a file whose read fails (EIO) is left out, named in a warning; the archive is the one written without it",
        arguments: [(10_000, 4096), (6 << 20, 5 << 20)])
    func readErrorLeavesFileOut(length: Int, failAt: Int) async throws {
        let work = try TemporaryDirectory(prefix: "cairn-eio")
        defer { work.remove() }
        var generator = SeededGenerator(seed: UInt64(length))
        let content = generator.bytes(length)
        // copy.bin, after bad.bin, has the same content: its chunks must be stored again after
        // bad.bin's are taken back (the dedup index forgets them).
        let (bytes, properties) = try await Self.archive(
            Self.readErrorTree(bad: content, copy: content), in: work, name: "src", failing: "/bad.bin",
            failAt: UInt64(failAt))
        #expect(properties.warnings.count == 1, "\(properties.warnings)")
        let warning = try #require(properties.warnings.first)
        #expect(warning.code == .io)
        #expect(warning.path == work.appending("src/bad.bin"), "\(warning)")
        #expect(warning.message == "read failed after \(failAt) bytes; left out of the archive", "\(warning)")
        #expect(try Self.paths(inArchive: work.appending("src.cairn")) == ["tree", "tree/a.txt", "tree/copy.bin", "tree/z.txt"])
        _ = try await Extractor.verifyArchive(at: .file(path: work.appending("src.cairn")))

        let (reference, _) = try await Self.archive(Self.readErrorTree(bad: nil, copy: content), in: work, name: "ref")
        #expect(bytes.count == reference.count)
        #expect(bytes == reference, "leaving the file out gives the archive written without it")
    }

    @Test("a read error after bytes reached a sink that cannot be cut back fails the archive, naming the file")
    func readErrorOnUntruncatableSink() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-eio-pipe")
        defer { work.remove() }
        var generator = SeededGenerator(seed: 44)
        try Self.readErrorTree(bad: generator.bytes(6 << 20), copy: []).materialize(at: work.appending("src"))
        var configuration = Archiver.Configuration()
        configuration.readFailure = { path in PathBytes.lastComponent(path) == Array("bad.bin".utf8) ? 5 << 20 : nil }
        let sink = StallableSink(stalled: false)
        let archiver = try Archiver(sink: sink, configuration: configuration)
        let error = await #expect(throws: CairnError.self) {
            try await archiver.appendItem(at: work.url(appending: "src"))
        }
        #expect(error?.code == .io)
        #expect(error?.path == work.appending("src/bad.bin"), "\(String(describing: error))")
        #expect(error?.message.contains("a short file is never stored") == true, "\(String(describing: error))")
    }

    // MARK: - Resuming only what was started (item 3)

    /// Leaves `<work>/a.cairn.partial`: `src` archived with lz4 and `sourcePaths` ["src"],
    /// abandoned before the manifest.
    static func interruptedArchive(in work: TemporaryDirectory) async throws -> [UInt8] {
        try Self.tree(seed: 3).materialize(at: work.appending("src"))
        var configuration = Archiver.Configuration()
        configuration.sourcePaths = [Array("src".utf8)]
        configuration.metadata["app"] = "notes"
        let archiver = try await Archiver(writingTo: .file(path: work.appending("a.cairn")), configuration: configuration)
        try await archiver.appendItem(atPath: Array(work.appending("src").utf8))
        await archiver.abandon()
        return try Self.contents(work.appending("a.cairn.partial"))
    }

    @Test("Archiver(resuming:expecting:) refuses other sources or explicitly given options, naming each, before touching the file")
    func resumeRefusesDifferences() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-resume-differs")
        defer { work.remove() }
        let partial = try await Self.interruptedArchive(in: work)
        var expected = Archiver.ResumeExpectation()
        expected.sourcePaths = [Array("other".utf8)]
        expected.compression = .zstd(level: 3)
        expected.metadata = ["app": "mail"]
        let error = #expect(throws: CairnError.self) {
            _ = try Archiver(resuming: .file(path: work.appending("a.cairn")), expecting: expected)
        }
        #expect(error?.code == .notResumable)
        #expect(error?.path == work.appending("a.cairn.partial"))
        let messages = error?.additionalErrors.map(\.message) ?? []
        #expect(messages.contains("compression zstd:3 differs from the archive's lz4"), "\(messages)")
        #expect(messages.contains("sources differ: the archive was made from src, not other"), "\(messages)")
        #expect(messages.contains("metadata {app=mail} differs from the archive's {app=notes}"), "\(messages)")
        #expect(messages.count == 3)
        #expect(try Self.contents(work.appending("a.cairn.partial")) == partial, "a refused resume leaves the file as it was")

        // The same sources and options (or none given) resume.
        var same = Archiver.ResumeExpectation()
        same.sourcePaths = [Array("src".utf8)]
        same.compression = .lz4
        same.metadata = ["app": "notes"]
        let archiver = try Archiver(resuming: .file(path: work.appending("a.cairn")), expecting: same)
        try await archiver.appendItem(atPath: Array(work.appending("src").utf8))
        _ = try await archiver.finish()
        _ = try await Extractor.verifyArchive(at: .file(path: work.appending("a.cairn")))
    }

    @Test("create --resume with another --compression or other PATHs exits 1 naming what differs; the same command resumes")
    func resumeCommandRefusesDifferences() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-resume-cli-differs")
        defer { work.remove() }
        let partial = try await Self.interruptedArchive(in: work)
        try FileManager.default.createDirectory(atPath: work.appending("other"), withIntermediateDirectories: true)
        let codec = try CreateCLI.run(["create", "--resume", "--compression", "zstd:3", "-o", "a.cairn", "src"], in: work.path)
        #expect(codec.status == 1)
        #expect(codec.stderr.contains("compression zstd:3 differs from the archive's lz4"), "\(codec.stderr)")
        #expect(codec.stderr.contains("--force"), "\(codec.stderr)")
        let sources = try CreateCLI.run(["create", "--resume", "-o", "a.cairn", "src", "other"], in: work.path)
        #expect(sources.status == 1)
        #expect(sources.stderr.contains("sources differ: the archive was made from src, not src, other"), "\(sources.stderr)")
        #expect(try Self.contents(work.appending("a.cairn.partial")) == partial)
        let same = try CreateCLI.run(["create", "--resume", "--meta", "app=notes", "-o", "a.cairn", "src"], in: work.path)
        #expect(same.status == 0, "\(same.stderr)")
        #expect(same.stderr.contains("resuming"), "\(same.stderr)")
        #expect(try CreateCLI.run(["verify", "a.cairn"], in: work.path).status == 0)
        let reserved = try CreateCLI.run(["create", "--meta", "cairn.sources=x", "-o", "b.cairn", "src"], in: work.path)
        #expect(reserved.status == 2, "\(reserved.stderr)")
    }

    @Test("create --resume of a complete ARCHIVE says 'nothing to resume' only for its own sources and options; others exit 1 naming what differs")
    func resumeOfCompleteArchiveChecksSources() throws {
        let work = try TemporaryDirectory(prefix: "cairn-resume-complete")
        defer { work.remove() }
        try Self.tree(seed: 4).materialize(at: work.appending("src"))
        try FileManager.default.createDirectory(atPath: work.appending("other"), withIntermediateDirectories: true)
        #expect(try CreateCLI.run(["create", "-q", "-o", "a.cairn", "src"], in: work.path).status == 0)
        let archive = try Self.contents(work.appending("a.cairn"))
        let other = try CreateCLI.run(["create", "--resume", "-o", "a.cairn", "other"], in: work.path)
        #expect(other.status == 1, "\(other.stdout)")
        #expect(other.stderr.contains("sources differ: the archive was made from src, not other"), "\(other.stderr)")
        #expect(!other.stdout.contains("nothing to resume"), "\(other.stdout)")
        let codec = try CreateCLI.run(["create", "--resume", "--compression", "zstd:3", "-o", "a.cairn", "src"], in: work.path)
        #expect(codec.status == 1 && codec.stderr.contains("compression zstd:3 differs"), "\(codec.stderr)")
        let same = try CreateCLI.run(["create", "--resume", "-o", "a.cairn", "src"], in: work.path)
        #expect(same.status == 0, "\(same.stderr)")
        #expect(same.stdout.contains("already complete; nothing to resume"), "\(same.stdout)")
        #expect(try Self.contents(work.appending("a.cairn")) == archive)
    }

    @Test("create records its PATH operands as cairn.sources, escaped and joined by newlines")
    func sourcesAreRecorded() throws {
        let work = try TemporaryDirectory(prefix: "cairn-sources")
        defer { work.remove() }
        try Self.tree(seed: 4).materialize(at: work.appending("src"))
        let result = try CreateCLI.run(["create", "-q", "-o", "a.cairn", "src/a.txt", "src/docs/"], in: work.path)
        #expect(result.status == 0, "\(result.stderr)")
        let extractor = try Extractor(reader: ArchiveReader(path: work.appending("a.cairn")))
        defer { extractor.close() }
        #expect(extractor.header.metadata["cairn.sources"] == "src/a.txt\nsrc/docs/")
        #expect(Archiver.sourcesMetadataValue([[0x61, 0xFF]]) == "a\\xff")
    }

    // MARK: - The habits (item 7)

    @Test("exclusion patterns match the path in archive or any trailing sub-path, with * not crossing '/'")
    func exclusionMatching() {
        let patterns = ExclusionPatterns(["*.log", "cache", "docs/*.md"])
        #expect(patterns.excludes(Array("tree/logs/app.log".utf8)))
        #expect(patterns.excludes(Array("app.log".utf8)))
        #expect(patterns.excludes(Array("tree/logs/cache".utf8)))
        #expect(patterns.excludes(Array("cache".utf8)))
        #expect(patterns.excludes(Array("tree/docs/readme.md".utf8)))
        #expect(!patterns.excludes(Array("tree/cached".utf8)))
        #expect(!patterns.excludes(Array("tree/logs".utf8)))
        #expect(!patterns.excludes(Array("tree/docs/sub/readme.md".utf8)), "* does not cross /")
        #expect(!ExclusionPatterns([]).excludes(Array("x".utf8)))
    }

    @Test("Configuration.exclusions leaves matching items (and what is below them) out; onEntry sees each entry in order")
    func exclusionsAndOnEntry() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-exclude")
        defer { work.remove() }
        let seen = Mutex<[String]>([])
        let (_, properties) = try await Self.archive(Self.tree(seed: 7), in: work, name: "src") { configuration in
            configuration.exclusions = ["*.log", "cache"]
            configuration.onEntry = { entry in seen.withLock { $0.append(entry.path) } }
        }
        #expect(properties.warnings.isEmpty)
        let listed = try Self.paths(inArchive: work.appending("src.cairn"))
        #expect(listed == ["tree", "tree/a.txt", "tree/docs", "tree/docs/readme.md", "tree/logs"])
        #expect(seen.withLock { $0 } == listed)
    }

    @Test("workerCount 1 gives the same bytes as the default, and 0 is refused")
    func workerCountIsDeterministic() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-workers")
        defer { work.remove() }
        var generator = SeededGenerator(seed: 8)
        var tree = TreeBuilder()
        for index in 0..<6 { tree.file("f\(index).bin", generator.bytes(700_000)) }
        let (all, _) = try await Self.archive(tree, in: work, name: "a")
        let (one, _) = try await Self.archive(tree, in: work, name: "b") { $0.workerCount = 1 }
        #expect(all == one)
        var bad = Archiver.Configuration()
        bad.workerCount = 0
        #expect(throws: CairnError.self) { _ = try Archiver(sink: StallableSink(stalled: false), configuration: bad) }
    }

    static var devHasOtherFileSystems: Bool {
        guard let dev = try? FileStatus.of(Array("/dev".utf8)), let shm = try? FileStatus.of(Array("/dev/shm".utf8)) else {
            return false
        }
        return shm.kind == .directory && dev.device != shm.device
    }

    @Test(
        "staysOnOneFileSystem keeps a mount point's directory entry but nothing below it",
        .enabled(if: devHasOtherFileSystems, "needs /dev/shm mounted on another file system than /dev"))
    func oneFileSystem() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-onefs")
        defer { work.remove() }
        // Put a file on /dev/shm so there is something below the mount point to leave out.
        let marker = "/dev/shm/cairn-onefs-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try Data("below a mount point".utf8).write(to: URL(fileURLWithPath: marker))
        defer { unlink(marker) }
        let markerInArchive = "dev/shm/" + PathBytes.lastComponent(Array(marker.utf8)).map { String(UnicodeScalar($0)) }.joined()
        for stays in [false, true] {
            var configuration = Archiver.Configuration()
            configuration.staysOnOneFileSystem = stays
            let path = work.appending("dev-\(stays).cairn")
            let archiver = try await Archiver(writingTo: .file(path: path), configuration: configuration)
            try await archiver.appendItem(at: URL(fileURLWithPath: "/dev"))
            _ = try await archiver.finish()
            let listed = try Self.paths(inArchive: path)
            #expect(listed.contains("dev/shm"), "the mount point's own entry is kept")
            #expect(listed.contains(markerInArchive) == !stays, "\(stays): \(listed.filter { $0.hasPrefix("dev/shm") })")
        }
    }

    @Test("create --exclude, --exclude-from, --files-from (file, stdin, --null), -v and -T")
    func habitsOnTheCommandLine() throws {
        let work = try TemporaryDirectory(prefix: "cairn-habits")
        defer { work.remove() }
        try Self.tree(seed: 9).materialize(at: work.appending("src"))
        let excluded = try CreateCLI.run(
            ["create", "-q", "-v", "--exclude", "*.log", "--exclude", "cache", "-o", "a.cairn", "src"], in: work.path)
        #expect(excluded.status == 0, "\(excluded.stderr)")
        let expected = ["src", "src/a.txt", "src/docs", "src/docs/readme.md", "src/logs"]
        #expect(try Self.paths(inArchive: work.appending("a.cairn")) == expected)
        #expect(excluded.stderr.split(separator: "\n").map(String.init) == expected, "-v: one line per entry")

        try Data("*.log\n\ncache\n".utf8).write(to: URL(fileURLWithPath: work.appending("patterns")))
        let fromFile = try CreateCLI.run(["create", "-q", "--exclude-from", "patterns", "-o", "b.cairn", "src"], in: work.path)
        #expect(fromFile.status == 0, "\(fromFile.stderr)")
        #expect(try Self.contents(work.appending("b.cairn")) == Self.contents(work.appending("a.cairn")))

        try Data("src/a.txt\nsrc/docs\n".utf8).write(to: URL(fileURLWithPath: work.appending("names")))
        let names = try CreateCLI.run(["create", "-q", "--files-from", "names", "-o", "c.cairn"], in: work.path)
        #expect(names.status == 0, "\(names.stderr)")
        let listed = ["a.txt", "docs", "docs/old.log", "docs/readme.md"]
        #expect(try Self.paths(inArchive: work.appending("c.cairn")) == listed)
        try Data("src/a.txt\0src/docs\0".utf8).write(to: URL(fileURLWithPath: work.appending("names0")))
        let stdin = try CreateCLI.run(
            ["create", "-q", "--files-from", "-", "--null", "-o", "d.cairn"], in: work.path,
            standardInput: work.appending("names0"))
        #expect(stdin.status == 0, "\(stdin.stderr)")
        #expect(try Self.paths(inArchive: work.appending("d.cairn")) == listed)

        let one = try CreateCLI.run(["create", "-q", "-T", "1", "-o", "e.cairn", "src"], in: work.path)
        let all = try CreateCLI.run(["create", "-q", "-o", "f.cairn", "src"], in: work.path)
        #expect(one.status == 0 && all.status == 0, "\(one.stderr) \(all.stderr)")
        #expect(try Self.contents(work.appending("e.cairn")) == Self.contents(work.appending("f.cairn")))
        #expect(try CreateCLI.run(["create", "-T", "0", "-o", "g.cairn", "src"], in: work.path).status == 2)
        #expect(try CreateCLI.run(["create", "--null", "-o", "g.cairn", "src"], in: work.path).status == 2)
        let help = try CreateCLI.run(["create", "--help"])
        for option in ["--exclude PATTERN", "--exclude-from FILE", "--files-from FILE", "--null", "--one-file-system", "-v, --verbose", "-T, --threads N", "-f, --force", "--progress"] {
            #expect(help.stdout.contains(option), "--help mentions \(option)")
        }
    }

    // MARK: - Honest progress (item 6)

    @Test("Archiver.progress is indeterminate without an estimate, and a too-small estimate grows with the content")
    func progressIsHonest() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-progress")
        defer { work.remove() }
        try Self.tree(seed: 6).materialize(at: work.appending("src"))
        let content = Int64(Self.tree(seed: 6).fileBytes)

        let unknown = try await Archiver(writingTo: .file(path: work.appending("a.cairn")))
        #expect(unknown.progress.totalUnitCount == -1)
        #expect(unknown.progress.isIndeterminate)
        try await unknown.appendItem(at: work.url(appending: "src"))
        #expect(unknown.progress.totalUnitCount == -1, "no estimate: the total stays unknown")
        #expect(unknown.progress.completedUnitCount == content)
        _ = try await unknown.finish()
        #expect(unknown.progress.totalUnitCount == content)

        var configuration = Archiver.Configuration()
        configuration.sizeEstimate = 1000
        let small = try await Archiver(writingTo: .file(path: work.appending("b.cairn")), configuration: configuration)
        #expect(small.progress.totalUnitCount == 1000)
        try await small.appendItem(at: work.url(appending: "src"))
        #expect(small.progress.completedUnitCount == content, "completed counts every byte read, not at most the estimate")
        // It grows ahead of the content (ByteProgress), so the fraction is not stuck at 100%.
        #expect(small.progress.totalUnitCount > content, "the total grows with the content")
        _ = try await small.finish()
        #expect(small.progress.totalUnitCount == content, "finish sets the real total")
    }

    // MARK: - Messages in words (item 8)

    @Test("a socket is reported in words, and the summary says '1 entry', not '1 entries'")
    func messagesUseWords() throws {
        let work = try TemporaryDirectory(prefix: "cairn-create-words")
        defer { work.remove() }
        try FileManager.default.createDirectory(atPath: work.appending("one"), withIntermediateDirectories: true)
        try Data("x".utf8).write(to: URL(fileURLWithPath: work.appending("one/x")))
        let single = try CreateCLI.run(["create", "-o", "one.cairn", "one/x"], in: work.path)
        #expect(single.status == 0, "\(single.stderr)")
        #expect(single.stdout.contains("created one.cairn: 1 entry, "), "\(single.stdout)")
        let two = try CreateCLI.run(["create", "-o", "two.cairn", "one"], in: work.path)
        #expect(two.stdout.contains("created two.cairn: 2 entries, "), "\(two.stdout)")

        try SourceFaultTests.makeSocket(at: work.appending("one/socket"))
        let socket = try CreateCLI.run(["create", "-q", "-o", "three.cairn", "one"], in: work.path)
        #expect(socket.status == 3)
        #expect(socket.stderr.contains("one/socket: sockets are not archived; skipped"), "\(socket.stderr)")
        #expect(!socket.stderr.contains("socket files"), "\(socket.stderr)")
        #expect(FileStatus.Kind.blockDevice.description == "block device")
        #expect(FileStatus.Kind.characterDevice.description == "character device")
        #expect(FileStatus.Kind.fifo.pluralDescription == "FIFOs")
    }
}

/// Runs the `cairn` built next to this test bundle.
enum CreateCLI {
    static func run(
        _ arguments: [String], in directory: String? = nil, standardInput: String? = nil, timeout: Double = Await.safetyBound
    ) throws -> ChildProcess.Result {
        try ChildProcess.run(
            ChildProcess.cairnExecutable(besideBundle: Bundle.module.bundleURL), arguments, in: directory,
            standardInput: standardInput, timeout: timeout)
    }
}

@Suite("Create safety (review fixes)")
struct CreateReviewTests {
    static var cairn: URL {
        get throws { try ChildProcess.cairnExecutable(besideBundle: Bundle.module.bundleURL) }
    }

    @Test("create -o - with standard output redirected into the tree being archived leaves that file out, as -o FILE does")
    func standardOutputInsideTheTreeIsLeftOut() throws {
        let work = try TemporaryDirectory(prefix: "cairn-stdout-inside")
        defer { work.remove() }
        var tree = TreeBuilder()
        tree.file("a.txt", Array("content".utf8))
        try tree.materialize(at: work.appending("src"))
        let cairn = try Self.cairn.path
        let created = try ChildProcess.run(
            URL(filePath: "/bin/sh"), ["-c", "exec \"$0\" create -o - src > src/out.cairn", cairn], in: work.path)
        #expect(created.status == 0, "\(created.stderr)")
        let listed = try ChildProcess.run(Self.cairn, ["list", "src/out.cairn"], in: work.path)
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout.contains("src/a.txt"), "\(listed.stdout)")
        #expect(!listed.stdout.contains("out.cairn"), "\(listed.stdout)")
    }

    @Test("a symlink planted at ARCHIVE.partial is never written through, with or without --force")
    func symlinkAtPartialIsNotFollowed() throws {
        let work = try TemporaryDirectory(prefix: "cairn-partial-link")
        defer { work.remove() }
        var tree = TreeBuilder()
        tree.file("a.txt", Array("content".utf8))
        try tree.materialize(at: work.appending("src"))
        try RawFileSystem.writeFile(Array(work.appending("victim").utf8), Array("precious".utf8))
        symlink(work.appending("victim"), work.appending("x.cairn.partial"))
        symlink(work.appending("created-elsewhere"), work.appending("w.cairn.partial"))
        for arguments in [["create", "-q", "-f", "-o", "x.cairn", "src"], ["create", "-q", "--resume", "-o", "x.cairn", "src"],
            ["create", "-q", "-o", "w.cairn", "src"], ["create", "-q", "-f", "-o", "w.cairn", "src"]]
        {
            let result = try ChildProcess.run(try Self.cairn, arguments, in: work.path)
            #expect(result.status == 1, "\(arguments): \(result.status) \(result.stderr)")
        }
        #expect(try RawFileSystem.contents(ofFile: Array(work.appending("victim").utf8)) == Array("precious".utf8))
        #expect(!RawFileSystem.exists(Array(work.appending("created-elsewhere").utf8)))
    }

    @Test("create --resume refuses other --exclude or --one-file-system than the interrupted run's, and inherits them when none are given")
    func resumeComparesSelectionOptions() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-resume-selection")
        defer { work.remove() }
        var tree = TreeBuilder()
        for index in 0..<6 { tree.file("f\(index).log", Array("log \(index)\n".utf8)) }
        tree.file("keep.txt", Array("kept\n".utf8))
        try tree.materialize(at: work.appending("ex"))
        // An interrupted run with --exclude: its .partial, cut after its first commits.
        var configuration = Archiver.Configuration()
        configuration.exclusions = ["*.txt"]
        configuration.sourcePaths = [Array("ex".utf8)]
        let archiver = try await Archiver(writingTo: .file(path: work.appending("ex.cairn")), configuration: configuration)
        try await archiver.appendItem(at: work.url(appending: "ex"))
        await archiver.abandon()
        let refused = try ChildProcess.run(try Self.cairn, ["create", "-q", "--resume", "--exclude", "*.log", "-o", "ex.cairn", "ex"], in: work.path)
        #expect(refused.status == 1, "\(refused.stderr)")
        #expect(refused.stderr.contains("selection options --exclude *.log differ from the archive's --exclude *.txt"), "\(refused.stderr)")
        #expect(refused.stderr.components(separatedBy: "differ from").count == 2, "named once: \(refused.stderr)")
        let inherited = try ChildProcess.run(try Self.cairn, ["create", "-q", "--resume", "-o", "ex.cairn", "ex"], in: work.path)
        #expect(inherited.status == 0, "\(inherited.stderr)")
        let extractor = try await Extractor(at: .file(path: work.appending("ex.cairn")))
        defer { extractor.close() }
        #expect(!extractor.entries.contains { $0.path.hasSuffix(".txt") }, "\(extractor.entries.map(\.path))")
        #expect(extractor.entries.filter { $0.path.hasSuffix(".log") }.count == 6)
    }
}
