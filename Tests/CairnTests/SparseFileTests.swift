import CairnTestSupport
import Foundation
import Glibc
import Testing

import Cairn

/// Sparse files (issue 9, item 4; `Spec/0002-chunking.md §8`): holes of at least one maximum
/// chunk are found with `SEEK_HOLE`/`SEEK_DATA`, never read, and stored as references to zero
/// chunks, in a format 1.0 archive; extraction leaves zero chunks unwritten, so holes come back
/// as holes.
@Suite("Sparse files")
struct SparseFileTests {
    /// The file system block the fixtures align to (ext4 and tmpfs: 4 KiB).
    static let block = 4096

    // MARK: Create and extract

    @Test("a sparse file with data at its start, middle and end comes back equal and as sparse, from a small archive")
    func sparseRoundTrip() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-sparse")
        defer { work.remove() }
        try #require(try SparseFixture.supportsHoles(in: work), "the test directory's file system has no holes")
        let size = 64 << 20
        let file = work.appending("tree/sparse.bin")
        try FileManager.default.createDirectory(atPath: work.appending("tree"), withIntermediateDirectories: false)
        try SparseFixture.make(file, size: size, regions: SparseFixture.threeRegions(size: size))
        let source = try RawFileSystem.status(Array(file.utf8))
        #expect(Int(source.st_blocks) * 512 < 1 << 20, "the fixture is sparse: \(source.st_blocks) blocks")

        let archive = work.appending("a.cairn")
        let created = try await RoundTrip.archive(path: work.appending("tree"), to: archive)
        #expect(created.properties.warnings.isEmpty)
        #expect(created.bytes.count < 512 << 10, "64 MiB with 170 KB of data: \(created.bytes.count) bytes")
        let report = try await Extractor.verifyArchive(at: .file(path: archive))
        #expect(report.contentBytes == UInt64(size))

        // Both extraction paths: everything (the stream extractor) and a selection (the
        // seekable one, through the chunk prefetcher).
        let extractor = try await Extractor(at: .file(path: archive))
        defer { extractor.close() }
        try await extractor.extractAll(to: work.url(appending: "all"))
        try await extractor.extractItem(atPathInArchive: "tree/sparse.bin", to: work.url(appending: "one"))
        let original = try RawFileSystem.contents(ofFile: Array(file.utf8))
        for output in ["all/tree/sparse.bin", "one/tree/sparse.bin"] {
            let path = Array(work.appending(output).utf8)
            let status = try RawFileSystem.status(path)
            #expect(Int(status.st_size) == size, "\(output)")
            #expect(
                status.st_blocks <= source.st_blocks + 64,
                "\(output): \(status.st_blocks) blocks allocated, the source has \(source.st_blocks)")
            #expect(ResumeFixture.same(try RawFileSystem.contents(ofFile: path), original), "\(output)")
        }
    }

    @Test("a file ending in a hole, and one that is all hole, come back with their size and no data")
    func trailingAndWholeHoles() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-sparse-tail")
        defer { work.remove() }
        try #require(try SparseFixture.supportsHoles(in: work))
        try FileManager.default.createDirectory(atPath: work.appending("tree"), withIntermediateDirectories: false)
        var generator = SeededGenerator(seed: 0x5BA7_5E)
        try SparseFixture.make(work.appending("tree/tail.bin"), size: 8 << 20, regions: [(0, generator.bytes(10_000))])
        try SparseFixture.make(work.appending("tree/void.bin"), size: 8 << 20, regions: [])
        let archive = work.appending("a.cairn")
        _ = try await RoundTrip.archive(path: work.appending("tree"), to: archive)
        let extractor = try await Extractor(at: .file(path: archive))
        defer { extractor.close() }
        try await extractor.extractAll(to: work.url(appending: "all"))
        try await extractor.extractItem(atPathInArchive: "tree", to: work.url(appending: "one"))
        for output in ["all", "one"] {
            for name in ["tail.bin", "void.bin"] {
                let path = Array(work.appending("\(output)/tree/\(name)").utf8)
                let status = try RawFileSystem.status(path)
                #expect(status.st_size == 8 << 20, "\(output)/\(name)")
                #expect(status.st_blocks <= 64, "\(output)/\(name): \(status.st_blocks) blocks")
                let original = try RawFileSystem.contents(ofFile: Array(work.appending("tree/\(name)").utf8))
                #expect(ResumeFixture.same(try RawFileSystem.contents(ofFile: path), original), "\(output)/\(name)")
            }
        }
    }

    // MARK: The chunking rule

    @Test("holes become zero chunks of the maximum length from the hole's start; data runs are FastCDC from their start")
    func chunksFollowTheHoleRule() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-sparse-rule")
        defer { work.remove() }
        try #require(try SparseFixture.supportsHoles(in: work))
        try FileManager.default.createDirectory(atPath: work.appending("tree"), withIntermediateDirectories: false)
        let size = 24 << 20
        let regions = SparseFixture.threeRegions(size: size)
        let file = work.appending("tree/sparse.bin")
        try SparseFixture.make(file, size: size, regions: regions)
        let configuration = ResumeFixture.configuration  // maximum 32 KiB: many zero chunks
        let policy = configuration.chunking

        // The holes are the gaps between the written regions, rounded inwards to blocks.
        let descriptor = try FileDescriptor.open(file, flags: O_RDONLY)
        defer { _ = try? descriptor.close() }
        var finder = HoleFinder(file: descriptor, size: UInt64(size), minimumLength: UInt64(policy.maximum))
        var holes: [Range<UInt64>] = []
        while let hole = finder.next() { holes.append(hole) }
        let expectedHoles = SparseFixture.gaps(between: regions, size: size, block: Self.block)
        #expect(holes == expectedHoles.map { UInt64($0.lowerBound)..<UInt64($0.upperBound) })

        _ = try await RoundTrip.archive(path: work.appending("tree"), to: work.appending("a.cairn"), configuration: configuration)
        let actual = try SparseFixture.chunks(of: "tree/sparse.bin", inArchiveAt: work.appending("a.cairn"))
        let content = try RawFileSystem.contents(ofFile: Array(file.utf8))
        let expected = try SparseFixture.expectedChunks(of: content, holes: expectedHoles, policy: policy)
        #expect(actual.count == expected.count)
        let difference = (0..<min(actual.count, expected.count)).first { actual[$0] != expected[$0] }
        #expect(difference == nil, "first difference at chunk \(difference ?? -1): \(difference.map { "\(actual[$0]) vs \(expected[$0])" } ?? "")")
        // The zero chunks are stored once per length: the maximum, and each hole's tail.
        let zeroLengths = Set(expected.filter { $0.isZero }.map(\.length))
        #expect(zeroLengths.contains(policy.maximum))
    }

    @Test("files without holes, or with holes shorter than a maximum chunk, are FastCDC over their bytes")
    func filesWithoutHolesKeepTheirChunks() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-sparse-none")
        defer { work.remove() }
        try FileManager.default.createDirectory(atPath: work.appending("tree"), withIntermediateDirectories: false)
        var generator = SeededGenerator(seed: 0xD0_4E5)
        // Written zeros are allocated: not a hole, whatever they contain.
        let dense = generator.bytes(1 << 20) + [UInt8](repeating: 0, count: 600_000) + generator.bytes(900_000)
        try RawFileSystem.writeFile(Array(work.appending("tree/dense.bin").utf8), dense)
        // A 64 KiB hole, shorter than the default maximum chunk (256 KiB): read as data.
        let shortHole = 1 << 20
        try SparseFixture.make(
            work.appending("tree/short-hole.bin"), size: 2 * shortHole + (64 << 10),
            regions: [(0, generator.bytes(shortHole)), (shortHole + (64 << 10), generator.bytes(shortHole))])
        let configuration = Archiver.Configuration()
        _ = try await RoundTrip.archive(path: work.appending("tree"), to: work.appending("a.cairn"), configuration: configuration)
        for name in ["dense.bin", "short-hole.bin"] {
            let content = try RawFileSystem.contents(ofFile: Array(work.appending("tree/\(name)").utf8))
            let actual = try SparseFixture.chunks(of: "tree/\(name)", inArchiveAt: work.appending("a.cairn"))
            let expected = try SparseFixture.expectedChunks(of: content, holes: [], policy: configuration.chunking)
            #expect(actual == expected, "\(name)")
        }
    }

    // MARK: Determinism and resume

    @Test("two creates of a sparse tree give the same bytes")
    func deterministic() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-sparse-same")
        defer { work.remove() }
        try FileManager.default.createDirectory(atPath: work.appending("tree"), withIntermediateDirectories: false)
        let size = 16 << 20
        try SparseFixture.make(work.appending("tree/sparse.bin"), size: size, regions: SparseFixture.threeRegions(size: size))
        let first = try await RoundTrip.archive(
            path: work.appending("tree"), to: work.appending("1.cairn"), configuration: ResumeFixture.configuration)
        let second = try await RoundTrip.archive(
            path: work.appending("tree"), to: work.appending("2.cairn"), configuration: ResumeFixture.configuration)
        #expect(ResumeFixture.same(first.bytes, second.bytes))
    }

    @Test("a sparse file cut at its commits, in data and in holes, resumes to the uninterrupted bytes")
    func resumeInsideSparseFile() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-sparse-resume")
        defer { work.remove() }
        try #require(try SparseFixture.supportsHoles(in: work))
        let source = work.appending("tree")
        try FileManager.default.createDirectory(atPath: source, withIntermediateDirectories: false)
        var generator = SeededGenerator(seed: 0x5E_5EED)
        // 5 MiB of data (a commit inside it), a 10 MiB hole (commits inside it), 1 MiB of data
        // not on a chunk boundary, then a hole to the end.
        let size = 20 << 20
        try SparseFixture.make(
            source + "/sparse.bin", size: size,
            regions: [(0, generator.bytes(5 << 20)), ((15 << 20) + 1234, generator.bytes(1 << 20))])
        try RawFileSystem.writeFile(Array((source + "/z.txt").utf8), Array("after the sparse file\n".utf8))
        try RawFileSystem.setModificationTime(Array(source.utf8), in: AT_FDCWD, nanoseconds: TreeBuilder.defaultTime)
        let reference = try await RoundTrip.archive(
            path: source, to: work.appending("reference.cairn"), configuration: ResumeFixture.configuration)
        let layout = try ResumeFixture.Layout(archiveAt: work.appending("reference.cairn"))
        #expect(layout.inFileCommits.count >= 4, "commits inside the file: \(layout.inFileCommits)")

        var cuts: Set<Int> = []
        for commit in layout.inFileCommits { cuts.formUnion([Int(commit), Int(commit) + 500]) }
        let target = work.appending("resumed.cairn")
        for cut in cuts.sorted() where cut < reference.bytes.count {
            try RawFileSystem.writeFile(Array((target + ".partial").utf8), Array(reference.bytes[0..<cut]))
            unlink(target)
            let archiver = try Archiver(resuming: .file(path: target), configuration: ResumeFixture.configuration)
            #expect(archiver.isResumed)
            try await archiver.appendItem(at: URL(fileURLWithPath: source))
            let properties = try await archiver.finish()
            #expect(properties.warnings.isEmpty, "cut at \(cut): \(properties.warnings)")
            let resumed = try RawFileSystem.contents(ofFile: Array(target.utf8))
            #expect(
                ResumeFixture.same(resumed, reference.bytes),
                "cut at \(cut): \(ResumeFixture.difference(resumed, reference.bytes))")
        }
    }

    @Test("a selection decodes the zero chunk at its first reference only, so damage to it is still found")
    func selectionDecodesZeroChunkOnce() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-sparse-once")
        defer { work.remove() }
        try #require(try SparseFixture.supportsHoles(in: work))
        try FileManager.default.createDirectory(atPath: work.appending("tree"), withIntermediateDirectories: false)
        let size = 8 << 20
        try SparseFixture.make(work.appending("tree/sparse.bin"), size: size, regions: SparseFixture.threeRegions(size: size))
        var generator = SeededGenerator(seed: 0x0E_CE)
        try RawFileSystem.writeFile(Array(work.appending("tree/dense.bin").utf8), generator.bytes(300_000))
        let archive = work.appending("a.cairn")
        _ = try await RoundTrip.archive(path: work.appending("tree"), to: archive)

        let extractor = try await Extractor(at: .file(path: archive))
        let chunks = extractor.reader.manifest.chunks
        let maximum = extractor.header.chunking.maximum
        let entry = try #require(extractor.reader.manifest.entries.firstIndex { $0.entry.path == "tree/sparse.bin" })
        let references = Array(extractor.reader.references(ofEntry: entry))
        extractor.close()
        var zeros = RepeatedZeroChunk(chunks: chunks, maximum: maximum, ids: .sha256)
        let zero = try #require(zeros.index, "the archive has the maximum-length zero chunk")
        #expect(chunks[Int(zero)].id == (try SHA256.hash([UInt8](repeating: 0, count: maximum))))
        #expect(references.filter { $0 == zero }.count > 10)
        let decoded = references.filter { zeros.needsDecoding($0) }
        #expect(decoded.filter { $0 == zero }.count == 1)
        #expect(decoded.count == references.count - references.filter { $0 == zero }.count + 1)
        #expect(RepeatedZeroChunk(chunks: chunks, maximum: maximum / 2, ids: .sha256).index == nil, "no zero chunk of that length")

        // One byte of the zero chunk's record flipped: extracting the file still fails.
        var bytes = try RawFileSystem.contents(ofFile: Array(archive.utf8))
        let row = chunks[Int(zero)]
        bytes[Int(row.offset) + 60 + Int(row.storedLength) / 2] ^= 0x20
        let damaged = work.appending("damaged.cairn")
        try RawFileSystem.writeFile(Array(damaged.utf8), bytes)
        let reader = try await Extractor(at: .file(path: damaged))
        defer { reader.close() }
        await #expect(throws: CairnError.self) {
            try await reader.extractItem(atPathInArchive: "tree/sparse.bin", to: work.url(appending: "out"))
        }
        #expect(!RawFileSystem.exists(Array(work.appending("out/tree/sparse.bin").utf8)))
    }

    @Test("the Spec 0002 §8 vector: cairn create and extract a 10 GiB file with 4 KiB of data, as processes")
    func specVectorThroughTheCommandLine() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-sparse-cli")
        defer { work.remove() }
        try #require(try SparseFixture.supportsHoles(in: work))
        try FileManager.default.createDirectory(atPath: work.appending("tree"), withIntermediateDirectories: false)
        let size = 10 << 30
        var generator = SeededGenerator(seed: 0x10_613)
        let data = generator.bytes(4096)
        try SparseFixture.make(work.appending("tree/big.img"), size: size, regions: [(0, data)])
        let cairn = try ChildProcess.cairnExecutable(besideBundle: Bundle.module.bundleURL)
        let created = try ChildProcess.run(cairn, ["create", "-q", "-o", "a.cairn", "tree"], in: work.path)
        #expect(created.status == 0, "\(created.stderr)")
        #expect(try RawFileSystem.status(Array(work.appending("a.cairn").utf8)).st_size < 4 << 20)

        let chunks = try SparseFixture.chunks(of: "tree/big.img", inArchiveAt: work.appending("a.cairn"))
        #expect(chunks.count == 1 + 40_959 + 1)
        #expect(chunks.first == SparseFixture.Chunk(length: 4096, id: try SHA256.hash(data)))
        let full = "8a39d2abd3999ab73c34db2476849cddf303ce389b35826850f9a700589b4a90"
        #expect(chunks.dropFirst().dropLast().allSatisfy { $0.length == 262_144 && $0.id.hexString == full })
        #expect(chunks.last?.length == 258_048)
        #expect(chunks.last?.id == (try SHA256.hash([UInt8](repeating: 0, count: 258_048))))

        let extracted = try ChildProcess.run(cairn, ["extract", "-q", "a.cairn", "-C", "out"], in: work.path)
        #expect(extracted.status == 0, "\(extracted.stderr)")
        let selected = try ChildProcess.run(
            cairn, ["extract", "-q", "a.cairn", "-C", "one", "tree/big.img"], in: work.path)
        #expect(selected.status == 0, "\(selected.stderr)")
        for output in ["out", "one"] {
            let path = Array(work.appending("\(output)/tree/big.img").utf8)
            let status = try RawFileSystem.status(path)
            #expect(Int(status.st_size) == size, "\(output)")
            #expect(status.st_blocks <= 64, "\(output): \(status.st_blocks) blocks")
            let fd = open(work.appending("\(output)/tree/big.img"), O_RDONLY)
            defer { close(fd) }
            var head = [UInt8](repeating: 0, count: 4096)
            #expect(head.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 4096, 0) } == 4096)
            #expect(head == data, "\(output)")
            var tail = [UInt8](repeating: 1, count: 4096)
            #expect(tail.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 4096, off_t(size - 4096)) } == 4096)
            #expect(tail.allSatisfy { $0 == 0 }, "\(output)")
        }
    }

    // MARK: Parts

    @Test("the sparse writer skips zero chunks, writes the rest at their offsets and sets the size")
    func sparseWriter() throws {
        let work = try TemporaryDirectory(prefix: "cairn-sparse-writer")
        defer { work.remove() }
        try #require(try SparseFixture.supportsHoles(in: work))
        let path = work.appending("out.bin")
        let descriptor = try FileDescriptor.open(path, flags: O_RDWR | O_CREAT | O_EXCL, mode: 0o600)
        defer { _ = try? descriptor.close() }
        var generator = SeededGenerator(seed: 0x3217)
        let data = generator.bytes(5000)
        let zeros = [UInt8](repeating: 0, count: 1 << 20)
        var writer = SparseWriter(file: descriptor)
        try writer.write(data)
        try writer.write(zeros)
        writer.skip(1 << 20)
        try writer.write(data)
        try writer.write(zeros)
        #expect(writer.offset == UInt64(2 * data.count + 3 * zeros.count))
        // Read back before the end: the gap inside reads as zeros.
        var middle = [UInt8](repeating: 1, count: 100)
        let got = try middle.withUnsafeMutableBytes { try descriptor.read(fromAbsoluteOffset: 1 << 20, into: $0) }
        #expect(got == 100 && middle.allSatisfy { $0 == 0 })
        try writer.finish(size: writer.offset)
        let status = try descriptor.status()
        #expect(status.size == writer.offset)
        let blocks = try RawFileSystem.status(Array(path.utf8)).st_blocks
        #expect(blocks <= 64, "\(blocks) blocks for 10 KB of data")
        let expected = data + zeros + zeros + data + zeros
        #expect(try RawFileSystem.contents(ofFile: Array(path.utf8)) == expected)
    }

    @Test("zero detection and zero chunk ids", arguments: [0, 1, 4096, 262_144, 8 << 20])
    func zeroChunkIDs(length: Int) throws {
        let zeros = [UInt8](repeating: 0, count: length)
        #expect(SparseWriter.isZero(zeros))
        #expect(try ZeroChunks.id(length: length, ids: .sha256) == SHA256.hash(zeros))
        #expect(try ZeroChunks.id(length: length, ids: .sha256) == SHA256.hash(zeros), "cached")
        if length > 0 {
            for position in [0, length / 2, length - 1] {
                var one = zeros
                one[position] = 1
                #expect(!SparseWriter.isZero(one), "a 1 at \(position)")
            }
        }
    }
}

/// Sparse fixtures: files made with `ftruncate` and `pwrite`, so the unwritten ranges are holes.
enum SparseFixture {
    /// A chunk as the manifest lists it.
    struct Chunk: Equatable, CustomStringConvertible {
        var length: Int
        var id: Digest
        var isZero = false
        static func == (a: Chunk, b: Chunk) -> Bool { a.length == b.length && a.id == b.id }
        var description: String { "\(length)\(isZero ? " zeros" : "")" }
    }

    /// Whether the file system under `work` keeps holes (`truncate -s 1M f` allocates nothing).
    static func supportsHoles(in work: TemporaryDirectory) throws -> Bool {
        let path = work.appending(".hole-probe")
        try make(path, size: 1 << 20, regions: [])
        defer { unlink(path) }
        return try RawFileSystem.status(Array(path.utf8)).st_blocks == 0
    }

    /// Seeded data at the start, in the middle (not block-aligned) and at the very end.
    static func threeRegions(size: Int) -> [(offset: Int, bytes: [UInt8])] {
        var generator = SeededGenerator(seed: 0x5BA6_5E + UInt64(size))
        return [
            (0, generator.bytes(100_000)), (size / 2 + 1234, generator.bytes(50_000)), (size - 20_000, generator.bytes(20_000)),
        ]
    }

    /// Creates `path` with `size` bytes (`ftruncate`), then writes each region (`pwrite`).
    static func make(_ path: String, size: Int, regions: [(offset: Int, bytes: [UInt8])]) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw FileSystemTestError("open", path: Array(path.utf8)) }
        defer { close(fd) }
        guard ftruncate(fd, off_t(size)) == 0 else { throw FileSystemTestError("ftruncate", path: Array(path.utf8)) }
        for region in regions {
            let n = region.bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(region.offset)) }
            guard n == region.bytes.count else { throw FileSystemTestError("pwrite", path: Array(path.utf8)) }
        }
    }

    /// The holes a file system with `block`-sized blocks leaves between `regions`.
    static func gaps(between regions: [(offset: Int, bytes: [UInt8])], size: Int, block: Int) -> [Range<Int>] {
        var gaps: [Range<Int>] = []
        var position = 0
        for region in regions.sorted(by: { $0.offset < $1.offset }) + [(size, [])] {
            let start = (position + block - 1) / block * block
            let end = region.offset == size ? size : region.offset / block * block
            if end > start { gaps.append(start..<end) }
            position = region.offset + region.bytes.count
        }
        return gaps
    }

    /// The chunks of the file at `path` in the archive, in order.
    static func chunks(of path: String, inArchiveAt archive: String) throws -> [Chunk] {
        let extractor = try Extractor(reader: ArchiveReader(path: archive))
        defer { extractor.close() }
        let manifest = extractor.reader.manifest
        let index = try #require(manifest.entries.firstIndex { $0.entry.path == path })
        return extractor.reader.references(ofEntry: index).map { reference in
            let row = manifest.chunks[Int(reference)]
            return Chunk(length: Int(row.rawLength), id: row.id)
        }
    }

    /// The rule of `Spec/0002-chunking.md §8`, computed independently of the archiver: each
    /// hole at least one maximum chunk long is cut into maximum-length zero chunks from its start
    /// and a shorter tail; each run of data between holes is cut with ``Chunker`` as a whole input.
    static func expectedChunks(of content: [UInt8], holes: [Range<Int>], policy: ChunkingPolicy) throws -> [Chunk] {
        let chunker = Chunker(policy: policy, keying: nil)
        var chunks: [Chunk] = []
        var position = 0
        let holes = holes.filter { $0.count >= chunker.maximum }
        for hole in holes + [content.count..<content.count] {
            try content.withUnsafeBytes { raw in
                while position < hole.lowerBound {
                    let window = UnsafeRawBufferPointer(rebasing: raw[position..<hole.lowerBound])
                    let length = try #require(chunker.nextChunkLength(in: window, isFinal: true))
                    chunks.append(Chunk(length: length, id: try SHA256.hash(UnsafeRawBufferPointer(rebasing: window[..<length]))))
                    position += length
                }
            }
            while position < hole.upperBound {
                let length = min(chunker.maximum, hole.upperBound - position)
                chunks.append(Chunk(length: length, id: try SHA256.hash([UInt8](repeating: 0, count: length)), isZero: true))
                position += length
            }
        }
        return chunks
    }
}
