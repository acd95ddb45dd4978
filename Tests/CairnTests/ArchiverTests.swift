import Cairn
import CairnTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

/// The archiver end to end: what goes in comes out identical, deduplication, determinism,
/// refusals, cancellation, export properties and per-file warnings.
@Suite("Archiver")
struct ArchiverTests {
    static let codecs: [CompressionMethod] = [.lz4, .zlib(), .zstd(), .none]
    static let chunkings: [ChunkingPolicy] = [
        .default, .fixed(size: 65536), .contentDefined(minimum: 2048, average: 8192, maximum: 32768),
    ]
    static let smallCDC = ChunkingPolicy.contentDefined(minimum: 2048, average: 8192, maximum: 32768)
    static let mebibyte = 1024 * 1024

    /// A name that is not UTF-8: "café.txt" in Latin-1.
    static let latin1Name: [UInt8] = [0x63, 0x61, 0x66, 0xE9, 0x2E, 0x74, 0x78, 0x74]

    /// Text that compresses: seeded words.
    static func text(_ count: Int, seed: UInt64) -> [UInt8] {
        var generator = SeededGenerator(seed: seed)
        let words = ["cairn", "chunk", "stone", "path", "archive", "ridge", "summit", "trail", "\n"].map { Array($0.utf8) }
        var out: [UInt8] = []
        out.reserveCapacity(count + 16)
        while out.count < count {
            out += words[Int(generator.next() % UInt64(words.count))]
            out.append(0x20)
        }
        return Array(out.prefix(count))
    }

    /// Every kind the archiver stores, with distinct modes and nanosecond times.
    static func sampleTree(seed: UInt64 = 1) -> TreeBuilder {
        var generator = SeededGenerator(seed: seed)
        var tree = TreeBuilder()
        tree.directory("docs", mode: 0o750, mtime: 1_500_000_000_000_000_001)
        tree.file("docs/readme.txt", text(5000, seed: seed), mode: 0o640, mtime: 1_600_000_000_123_456_789)
        tree.file("docs/random.bin", generator.bytes(300_000), mode: 0o600, mtime: 1_600_000_001_987_654_321)
        tree.file("docs/words.txt", text(200_000, seed: seed + 1), mode: 0o644, mtime: 1_700_000_000_000_000_007)
        tree.hardLink("docs/readme-link.txt", to: "docs/readme.txt")
        tree.file("empty.txt", [], mode: 0o444, mtime: 1_000_000_000_999_999_999)
        tree.file("script.sh", Array("#!/bin/sh\necho hi\n".utf8), mode: 0o755, mtime: 1_650_000_000_000_000_500)
        tree.file("old.txt", Array("before 1970".utf8), mode: 0o644, mtime: -1_234_567_891)
        tree.directory("empty-dir", mode: 0o700, mtime: 1_400_000_000_000_000_003)
        tree.directory("nested/deeper/deepest", mode: 0o755, mtime: 1_300_000_000_000_000_004)
        tree.symlink("link-to-readme", target: "docs/readme.txt", mtime: 1_200_000_000_000_000_005)
        tree.symlink("dangling", target: "does/not/exist", mtime: 1_200_000_000_000_000_006)
        tree.file(bytes: latin1Name, Array("non-UTF-8 name".utf8), mode: 0o604, mtime: 1_111_111_111_111_111_111)
        return tree
    }

    @Test("round trip keeps content, modes, ns mtimes, symlinks, empty dirs, hard links and a non-UTF-8 name",
          arguments: codecs, chunkings)
    func roundTrip(codec: CompressionMethod, chunking: ChunkingPolicy) async throws {
        var configuration = Archiver.Configuration()
        configuration.compression = codec
        configuration.chunking = chunking
        let tree = Self.sampleTree()
        let result = try await RoundTrip.archiveAndExtract(tree, configuration: configuration)
        #expect(result.source == result.extracted, "\(result.source.diff(result.extracted))")
        #expect(result.properties.warnings.isEmpty, "\(result.properties.warnings)")
        // The fixture really has what the test claims to check.
        let source = result.source.nodes
        #expect(source[Self.latin1Name]?.kind == .file)
        #expect(source[Array("docs/readme.txt".utf8)]?.hardLinkGroup == Array("docs/readme-link.txt".utf8))
        #expect(source[Array("empty-dir".utf8)]?.kind == .directory)
        #expect(source[Array("dangling".utf8)]?.linkTarget == Array("does/not/exist".utf8))
        #expect(source[Array("old.txt".utf8)]?.modificationTime == -1_234_567_891)
        #expect(result.properties.uncompressedBytes == tree.fileBytes)
    }

    @Test("three copies of a 10 MiB file archive to about the size of one")
    func threeCopiesDeduplicate() async throws {
        var generator = SeededGenerator(seed: 10)
        let content = generator.bytes(10 * Self.mebibyte)
        var tree = TreeBuilder()
        tree.file("a.bin", content)
        tree.file("b.bin", content)
        tree.file("copies/c.bin", content)
        let result = try await RoundTrip.archiveAndExtract(tree)
        let properties = result.properties
        #expect(result.source == result.extracted, "\(result.source.diff(result.extracted))")
        #expect(properties.uncompressedBytes == UInt64(30 * Self.mebibyte))
        #expect(properties.archiveBytes < UInt64(11 * Self.mebibyte), "archive is \(properties.archiveBytes) bytes")
        #expect(properties.archiveBytes == UInt64(result.archive.count))
        // Chunks are cut from each file's start, so every chunk of the copies is a duplicate.
        #expect(properties.deduplicatedBytes == UInt64(20 * Self.mebibyte))
        #expect(properties.uniqueBytes == UInt64(10 * Self.mebibyte))
        #expect(properties.referenceCount == 3 * properties.chunkCount)
    }

    @Test("a copy with one byte inserted at the front adds only a few chunks")
    func insertedByteAddsFewChunks() async throws {
        var generator = SeededGenerator(seed: 11)
        let content = generator.bytes(4 * Self.mebibyte)
        var one = TreeBuilder()
        one.file("original.bin", content)
        var two = one
        two.file("shifted.bin", [0x42] + content)
        let alone = try await RoundTrip.archiveAndExtract(one)
        let both = try await RoundTrip.archiveAndExtract(two)
        #expect(both.source == both.extracted, "\(both.source.diff(both.extracted))")
        let added = both.properties.chunkCount - alone.properties.chunkCount
        #expect(alone.properties.chunkCount > 20, "4 MiB at 64 KiB average should give dozens of chunks")
        #expect(added >= 1 && added <= 4, "the shifted copy added \(added) chunks")
    }

    @Test("the same tree archived twice, from two materialisations, gives byte-identical archives")
    func deterministic() async throws {
        var generator = SeededGenerator(seed: 12)
        var tree = Self.sampleTree(seed: 12)
        // Enough content in small chunks that hashing and compression run in parallel batches.
        tree.file("many-chunks.bin", Self.text(3 * Self.mebibyte, seed: 13) + generator.bytes(Self.mebibyte))
        var configuration = Archiver.Configuration()
        configuration.chunking = Self.smallCDC
        configuration.batchBytes = 256 * 1024
        configuration.backpressure = .watermark(low: .kibibytes(512), high: .mebibytes(1))
        configuration.compression = .zstd()
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try tree.materialize(at: directory.appending("first/tree"))
        try tree.materialize(at: directory.appending("second/tree"))
        let a = try await RoundTrip.archive(
            path: directory.appending("first/tree"), to: directory.appending("a.cairn"), configuration: configuration)
        let b = try await RoundTrip.archive(
            path: directory.appending("second/tree"), to: directory.appending("b.cairn"), configuration: configuration)
        let c = try await RoundTrip.archive(
            path: directory.appending("first/tree"), to: directory.appending("c.cairn"), configuration: configuration)
        #expect(a.bytes.count > 1_000_000)
        #expect(a.bytes == b.bytes, "archives differ at byte \(String(describing: zip(a.bytes, b.bytes).enumerated().first { $0.element.0 != $0.element.1 }?.offset))")
        #expect(a.bytes == c.bytes)
    }

    /// Random pieces (empty ones included) that concatenate to `content`.
    static func pieces(of content: [UInt8], seed: UInt64) -> [[UInt8]] {
        var generator = SeededGenerator(seed: seed)
        var pieces: [[UInt8]] = []
        var offset = 0
        while offset < content.count {
            let size = Int(generator.next() % 70_000)
            let end = min(content.count, offset + size)
            pieces.append(Array(content[offset..<end]))
            offset = end
        }
        return pieces
    }

    @Test("append(contentsOf:) from an AsyncStream of random-sized pieces round-trips and chunks like a file")
    func appendFromStream() async throws {
        var generator = SeededGenerator(seed: 14)
        let content = generator.bytes(1_500_000) + Self.text(500_000, seed: 15)
        let pieces = Self.pieces(of: content, seed: 16)
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var tree = TreeBuilder()
        tree.file("same.bin", content)
        try tree.materialize(at: directory.appending("source"))
        let stream = AsyncStream<[UInt8]> { continuation in
            for piece in pieces { continuation.yield(piece) }
            continuation.finish()
        }
        var configuration = Archiver.Configuration()
        configuration.chunking = Self.smallCDC
        let archivePath = directory.appending("stream.cairn")
        let archiver = try await Archiver(writingTo: .file(path: archivePath), configuration: configuration)
        let mtime: Timestamp = 1_234_567_890_123_456_789
        try await archiver.append(contentsOf: stream, pathInArchive: "streamed/data.bin", permissions: 0o640, modificationTime: mtime)
        try await archiver.appendItem(at: directory.url(appending: "source/same.bin"), pathInArchive: "file.bin")
        let properties = try await archiver.finish()
        #expect(properties.uncompressedBytes == UInt64(2 * content.count))
        // However the bytes arrive, the cut points are the same: the file is entirely duplicate.
        #expect(properties.deduplicatedBytes == UInt64(content.count))

        let extractor = try await Extractor(at: .file(path: archivePath))
        defer { extractor.close() }
        try await extractor.extractAll(to: directory.url(appending: "output"))
        let snapshot = try TreeSnapshot(at: directory.appending("output/streamed/data.bin"))
        let node = try #require(snapshot.nodes[[]])
        #expect(node.permissions == 0o640)
        #expect(node.modificationTime == mtime.nanosecondsSinceEpoch)
        #expect(node.size == UInt64(content.count))
        let extracted = try RawFileSystem.contents(ofFile: Array(directory.appending("output/streamed/data.bin").utf8))
        #expect(extracted == content)
    }

    static func stream(_ bytes: [UInt8]) -> AsyncStream<[UInt8]> {
        AsyncStream { continuation in
            continuation.yield(bytes)
            continuation.finish()
        }
    }

    @Test("a path already in the archive is refused with alreadyExists")
    func duplicatePathRefused() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let archiver = try await Archiver(writingTo: .file(path: directory.appending("dup.cairn")))
        try await archiver.append(contentsOf: Self.stream(Array("first".utf8)), pathInArchive: "dir/dup.txt")
        let error = await #expect(throws: CairnError.self) {
            try await archiver.append(contentsOf: Self.stream(Array("second".utf8)), pathInArchive: "dir/dup.txt/")
        }
        #expect(error?.code == .alreadyExists)
        #expect(error?.path == "dir/dup.txt")
        await archiver.abandon()
    }

    @Test("a directory appended twice is refused with alreadyExists")
    func duplicateItemRefused() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var tree = TreeBuilder()
        tree.file("x.txt", Array("x".utf8))
        try tree.materialize(at: directory.appending("tree"))
        let archiver = try await Archiver(writingTo: .file(path: directory.appending("dup.cairn")))
        try await archiver.appendItem(at: directory.url(appending: "tree"))
        let error = await #expect(throws: CairnError.self) {
            try await archiver.appendItem(at: directory.url(appending: "tree"))
        }
        #expect(error?.code == .alreadyExists)
        await archiver.abandon()
    }

    @Test("a pathInArchive with '..', '.', an empty component or a leading '/' is refused with unsafePath",
          arguments: ["../evil", "a/../../b", "a/..", "./a", "a//b", "/abs", ""])
    func unsafePathInArchiveRefused(path: String) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var tree = TreeBuilder()
        tree.file("x.txt", Array("x".utf8))
        try tree.materialize(at: directory.appending("tree"))
        let archiver = try await Archiver(writingTo: .file(path: directory.appending("unsafe.cairn")))
        let streamed = await #expect(throws: CairnError.self) {
            try await archiver.append(contentsOf: Self.stream([1, 2, 3]), pathInArchive: path)
        }
        #expect(streamed?.code == .unsafePath)
        #expect(streamed?.path == path)
        if !path.isEmpty {
            let item = await #expect(throws: CairnError.self) {
                try await archiver.appendItem(at: directory.url(appending: "tree/x.txt"), pathInArchive: path)
            }
            #expect(item?.code == .unsafePath)
        }
        await archiver.abandon()
        #expect(!RawFileSystem.exists(Array(directory.appending("unsafe.cairn").utf8)))
    }

    /// Blocks the first write until the test has cancelled the task, so cancellation lands in
    /// the middle of `appendItem` whatever the machine's speed.
    final class Gate: Sendable {
        private let state = Mutex<(reached: Bool, open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, false, []))
        let reached: AsyncStream<Void>
        private let reachedContinuation: AsyncStream<Void>.Continuation

        init() {
            (reached, reachedContinuation) = AsyncStream.makeStream()
        }

        func arrive() async {
            let first = state.withLock { state in
                defer { state.reached = true }
                return !state.reached
            }
            if first { reachedContinuation.yield() }
            await withCheckedContinuation { continuation in
                let open = state.withLock { state in
                    if !state.open { state.waiters.append(continuation) }
                    return state.open
                }
                if open { continuation.resume() }
            }
        }

        func open() {
            let waiters = state.withLock { state in
                state.open = true
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
    }

    final class GatedSink: ArchiveSink {
        let inner: FileSink
        let gate: Gate
        init(_ inner: FileSink, gate: Gate) {
            self.inner = inner
            self.gate = gate
        }
        func write(_ bytes: [UInt8]) async throws {
            await gate.arrive()
            try await inner.write(bytes)
        }
        func finish() async throws { try await inner.finish() }
        func abandon() async { await inner.abandon() }
    }

    @Test("cancelling appendItem on a large tree throws CancellationError and leaves only <path>.partial")
    func cancelAppendItem() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var generator = SeededGenerator(seed: 17)
        var tree = TreeBuilder()
        for index in 0..<48 { tree.file("file-\(index).bin", generator.bytes(256 * 1024)) }
        try tree.materialize(at: directory.appending("tree"))
        let archivePath = directory.appending("cancelled.cairn")
        let gate = Gate()
        let source = directory.url(appending: "tree")
        let task = Task {
            let sink = GatedSink(try FileSink(path: archivePath), gate: gate)
            let archiver = try Archiver(sink: sink)
            try await archiver.appendItem(at: source)
            _ = try await archiver.finish()
        }
        for await _ in gate.reached { break }
        task.cancel()
        gate.open()
        let result = await task.result
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(!RawFileSystem.exists(Array(archivePath.utf8)))
        #expect(RawFileSystem.exists(Array((archivePath + ".partial").utf8)))
    }

    /// Pieces, then a signal, then an `AsyncStream` that never ends.
    struct EndlessPieces: AsyncSequence, Sendable {
        typealias Element = [UInt8]
        let first: [[UInt8]]
        let waiting: AsyncStream<Void>.Continuation
        let endless: AsyncStream<[UInt8]>

        struct AsyncIterator: AsyncIteratorProtocol {
            var first: [[UInt8]]
            let waiting: AsyncStream<Void>.Continuation
            var endless: AsyncStream<[UInt8]>.AsyncIterator
            mutating func next() async -> [UInt8]? {
                if !first.isEmpty { return first.removeFirst() }
                waiting.yield()
                return await endless.next()
            }
        }

        func makeAsyncIterator() -> AsyncIterator {
            AsyncIterator(first: first, waiting: waiting, endless: endless.makeAsyncIterator())
        }
    }

    @Test("cancelling append(contentsOf:) while it waits on a stream that never ends throws CancellationError")
    func cancelEndlessStream() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let archivePath = directory.appending("endless.cairn")
        let (waiting, waitingContinuation) = AsyncStream<Void>.makeStream()
        let (endless, endlessContinuation) = AsyncStream<[UInt8]>.makeStream()
        var generator = SeededGenerator(seed: 18)
        let pieces = [generator.bytes(100_000), generator.bytes(50_000)]
        let sequence = EndlessPieces(first: pieces, waiting: waitingContinuation, endless: endless)
        // The task reports the append's own outcome, then tries to finish.
        let task = Task { () -> (append: Result<Void, any Error>, finished: Bool) in
            let archiver: Archiver
            do { archiver = try await Archiver(writingTo: .file(path: archivePath)) } catch { return (.failure(error), false) }
            let append: Result<Void, any Error>
            do {
                try await archiver.append(contentsOf: sequence, pathInArchive: "endless.bin")
                append = .success(())
            } catch {
                append = .failure(error)
            }
            let finished = (try? await archiver.finish()) != nil
            return (append, finished)
        }
        for await _ in waiting { break }
        task.cancel()
        let outcome = await task.value
        endlessContinuation.finish()
        // The archive is never finished: cancellation reaches finish() at the latest.
        #expect(!outcome.finished)
        #expect(!RawFileSystem.exists(Array(archivePath.utf8)))
        #expect(RawFileSystem.exists(Array((archivePath + ".partial").utf8)))
        // The append itself must not take cancellation (AsyncStream then ends early) for the
        // end of the input and store the first 150,000 bytes as the whole file.
        #expect(throws: CancellationError.self) { try outcome.append.get() }
        // Nor may the resumable prefix left in <path>.partial hold the file as complete.
        #expect(try Self.completedFiles(inPartialArchive: archivePath + ".partial").isEmpty)
    }

    /// Indices of the file entries whose file-end record verifies in a partial archive.
    static func completedFiles(inPartialArchive path: String) throws -> [Int] {
        let descriptor = try FileDescriptor.open(path, flags: O_RDONLY)
        defer { _ = try? descriptor.close() }
        let stream = RecordStream(descriptor: descriptor)
        let scanner = ArchiveScanner(keying: nil)
        try scanner.start(stream)
        var completed: [Int] = []
        while let record = try? stream.next() {
            do {
                try scanner.consume(record) { event in
                    if case .fileEnd(let index, _) = event { completed.append(index) }
                }
            } catch {
                break
            }
        }
        return completed
    }

    @Test("export properties: uncompressed bytes, compressed bytes only when compressible, version and size estimate echoed",
          arguments: [true, false])
    func exportProperties(compressible: Bool) async throws {
        var tree = Self.sampleTree(seed: 19)
        tree.file("more/words.txt", Self.text(100_000, seed: 20))
        var configuration = Archiver.Configuration()
        configuration.isCompressible = compressible
        configuration.compression = .zstd()
        configuration.sizeEstimate = 123_456_789
        configuration.resourcesVersion = "7.1.0-beta+42"
        let result = try await RoundTrip.archiveAndExtract(tree, configuration: configuration)
        let properties = result.properties
        #expect(result.source == result.extracted, "\(result.source.diff(result.extracted))")
        let sum = result.source.nodes.values.filter { $0.kind == .file }
        // Hard links carry no content of their own: count each inode once.
        let distinct = result.source.nodes.filter { $0.value.kind == .file && ($0.value.hardLinkGroup == nil || $0.value.hardLinkGroup == $0.key) }
        #expect(sum.count == distinct.count + 1)
        #expect(properties.uncompressedBytes == distinct.values.reduce(0) { $0 + $1.size })
        #expect(properties.version == "7.1.0-beta+42")
        #expect(properties.sizeEstimate == 123_456_789)
        #expect(properties.archiveBytes == UInt64(result.archive.count))
        // Entries: the root, every described path, the implicit parents "nested", "nested/deeper", "more".
        #expect(properties.entryCount == result.source.nodes.count)
        if compressible {
            let compressed = try #require(properties.compressedBytes)
            #expect(compressed < properties.uniqueBytes, "text should shrink with zstd")
        } else {
            #expect(properties.compressedBytes == nil)
            #expect(UInt64(result.archive.count) > properties.uniqueBytes)
        }
    }

    @Test(
        "an unreadable file produces a warning naming it and the rest is archived",
        .enabled(if: getuid() != 0, "running as root: permission bits do not stop root from reading a file"))
    func unreadableFileWarns() async throws {
        var tree = Self.sampleTree(seed: 22)
        tree.file("docs/secret.txt", Array("secret".utf8), mode: 0o000)
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try tree.materialize(at: directory.appending("tree"))
        let (_, properties) = try await RoundTrip.archive(path: directory.appending("tree"), to: directory.appending("a.cairn"))
        #expect(properties.warnings.count == 1)
        let warning = try #require(properties.warnings.first)
        #expect(warning.path?.hasSuffix("tree/docs/secret.txt") == true, "\(warning)")
        let extractor = try await Extractor(at: .file(path: directory.appending("a.cairn")))
        defer { extractor.close() }
        #expect(extractor.entry(atPathInArchive: "tree/docs/secret.txt") == nil)
        #expect(extractor.entry(atPathInArchive: "tree/docs/readme.txt") != nil)
        // Every described item but the secret, plus the root and the implicit "nested" and "nested/deeper".
        #expect(extractor.entries.count == tree.items.count - 1 + 3)
    }
}
