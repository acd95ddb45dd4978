import Cairn
import CairnTestSupport
import Foundation
import Synchronization
import Testing

/// The public API's `URL` forms (issue 11 item 6): each does what its path form does, with the
/// labels of the rule (`at:` for what is read, `writingTo:` / `to:` for what is written); the
/// size estimate; the async transfer into any sink; errors that name their archive.
@Suite("Public API")
struct PublicAPITests {
    // MARK: - Fixtures

    /// A small tree: two files (one 300 KiB, seeded), a directory and a symlink.
    static func tree(seed: UInt64 = 61) -> TreeBuilder {
        var generator = SeededGenerator(seed: seed)
        var tree = TreeBuilder()
        tree.directory("data")
        tree.file("data/a.bin", generator.bytes(300 * 1024))
        tree.file("data/b.txt", Array("hello\n".utf8))
        tree.symlink("data/link", target: "b.txt")
        return tree
    }

    /// `tree` materialised under `directory/src`, archived through the path form into
    /// `directory/a.cairn`; returns the source and the archive's path.
    static func archive(_ tree: TreeBuilder, in directory: TemporaryDirectory) async throws -> (source: URL, archive: String) {
        let source = directory.appending("src")
        try tree.materialize(at: source)
        let path = directory.appending("a.cairn")
        let archiver = try await Archiver(writingTo: .file(path: path))
        try await archiver.appendItem(at: URL(filePath: source + "/data"))
        _ = try await archiver.finish()
        return (URL(filePath: source + "/data"), path)
    }

    /// Collects what an ``ArchiveSink`` is given; optionally cancels the sending task at its
    /// first write.
    final class CollectingSink: ArchiveSink, Sendable {
        struct State {
            var bytes: [UInt8] = []
            var writes = 0
            var finished = 0
            var abandoned = 0
        }
        let state = Mutex(State())
        let cancelsAtFirstWrite: Bool

        init(cancelsAtFirstWrite: Bool = false) { self.cancelsAtFirstWrite = cancelsAtFirstWrite }

        func write(_ bytes: [UInt8]) async throws {
            let first = state.withLock { state in
                state.bytes += bytes
                state.writes += 1
                return state.writes == 1
            }
            if first, cancelsAtFirstWrite { withUnsafeCurrentTask { $0?.cancel() } }
        }

        func finish() async throws { state.withLock { $0.finished += 1 } }
        func abandon() async { state.withLock { $0.abandoned += 1 } }

        var snapshot: State { state.withLock { $0 } }
    }

    static func bytes(_ path: String) throws -> [UInt8] { Array(try Data(contentsOf: URL(filePath: path))) }

    /// Flips every bit of the byte at `offset` of the file at `url`.
    static func flipByte(at offset: UInt64, in url: URL) throws {
        var bytes = try Data(contentsOf: url)
        let index = bytes.startIndex + Int(offset)
        bytes[index] = ~bytes[index]
        try bytes.write(to: url)
    }

    // MARK: - Each URL form does what its path form does

    @Test("Archiver(writingTo: URL) and withArchiver(writingTo: URL) write the archive the path form writes, byte for byte")
    func archiverURLForms() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (source, path) = try await Self.archive(Self.tree(), in: directory)
        let viaURL = directory.url(appending: "url.cairn")
        let archiver = try await Archiver(writingTo: viaURL)
        try await archiver.appendItem(at: source)
        _ = try await archiver.finish()
        #expect(try Self.bytes(viaURL.path) == (try Self.bytes(path)))

        let scoped = directory.url(appending: "scoped.cairn")
        let properties = try await Archiver.withArchiver(writingTo: ArchiveLocation(scoped)) { try await $0.appendItem(at: source) }
        #expect(properties.uncompressedBytes == 300 * 1024 + 6)
        #expect(try Self.bytes(scoped.path) == (try Self.bytes(path)))

        // FileSink(writingTo:) is the sink the URL form uses.
        let sinkURL = directory.url(appending: "sink.cairn")
        let sink = try FileSink(writingTo: ArchiveLocation(sinkURL))
        #expect(sink.url == sinkURL)
        #expect(sink.path == sinkURL.path)
        let viaSink = try Archiver(sink: sink)
        try await viaSink.appendItem(at: source)
        _ = try await viaSink.finish()
        #expect(try Self.bytes(sinkURL.path) == (try Self.bytes(path)))
        #expect(throws: CairnError.self) { try FileSink(writingTo: ArchiveLocation(sinkURL)) }  // .alreadyExists
    }

    @Test("Archiver(resuming: URL) continues an abandoned archive to the bytes of an uninterrupted one")
    func resumingURLForm() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (source, path) = try await Self.archive(Self.tree(), in: directory)
        let location = directory.url(appending: "resumed.cairn")
        let first = try await Archiver(writingTo: location)
        try await first.appendItem(at: source)
        await first.abandon()
        #expect(FileManager.default.fileExists(atPath: location.path + ".partial"))
        let resumed = try Archiver(resuming: ArchiveLocation(location))
        #expect(resumed.isResumed)
        try await resumed.appendItem(at: source)
        _ = try await resumed.finish()
        #expect(try Self.bytes(location.path) == (try Self.bytes(path)))
    }

    @Test("Extractor(at:), withExtractor(at: URL), verifyArchive(at:) and verifyPrefix(at:) agree with the path forms")
    func extractorURLForms() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (_, path) = try await Self.archive(Self.tree(), in: directory)
        let location = URL(filePath: path)

        let byPath = try await Extractor(at: .file(path: path))
        defer { byPath.close() }
        let byURL = try await Extractor(at: location)
        defer { byURL.close() }
        #expect(byURL.entries == byPath.entries)
        #expect(byURL.summary == byPath.summary)
        #expect(byURL.entries.map(\.path) == ["data", "data/a.bin", "data/b.txt", "data/link"])

        let restored = directory.url(appending: "restored")
        let count = try await Extractor.withExtractor(at: ArchiveLocation(location)) { extractor in
            try await extractor.extractAll(to: restored)
            return extractor.entries.count
        }
        #expect(count == 4)
        #expect(try Self.bytes(restored.path + "/data/b.txt") == Array("hello\n".utf8))

        #expect(try await Extractor.verifyArchive(at: ArchiveLocation(location)) == (try await Extractor.verifyArchive(at: .file(path: path))))
        let prefixByURL = try await Extractor.verifyPrefix(at: ArchiveLocation(location))
        let prefixByPath = try await Extractor.verifyPrefix(at: .file(path: path))
        #expect(prefixByURL.isComplete && prefixByPath.isComplete)
        #expect(prefixByURL.resumeToken == prefixByPath.resumeToken)
    }

    @Test("URL forms refuse schemes they cannot read or write, naming the URL")
    func unsupportedSchemes() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let ftp = try #require(URL(string: "ftp://host/a.cairn"))
        let https = try #require(URL(string: "https://127.0.0.1:9/a.cairn"))
        let errors = [
            try await #require(throws: CairnError.self) { try await Extractor(at: ftp) },
            try await #require(throws: CairnError.self) { try await Archiver(writingTo: https) },
            try #require(throws: CairnError.self) { try FileSink(writingTo: ArchiveLocation(https)) },
            try #require(throws: CairnError.self) { try Archiver.sizeEstimate(of: [https]) },
        ]
        #expect(errors.map(\.code) == [.invalidArgument, .invalidArgument, .invalidArgument, .invalidArgument])
        #expect(errors.map(\.path) == [ftp.absoluteString, https.absoluteString, https.absoluteString, https.absoluteString])
        let fetcher = try ArchiveFetcher(from: ArchiveLocation(https))
        #expect(fetcher.url == https.absoluteString)
        #expect(fetcher.source.kind == .http)
        let fetchError = try await #require(throws: CairnError.self) { _ = try await fetcher.fetch(to: ArchiveLocation(https)) }
        #expect(fetchError.code == .invalidArgument)
        let prefixError = try await #require(throws: CairnError.self) { _ = try await Extractor.verifyPrefix(at: ArchiveLocation(https)) }
        #expect(prefixError.code == .invalidArgument)
    }

    @Test("FetchOptions.seeds are locations: a file URL and an https URL each keep their kind")
    func seedLocations() throws {
        var options = FetchOptions()
        options.seeds = [
            try ArchiveLocation(URL(filePath: "/backups/one.cairn")),
            try ArchiveLocation(try #require(URL(string: "https://host/two.cairn"))),
        ]
        #expect(options.seeds.map(\.description) == ["/backups/one.cairn", "https://host/two.cairn"])
        #expect(options.seeds.map(\.kind) == [.file, .http])
    }

    @Test("Over HTTP: Extractor(at:), the async send and fetch(to: URL) give what the local file gives")
    func httpURLForms() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (_, path) = try await Self.archive(Self.tree(), in: directory)
        let www = directory.appending("www")
        try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: path, toPath: www + "/a.cairn")
        let server = try NginxServer(root: www)
        defer { server.stop() }
        let remote = try #require(URL(string: server.url("a.cairn")))

        let local = try await Extractor(at: .file(path: path))
        defer { local.close() }
        let extractor = try await Extractor(at: remote)
        defer { extractor.close() }
        #expect(extractor.entries == local.entries)
        #expect(try await Extractor.verifyArchive(at: ArchiveLocation(remote)).contentBytes == local.summary.contentBytes)

        let sink = CollectingSink()
        try await ArchiveTransfer.send(archiveAt: ArchiveLocation(remote), to: sink)
        #expect(sink.snapshot.bytes == (try Self.bytes(path)))
        #expect(sink.snapshot.finished == 1)

        let fetched = directory.url(appending: "fetched.cairn")
        _ = try await ArchiveFetcher(from: ArchiveLocation(remote)).fetch(to: ArchiveLocation(fetched))
        #expect(try Self.bytes(fetched.path) == (try Self.bytes(path)))

        let missing = try #require(URL(string: server.url("missing.cairn")))
        let error = try await #require(throws: CairnError.self) { try await Extractor(at: missing) }
        #expect(error.code == .httpStatus)
        #expect(error.path == missing.absoluteString)
    }

    @Test("s3:// through Extractor(at:) and the async send: the object reads as the local file (rclone serve s3)")
    func s3URLForms() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (_, path) = try await Self.archive(Self.tree(), in: directory)
        let server = try RcloneS3Server()
        defer { server.stop() }
        // rclone serves its root's files as objects: the archive is put in place directly.
        let object = server.objectPath(key: "exports/a.cairn")
        try FileManager.default.createDirectory(atPath: (object as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: path, toPath: object)
        var environment = server.environment
        environment["AWS_SESSION_TOKEN"] = ""
        let location = try #require(URL(string: "s3://cairn/exports/a.cairn"))

        let local = try await Extractor(at: .file(path: path))
        defer { local.close() }
        let remote = try await Extractor(at: ArchiveLocation(location, environment: environment))
        defer { remote.close() }
        #expect(remote.entries == local.entries)
        let restored = directory.url(appending: "restored")
        try await remote.extractItem(atPathInArchive: "data/a.bin", to: restored)
        #expect(try Self.bytes(restored.path + "/data/a.bin") == (try Self.bytes(directory.appending("src/data/a.bin"))))

        let sink = CollectingSink()
        try await ArchiveTransfer.send(archiveAt: ArchiveLocation(location, environment: environment), from: 0, expecting: nil, to: sink)
        #expect(sink.snapshot.bytes == (try Self.bytes(path)))
        #expect(sink.snapshot.finished == 1)

        // Without credentials: refused before any request, naming the variable.
        let bare = ["AWS_ENDPOINT_URL": server.endpoint]
        let error = try await #require(throws: CairnError.self) { try await Extractor(at: ArchiveLocation(location, environment: bare)) }
        #expect(error.code == .invalidArgument)
        #expect(error.description.contains("AWS_ACCESS_KEY_ID"), "\(error)")
    }

    // MARK: - Size estimate

    @Test("sizeEstimate counts regular files below the URLs, follows no symlink, and leaves out what the exclusions leave out")
    func sizeEstimate() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var tree = TreeBuilder()
        tree.directory("top")
        tree.file("top/a", [UInt8](repeating: 1, count: 100))
        tree.directory("top/dir")
        tree.file("top/dir/b", [UInt8](repeating: 2, count: 200))
        tree.file("top/dir/skip.log", [UInt8](repeating: 3, count: 300))
        tree.directory("top/cache")
        tree.file("top/cache/c", [UInt8](repeating: 4, count: 400))
        tree.symlink("top/link-to-a", target: "a")
        tree.symlink("top/link-to-dir", target: "dir")
        tree.symlink("top/link-outside", target: "../outside")
        tree.directory("outside")
        tree.file("outside/big", [UInt8](repeating: 5, count: 5000))
        tree.file("single", [UInt8](repeating: 6, count: 7))
        try tree.materialize(at: directory.path)
        let top = directory.url(appending: "top")

        #expect(try Archiver.sizeEstimate(of: [top]) == 1000)
        let exclusions = ["*.log", "cache"]
        #expect(try Archiver.sizeEstimate(of: [top], excluding: exclusions) == 300)
        #expect(try Archiver.sizeEstimate(of: [top, directory.url(appending: "single")], excluding: exclusions) == 307)
        // A source is stored under its last component, which the exclusions see too.
        #expect(try Archiver.sizeEstimate(of: [directory.url(appending: "top/cache")], excluding: ["cache"]) == 0)
        #expect(try Archiver.sizeEstimate(of: [directory.url(appending: "top/link-to-dir")]) == 0)
        #expect(try Archiver.sizeEstimate(of: []) == 0)

        // The estimate is what the archiver then reads, with the same exclusions.
        var configuration = Archiver.Configuration()
        configuration.exclusions = exclusions
        let properties = try await Archiver.withArchiver(writingTo: ArchiveLocation(directory.url(appending: "x.cairn")), configuration: configuration) {
            try await $0.appendItem(at: top)
        }
        #expect(properties.uncompressedBytes == 300)

        let missing = directory.url(appending: "missing")
        let error = try #require(throws: CairnError.self) { try Archiver.sizeEstimate(of: [missing]) }
        #expect(error.code == .notFound)
        #expect(error.path == missing.path)
    }

    // MARK: - The async transfer

    @Test("send(archiveAt: URL, to: sink) sends the whole archive, or the rest after a resume token, then finishes the sink")
    func asyncSend() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var generator = SeededGenerator(seed: 62)
        var tree = TreeBuilder()
        tree.directory("data")
        tree.file("data/big.bin", generator.bytes(3 << 20))  // more than one 1 MiB block
        tree.file("data/small", Array("x".utf8))
        let (_, path) = try await Self.archive(tree, in: directory)
        let whole = try Self.bytes(path)

        let sink = CollectingSink()
        try await ArchiveTransfer.send(archiveAt: ArchiveLocation(URL(filePath: path)), to: sink)
        #expect(sink.snapshot.bytes == whole)
        #expect(sink.snapshot.writes == 4)
        #expect(sink.snapshot.finished == 1 && sink.snapshot.abandoned == 0)

        // A receiver holding a cut copy sends its token; the rest completes it.
        let cut = directory.appending("cut.cairn")
        try Data(whole.prefix(whole.count * 2 / 3)).write(to: URL(filePath: cut))
        let prefix = try await Extractor.verifyPrefix(at: ArchiveLocation(URL(filePath: cut)))
        #expect(prefix.verifiedLength > 0 && !prefix.isComplete)
        let rest = CollectingSink()
        try await ArchiveTransfer.send(
            archiveAt: ArchiveLocation(URL(filePath: path)), from: prefix.verifiedLength, expecting: prefix.resumeToken, to: rest)
        #expect(Array(whole.prefix(Int(prefix.verifiedLength))) + rest.snapshot.bytes == whole)

        // Into a FileSink: the copy appears whole.
        let copy = directory.url(appending: "copy.cairn")
        try await ArchiveTransfer.send(archiveAt: ArchiveLocation(URL(filePath: path)), to: FileSink(writingTo: ArchiveLocation(copy)))
        #expect(try Self.bytes(copy.path) == whole)

        // A token of another archive: refused before a byte is sent, naming the archive; the
        // sink is abandoned.
        let wrong = CollectingSink()
        let token = ResumeToken(length: prefix.verifiedLength, chainDigest: .zero)
        let error = try await #require(throws: CairnError.self) {
            try await ArchiveTransfer.send(archiveAt: ArchiveLocation(URL(filePath: path)), from: token.length, expecting: token, to: wrong)
        }
        #expect(error.code == .tokenMismatch)
        #expect(error.path == path)
        #expect(wrong.snapshot.bytes.isEmpty && wrong.snapshot.abandoned == 1 && wrong.snapshot.finished == 0)

        let past = CollectingSink()
        let pastError = try await #require(throws: CairnError.self) {
            try await ArchiveTransfer.send(archiveAt: ArchiveLocation(URL(filePath: path)), from: UInt64(whole.count) + 1, to: past)
        }
        #expect(pastError.code == .invalidArgument && pastError.path == path)
        #expect(past.snapshot.abandoned == 1)

        let missing = CollectingSink()
        let missingError = try await #require(throws: CairnError.self) {
            try await ArchiveTransfer.send(archiveAt: ArchiveLocation(directory.url(appending: "none.cairn")), to: missing)
        }
        #expect(missingError.code == .notFound && missingError.path == directory.appending("none.cairn"))
        #expect(missing.snapshot.abandoned == 1)
    }

    @Test("A cancelled send stops at the next block, throws CancellationError itself, and abandons the sink")
    func asyncSendCancelled() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var generator = SeededGenerator(seed: 63)
        var tree = TreeBuilder()
        tree.file("big.bin", generator.bytes(3 << 20))
        let source = directory.appending("src")
        try tree.materialize(at: source)
        let path = directory.appending("a.cairn")
        _ = try await Archiver.withArchiver(writingTo: ArchiveLocation(URL(filePath: path))) { try await $0.appendItem(at: URL(filePath: source)) }

        let sink = CollectingSink(cancelsAtFirstWrite: true)
        let task = Task { try await ArchiveTransfer.send(archiveAt: ArchiveLocation(URL(filePath: path)), to: sink) }
        let outcome = await task.result
        #expect(throws: CancellationError.self) { try outcome.get() }
        #expect(sink.snapshot.writes == 1)
        #expect(sink.snapshot.bytes.count == 1 << 20)
        #expect(sink.snapshot.abandoned == 1 && sink.snapshot.finished == 0)

        // Cancelled before it starts: nothing is sent.
        let early = CollectingSink()
        let cancelled = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await ArchiveTransfer.send(archiveAt: ArchiveLocation(URL(filePath: path)), to: early)
        }
        let earlyOutcome = await cancelled.result
        #expect(throws: CancellationError.self) { try earlyOutcome.get() }
        #expect(early.snapshot.writes == 0 && early.snapshot.abandoned == 1)
    }

    @Test("The FileHandle send still sends, and throws typed CairnError naming the archive")
    func synchronousSend() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (_, path) = try await Self.archive(Self.tree(), in: directory)
        let outputPath = directory.appending("out")
        #expect(FileManager.default.createFile(atPath: outputPath, contents: nil))
        let output = try FileHandle(forWritingTo: URL(filePath: outputPath))
        let source = try await ArchiveLocation.file(path: path).openRandomAccess()
        defer { source.close() }
        try ArchiveTransfer.send(source, from: 0, expecting: nil, to: output)
        try output.close()
        #expect(try Self.bytes(outputPath) == (try Self.bytes(path)))

        let handle = try FileHandle(forWritingTo: URL(filePath: outputPath))
        defer { try? handle.close() }
        let token = ResumeToken(length: 100, chainDigest: .zero)
        do {
            try ArchiveTransfer.send(source, from: 100, expecting: token, to: handle)
            Issue.record("a wrong token was accepted")
        } catch {
            // `error` is a CairnError by the signature: no cast.
            #expect(error.code == .tokenMismatch || error.code == .corrupted)
            #expect(error.path == path)
        }
    }

    // MARK: - Errors name their archive

    @Test("A damaged archive's errors name it: opening, verifying, and a verified prefix's stop reason")
    func errorsNameTheArchive() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (_, path) = try await Self.archive(Self.tree(), in: directory)
        let size = try Self.bytes(path).count

        // The footer's last bytes: opening fails.
        let tail = directory.appending("tail.cairn")
        try FileManager.default.copyItem(atPath: path, toPath: tail)
        try Self.flipByte(at: UInt64(size - 2), in: URL(filePath: tail))
        let openError = try await #require(throws: CairnError.self) { try await Extractor(at: URL(filePath: tail)) }
        #expect(openError.path == tail)

        // A byte inside the big file's chunk: the record's CRC fails.
        let middle = directory.appending("middle.cairn")
        try FileManager.default.copyItem(atPath: path, toPath: middle)
        try Self.flipByte(at: UInt64(size / 3), in: URL(filePath: middle))
        let verifyError = try await #require(throws: CairnError.self) { try await Extractor.verifyArchive(at: ArchiveLocation(URL(filePath: middle))) }
        #expect(verifyError.path == middle)
        #expect(verifyError.offset != nil)
        let prefix = try await Extractor.verifyPrefix(at: ArchiveLocation(URL(filePath: middle)))
        #expect(!prefix.isComplete)
        let stop = try #require(prefix.stopReason)
        #expect(stop.path == middle)
        #expect(stop.offset != nil)

        // A bad configuration through the URL form names the archive it was to write.
        var configuration = Archiver.Configuration()
        configuration.workerCount = 0
        let location = directory.url(appending: "bad.cairn")
        let configurationError = try await #require(throws: CairnError.self) { try await Archiver(writingTo: location, configuration: configuration) }
        #expect(configurationError.code == .invalidArgument)
        #expect(configurationError.path == location.path)
    }
}
