import CairnTestSupport
import Foundation
import Glibc
import Testing

import Cairn

/// Resuming interrupted writes and transfers in the library (issue 4, `Spec/0001 §10.3–10.5`):
/// an archive cut at any byte and resumed with the same sources is byte-identical to an
/// uninterrupted one; a cancelled task leaves the same state as a kill; a receiver's prefix plus
/// what ``ArchiveTransfer/send(archiveAt:from:expecting:to:)`` serves is the whole archive.
@Suite("Resume (library)")
struct ResumeTests {
    // MARK: Resuming a write

    @Test("an archive cut at any of 30 seeded offsets resumes to the uninterrupted bytes")
    func resumeAtSeededOffsets() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-resume-write")
        defer { work.remove() }
        let source = work.appending("tree")
        try ResumeFixture.libraryTree().materialize(at: source)
        let reference = try await RoundTrip.archive(
            path: source, to: work.appending("reference.cairn"), configuration: ResumeFixture.configuration)
        let bytes = reference.bytes
        let layout = try ResumeFixture.Layout(archiveAt: work.appending("reference.cairn"))

        // The places that matter, then seeded ones up to 30.
        let inFile = try #require(layout.inFileCommits.first, "the >4 MiB file has a commit inside it")
        var offsets: Set<Int> = [
            0, 12, bytes.count - 1, bytes.count,
            Int(inFile) + 1000, Int(inFile), Int(inFile) - 1,
            Int(layout.manifestOffset) + Int(layout.manifestLength) / 2, Int(layout.manifestOffset),
            // Format 2.1: inside the manifest index, and between it and the final commit (§11.8).
            Int(layout.manifestOffset) - 100, Int(layout.manifestOffset) - 120, Int(layout.manifestOffset) - 1,
            layout.footerOffset + 10, layout.footerOffset,
            Int(layout.commits[0]), Int(layout.commits[0]) - 1,
        ]
        var generator = SeededGenerator(seed: 0x5EED_0004)
        while offsets.count < 30 { offsets.insert(Int.random(in: 0...bytes.count, using: &generator)) }

        let target = work.appending("resumed.cairn")
        for cut in offsets.sorted() {
            try RawFileSystem.writeFile(Array((target + ".partial").utf8), Array(bytes[0..<cut]))
            unlink(target)
            let archiver: Archiver
            do {
                archiver = try Archiver(resuming: .file(path: target), configuration: ResumeFixture.configuration)
                #expect(UInt64(cut) >= layout.commits[0], "cut at \(cut): resumable only after the first commit")
                #expect(archiver.isResumed)
            } catch {
                #expect(error.code == .notResumable, "cut at \(cut): \(error)")
                #expect(UInt64(cut) < layout.commits[0], "cut at \(cut) is past the first commit yet not resumable: \(error)")
                archiver = try await Archiver(writingTo: .file(path: target), configuration: ResumeFixture.configuration)
            }
            try await archiver.appendItem(at: URL(fileURLWithPath: source))
            let properties = try await archiver.finish()
            let resumed = try RawFileSystem.contents(ofFile: Array(target.utf8))
            #expect(
                ResumeFixture.same(resumed, bytes),
                "cut at \(cut) of \(bytes.count): \(ResumeFixture.difference(resumed, bytes))")
            #expect(ResumeFixture.Figures(properties) == ResumeFixture.Figures(reference.properties), "cut at \(cut)")
            #expect(properties.warnings.isEmpty, "cut at \(cut): \(properties.warnings)")
            #expect(!RawFileSystem.exists(Array((target + ".partial").utf8)))
        }
    }

    @Test("a file that changed while the archive was interrupted is archived again from its start")
    func changedOpenFileIsArchivedAgain() async throws {
        try await Self.resumeAfterChangingBigFile(keepingPrefix: false)
    }

    @Test("a file whose committed prefix is unchanged but whose tail and mtime changed is archived again")
    func changedTailOfOpenFileIsArchivedAgain() async throws {
        // The chunks committed before the cut are the new file's first chunks too, but after the
        // rewind to the commit before that file they are no longer in the archive: stored again.
        try await Self.resumeAfterChangingBigFile(keepingPrefix: true)
    }

    /// Cuts the archive inside `big.bin` after its in-file commit, changes `big.bin` (new content
    /// in its last 100 000 bytes when `keepingPrefix`, entirely new content otherwise; new mtime), and
    /// resumes: the result verifies, extracts to the changed tree, has each path once, and is
    /// the archive a fresh run over the changed tree writes.
    static func resumeAfterChangingBigFile(keepingPrefix: Bool) async throws {
        let work = try TemporaryDirectory(prefix: "cairn-resume-changed")
        defer { work.remove() }
        let source = work.appending("tree")
        let tree = ResumeFixture.libraryTree()
        try tree.materialize(at: source)
        let reference = try await RoundTrip.archive(
            path: source, to: work.appending("reference.cairn"), configuration: ResumeFixture.configuration)
        let layout = try ResumeFixture.Layout(archiveAt: work.appending("reference.cairn"))
        let inFile = try #require(layout.inFileCommits.first)
        let target = work.appending("resumed.cairn")
        try RawFileSystem.writeFile(Array((target + ".partial").utf8), Array(reference.bytes[0..<(Int(inFile) + 1000)]))

        // Change big.bin: same size, different content, a new mtime.
        let bigPath = Array((source + "/big.bin").utf8)
        var changed = try RawFileSystem.contents(ofFile: bigPath)
        let fresh = ResumeFixture.bytes(changed.count, seed: 0xC4A9_6ED)
        let from = keepingPrefix ? changed.count - 100_000 : 0
        changed.replaceSubrange(from..., with: fresh[from...])
        try RawFileSystem.writeFile(bigPath, changed)
        try RawFileSystem.setModificationTime(bigPath, in: AT_FDCWD, nanoseconds: TreeBuilder.defaultTime + 9_999)
        try RawFileSystem.setModificationTime(Array(source.utf8), in: AT_FDCWD, nanoseconds: tree.rootModificationTime)

        let archiver = try Archiver(resuming: .file(path: target), configuration: ResumeFixture.configuration)
        try await archiver.appendItem(at: URL(fileURLWithPath: source))
        let properties = try await archiver.finish()
        #expect(properties.warnings.isEmpty, "\(properties.warnings)")

        let report = try await Extractor.verifyArchive(at: .file(path: target))
        let extractor = try await Extractor(at: .file(path: target))
        defer { extractor.close() }
        let paths = extractor.entries.map(\.path)
        #expect(Set(paths).count == paths.count, "each path once: \(paths.sorted())")
        #expect(report.entryCount == paths.count)
        try await extractor.extractAll(to: URL(fileURLWithPath: work.appending("out")))
        let extracted = try TreeSnapshot(at: work.appending("out/tree"))
        let expected = try TreeSnapshot(at: source)
        #expect(extracted == expected, "\(extracted.diff(expected))")

        let again = try await RoundTrip.archive(
            path: source, to: work.appending("fresh.cairn"), configuration: ResumeFixture.configuration)
        let resumed = try RawFileSystem.contents(ofFile: Array(target.utf8))
        #expect(ResumeFixture.same(resumed, again.bytes), "\(ResumeFixture.difference(resumed, again.bytes))")
    }

    @Test("a cancelled appendItem leaves a prefix of the archive that resumes to the uninterrupted bytes")
    func cancellationLeavesResumableState() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-resume-cancel")
        defer { work.remove() }
        let source = work.appending("tree")
        try ResumeFixture.libraryTree().materialize(at: source)
        let reference = try await RoundTrip.archive(
            path: source, to: work.appending("reference.cairn"), configuration: ResumeFixture.configuration)
        let target = work.appending("cancelled.cairn")
        let partial = Array((target + ".partial").utf8)

        let archiver = try await Archiver(writingTo: .file(path: target), configuration: ResumeFixture.configuration)
        nonisolated(unsafe) let unsafeArchiver = archiver
        let task = Task {
            try await unsafeArchiver.appendItem(at: URL(fileURLWithPath: source))
        }
        // Cancel once the first megabyte reached the file (about a tenth of the way), from a
        // thread of its own: a watcher on the cooperative pool could wait behind the archiver's
        // own tasks on a loaded 2-core machine until the archive is done.
        let watcher = Thread {
            try? Await.until("the first MiB reaches the .partial", interval: 0.0002) {
                ((try? RawFileSystem.status(partial))?.st_size ?? 0) >= 1 << 20
            }
            task.cancel()
        }
        watcher.start()
        let outcome = await task.result
        #expect(throws: CancellationError.self, "the task was cancelled mid-way") { try outcome.get() }

        let left = try RawFileSystem.contents(ofFile: partial)
        #expect(left.count < reference.bytes.count)
        #expect(ResumeFixture.same(Array(reference.bytes.prefix(left.count)), left), "what a cancel leaves is a prefix of the archive, as after a kill")
        let prefix = try await Extractor.verifyPrefix(at: .file(path: target + ".partial"))
        #expect(prefix.verifiedLength > 0 && !prefix.isComplete)

        let resumed = try Archiver(resuming: .file(path: target), configuration: ResumeFixture.configuration)
        try await resumed.appendItem(at: URL(fileURLWithPath: source))
        let properties = try await resumed.finish()
        let bytes = try RawFileSystem.contents(ofFile: Array(target.utf8))
        #expect(ResumeFixture.same(bytes, reference.bytes), "\(ResumeFixture.difference(bytes, reference.bytes))")
        #expect(ResumeFixture.Figures(properties) == ResumeFixture.Figures(reference.properties))
    }

    // MARK: Resuming a transfer

    @Test("verifyPrefix + send from the verified length rebuilds the archive for 205 cuts")
    func transferAtSeededCuts() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-resume-transfer")
        defer { work.remove() }
        let source = work.appending("tree")
        try ResumeFixture.transferTree(seed: 1).materialize(at: source)
        let archivePath = work.appending("archive.cairn")
        let bytes = try await RoundTrip.archive(path: source, to: archivePath, configuration: ResumeFixture.configuration).bytes
        let layout = try ResumeFixture.Layout(archiveAt: archivePath)

        var cuts = [0, 1, 12, bytes.count - 1, bytes.count]
        var generator = SeededGenerator(seed: 0x7A4_5FE4)
        for _ in 0..<200 { cuts.append(Int.random(in: 0...bytes.count, using: &generator)) }

        let copy = work.appending("copy.cairn")
        let rest = work.appending("rest")
        for cut in cuts {
            try RawFileSystem.writeFile(Array(copy.utf8), Array(bytes[0..<cut]))
            let verification = try await Extractor.verifyPrefix(at: .file(path: copy))
            let length = Int(verification.verifiedLength)
            #expect(length == layout.verifiedLength(ofPrefix: cut), "cut at \(cut): the end of the last commit at or before it")
            #expect(verification.resumeToken.length == verification.verifiedLength)
            #expect(verification.isComplete == (cut == bytes.count), "cut at \(cut)")
            #expect(verification.fileBytes == UInt64(cut))

            try RawFileSystem.writeFile(Array(rest.utf8), [])
            let handle = try #require(FileHandle(forWritingAtPath: rest))
            let source = try LocalArchiveSource(path: archivePath)
            defer { source.close() }
            try ArchiveTransfer.send(source, from: verification.verifiedLength, expecting: verification.resumeToken, to: handle)
            try handle.close()
            let rebuilt = Array(bytes[0..<length]) + (try RawFileSystem.contents(ofFile: Array(rest.utf8)))
            #expect(ResumeFixture.same(rebuilt, bytes), "cut at \(cut), verified \(length): \(ResumeFixture.difference(rebuilt, bytes))")
        }
    }

    @Test("a prefix of a different archive is refused with tokenMismatch")
    func transferRefusesForeignPrefix() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-resume-foreign")
        defer { work.remove() }
        let (archive, other) = try await ResumeFixture.twoArchives(in: work)
        let copy = work.appending("copy.cairn")
        for cut in [other.count / 3, other.count / 2, other.count - 1, other.count] {
            try RawFileSystem.writeFile(Array(copy.utf8), Array(other[0..<cut]))
            let verification = try await Extractor.verifyPrefix(at: .file(path: copy))
            #expect(verification.verifiedLength > 0)
            let sink = work.appending("rest")
            try RawFileSystem.writeFile(Array(sink.utf8), [])
            let handle = try #require(FileHandle(forWritingAtPath: sink))
            defer { try? handle.close() }
            let source = try LocalArchiveSource(path: archive)
            defer { source.close() }
            let error = #expect(throws: CairnError.self, "cut at \(cut)") {
                try ArchiveTransfer.send(source, from: verification.verifiedLength, expecting: verification.resumeToken, to: handle)
            }
            #expect(
                error?.code == .tokenMismatch || (error?.code == .invalidArgument && verification.verifiedLength > 0),
                "cut at \(cut): \(String(describing: error))")
            #expect(try RawFileSystem.contents(ofFile: Array(sink.utf8)).isEmpty, "nothing is sent")
        }
    }
}

// MARK: - Fixtures shared by the resume suites

/// Trees, archive layouts and comparisons for the resume tests.
enum ResumeFixture {
    /// Archives two different trees in `work`: the path of the first archive, and the bytes of
    /// the second (whose prefixes are foreign to the first).
    static func twoArchives(in work: TemporaryDirectory) async throws -> (archive: String, other: [UInt8]) {
        try transferTree(seed: 1).materialize(at: work.appending("one/tree"))
        try transferTree(seed: 2).materialize(at: work.appending("two/tree"))
        let archive = work.appending("one.cairn")
        _ = try await RoundTrip.archive(path: work.appending("one/tree"), to: archive, configuration: configuration)
        let other = try await RoundTrip.archive(
            path: work.appending("two/tree"), to: work.appending("two.cairn"), configuration: configuration
        ).bytes
        return (archive, other)
    }

    /// Small content-defined chunks, so files have many chunks; LZ4.
    static var configuration: Archiver.Configuration {
        var configuration = Archiver.Configuration()
        configuration.chunking = .contentDefined(minimum: 2048, average: 8192, maximum: 32768)
        configuration.compression = .lz4
        return configuration
    }

    /// `count` seeded bytes; with `compressible`, every third 4 KiB block is text.
    static func bytes(_ count: Int, seed: UInt64, compressible: Bool = false) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        var generator = SeededGenerator(seed: seed)
        out.withUnsafeMutableBytes { raw in
            let words = raw.count / 8
            for index in 0..<words { raw.storeBytes(of: generator.next(), toByteOffset: index * 8, as: UInt64.self) }
            for index in (words * 8)..<raw.count { raw[index] = UInt8(truncatingIfNeeded: generator.next()) }
        }
        if compressible {
            let text = Array("the quick brown fox jumps over the lazy dog \(seed) ".utf8)
            var block = 0
            while block * 4096 < count {
                if block % 3 == 0 {
                    for index in (block * 4096)..<min(count, block * 4096 + 4096) { out[index] = text[index % text.count] }
                }
                block += 1
            }
        }
        return out
    }

    /// About 11 MiB: two files over 4 MiB (commits inside them), multi-chunk files, an exact
    /// duplicate, a file sharing a range with another, a hard link, a symlink, an empty file,
    /// an empty directory and 40 small files.
    static func libraryTree() -> TreeBuilder {
        var tree = TreeBuilder()
        let base = TreeBuilder.defaultTime
        let a = bytes(300_000, seed: 1, compressible: true)
        tree.file("a.bin", a, mtime: base + 1)
        tree.file("big.bin", bytes(6 * 1024 * 1024 + 12_345, seed: 2, compressible: true), mtime: base + 2)
        tree.file("c.bin", bytes(200_000, seed: 3) + Array(a[50_000..<250_000]), mode: 0o600, mtime: base + 3)
        tree.file("dup.bin", a, mtime: base + 4)
        tree.file("empty", [], mtime: base + 5)
        tree.hardLink("hard", to: "a.bin")
        tree.symlink("link", target: "a.bin", mtime: base + 6)
        for index in 0..<40 {
            let name = "small/s" + String(repeating: "0", count: index < 10 ? 1 : 0) + "\(index).txt"
            tree.file(
                name, bytes(100 + index * 97, seed: 100 + UInt64(index), compressible: index % 2 == 0),
                mode: index % 3 == 0 ? 0o600 : 0o644, mtime: base + 10 + Int64(index))
        }
        tree.directory("small", mode: 0o750, mtime: base + 7)
        tree.directory("zdir/empty", mtime: base + 8)
        tree.file("zz-big.bin", bytes(4 * 1024 * 1024 + 300_000, seed: 4), mtime: base + 9)
        return tree
    }

    /// About 1.5 MiB in 60 files (many commits), multi-chunk files; `seed` changes every byte.
    static func transferTree(seed: UInt64) -> TreeBuilder {
        var tree = TreeBuilder()
        for index in 0..<60 {
            let size = index % 10 == 0 ? 150_000 : 100 + index * 211
            tree.file(
                "d\(index % 4)/f\(index)", bytes(size, seed: seed * 1000 + UInt64(index), compressible: index % 3 == 0),
                mtime: TreeBuilder.defaultTime + Int64(index))
        }
        return tree
    }

    /// Where an archive's commit records, manifest and footer are.
    struct Layout {
        /// The end offset of every commit record, in order.
        var commits: [UInt64] = []
        /// The ends of the commits taken while a file was open.
        var inFileCommits: [UInt64] = []
        var manifestOffset: UInt64 = 0
        var manifestLength: UInt64 = 0
        var footerOffset: Int = 0
        var size: Int = 0

        init(archiveAt path: String) throws {
            let descriptor = try FileDescriptor.open(path, flags: O_RDONLY)
            defer { _ = try? descriptor.close() }
            let stream = RecordStream(descriptor: descriptor)
            let scanner = ArchiveScanner(keying: nil)
            try scanner.start(stream)
            while let record = try stream.next() {
                try scanner.consume(record) { event in
                    guard case .commit(let end, let commit) = event else { return }
                    commits.append(end)
                    if commit.openEntry != CommitRecord.noOpenEntry { inFileCommits.append(end) }
                }
                if let footer = scanner.footer {
                    manifestOffset = footer.manifestOffset
                    manifestLength = footer.manifestLength
                    break
                }
            }
            size = Int(stream.offset)
            footerOffset = size - Footer.framedLength
        }

        /// What `verify --partial` should report for the first `count` bytes.
        func verifiedLength(ofPrefix count: Int) -> Int {
            if count == size { return size }
            return Int(commits.last { $0 <= UInt64(count) } ?? 0)
        }
    }

    /// The figures of ``ExportProperties`` (it is not `Equatable`).
    struct Figures: Equatable, CustomStringConvertible {
        var uncompressed: UInt64, compressed: UInt64?, archive: UInt64
        var entries: Int, chunks: Int, references: Int, unique: UInt64

        init(_ p: ExportProperties) {
            uncompressed = p.uncompressedBytes
            compressed = p.compressedBytes
            archive = p.archiveBytes
            entries = p.entryCount
            chunks = p.chunkCount
            references = p.referenceCount
            unique = p.uniqueBytes
        }

        var description: String {
            "content \(uncompressed), stored \(compressed.map(String.init) ?? "-"), archive \(archive), entries \(entries), chunks \(chunks), references \(references), unique \(unique)"
        }
    }

    /// Byte equality through `memcmp` (an element-wise `==` is slow in a debug build).
    static func same(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBytes { x in
            b.withUnsafeBytes { y in a.isEmpty || memcmp(x.baseAddress!, y.baseAddress!, a.count) == 0 }
        }
    }

    /// Where two byte arrays first differ, for messages.
    static func difference(_ a: [UInt8], _ b: [UInt8]) -> String {
        if a == b { return "identical" }
        let first = (0..<min(a.count, b.count)).first { a[$0] != b[$0] } ?? min(a.count, b.count)
        return "\(a.count) vs \(b.count) bytes, first difference at \(first)"
    }
}
