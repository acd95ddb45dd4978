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
        let extractor = try Extractor(path: path)
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
        let archiver = try Archiver(writingTo: path)
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
        let report = try await Extractor.verifyArchive(atPath: path)
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
        let archiver = try Archiver(writingTo: archive, configuration: configuration)
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
        _ = try await Extractor.verifyArchive(atPath: work.appending("src.cairn"))

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

    // MARK: - Honest progress (item 6)

    @Test("Archiver.progress is indeterminate without an estimate, and a too-small estimate grows with the content")
    func progressIsHonest() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-progress")
        defer { work.remove() }
        try Self.tree(seed: 6).materialize(at: work.appending("src"))
        let content = Int64(Self.tree(seed: 6).fileBytes)

        let unknown = try Archiver(writingTo: work.appending("a.cairn"))
        #expect(unknown.progress.totalUnitCount == -1)
        #expect(unknown.progress.isIndeterminate)
        try await unknown.appendItem(at: work.url(appending: "src"))
        #expect(unknown.progress.totalUnitCount == -1, "no estimate: the total stays unknown")
        #expect(unknown.progress.completedUnitCount == content)
        _ = try await unknown.finish()
        #expect(unknown.progress.totalUnitCount == content)

        var configuration = Archiver.Configuration()
        configuration.sizeEstimate = 1000
        let small = try Archiver(writingTo: work.appending("b.cairn"), configuration: configuration)
        #expect(small.progress.totalUnitCount == 1000)
        try await small.appendItem(at: work.url(appending: "src"))
        #expect(small.progress.completedUnitCount == content, "completed counts every byte read, not at most the estimate")
        #expect(small.progress.totalUnitCount == content, "the total grows with the content")
        _ = try await small.finish()
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
        _ arguments: [String], in directory: String? = nil, standardInput: String? = nil, timeout: Double = 60
    ) throws -> ChildProcess.Result {
        try ChildProcess.run(
            ChildProcess.cairnExecutable(besideBundle: Bundle.module.bundleURL), arguments, in: directory,
            standardInput: standardInput, timeout: timeout)
    }
}
