import CairnTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

@testable import Cairn

/// Reading an archive at random from a source that is not a local file (`Spec/0001 §13.7`,
/// `Spec/0003 §1.3`): the range planning, the per-entry checks that replace the walk (one meaning
/// without reading the whole archive), resuming an extraction of everything from the journal.
/// The HTTP source itself is tested against a real nginx in ``RemoteHTTPTests``.
@Suite("Remote archives")
struct RemoteArchiveTests {
    typealias Hostile = HostileArchiveTests

    /// A local archive served as a remote source would be (``ArchiveSource/isRemote``), counting
    /// the bytes read, so the remote reading rules are tested without a network.
    final class CountingRemoteSource: ArchiveSource {
        let base: LocalArchiveSource
        let name: String
        private let counted = Atomic<UInt64>(0)
        var size: UInt64 { base.size }
        var isRemote: Bool { true }
        var bytesRead: UInt64 { counted.load(ordering: .relaxed) }

        init(path: String, name: String = "http://example.invalid/archive.cairn") throws {
            base = try LocalArchiveSource(path: path)
            self.name = name
        }

        func read(fromAbsoluteOffset offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws(CairnError) -> Int {
            let n = try base.read(fromAbsoluteOffset: offset, into: buffer)
            counted.add(UInt64(n), ordering: .relaxed)
            return n
        }

        func read(ranges: [Range<UInt64>]) throws(CairnError) -> [[UInt8]] {
            let requests = RangeCoalescer.coalesce(ranges, gap: 64 << 10, maximum: 8 << 20)
            counted.add(requests.reduce(0) { $0 + UInt64($1.count) }, ordering: .relaxed)
            return try base.read(ranges: ranges)
        }

        func openSequential() throws(CairnError) -> SequentialArchiveBytes { try base.openSequential() }
        func close() { base.close() }
    }

    // MARK: - Range planning

    @Test("coalescing merges neighbours within the gap, never past the cap, and keeps far ranges apart")
    func coalescing() {
        let gap: UInt64 = 100
        #expect(RangeCoalescer.coalesce([0..<10, 50..<60, 300..<310], gap: gap, maximum: 1000) == [0..<60, 300..<310])
        // Unsorted and overlapping input.
        #expect(RangeCoalescer.coalesce([500..<600, 0..<10, 550..<700], gap: gap, maximum: 1000) == [0..<10, 500..<700])
        // Adjacent ranges merge up to the cap, then a new request starts.
        #expect(RangeCoalescer.coalesce([0..<400, 400..<800, 800..<1200], gap: gap, maximum: 1000) == [0..<800, 800..<1200])
        // One range longer than the cap is split.
        #expect(RangeCoalescer.coalesce([0..<2500], gap: gap, maximum: 1000) == [0..<1000, 1000..<2000, 2000..<2500])
        // A gap one byte too wide stays two requests.
        #expect(RangeCoalescer.coalesce([0..<10, 111..<120], gap: gap, maximum: 1000) == [0..<10, 111..<120])
        #expect(RangeCoalescer.coalesce([], gap: gap, maximum: 1000).isEmpty)
    }

    // MARK: - Fixtures

    /// A tree with one large file among others and many small (packed) ones.
    static func tree(largeMiB: Int = 3, seed: UInt64 = 10) -> TreeBuilder {
        var generator = SeededGenerator(seed: seed)
        var tree = TreeBuilder()
        tree.directory("t")
        tree.file("t/before.bin", generator.bytes(3 << 20))
        tree.file("t/large.bin", generator.bytes(largeMiB << 20), mode: 0o640)
        tree.file("t/after.bin", generator.bytes(2 << 20))
        tree.directory("t/small")
        for i in 0..<40 { tree.file("t/small/\(i).txt", Array("small file \(i)\n".utf8) + generator.bytes(200 + i * 37)) }
        tree.symlink("t/link", target: "large.bin")
        return tree
    }

    /// Archives `tree` into `directory/name`; returns its path.
    static func archive(_ tree: TreeBuilder, in directory: TemporaryDirectory, name: String = "a.cairn") async throws -> String {
        let source = directory.appending("src-\(name)")
        try tree.materialize(at: source)
        let path = directory.appending(name)
        _ = try await RoundTrip.archive(path: source + "/t", to: path)
        return path
    }

    /// The stored bytes of entry `path`'s chunk records.
    static func storedBytes(of path: String, in reader: ArchiveReader) -> UInt64 {
        guard let index = reader.manifest.entries.firstIndex(where: { $0.entry.path == path }) else { return 0 }
        return reader.references(ofEntry: index).reduce(0) {
            $0 + UInt64(RecordFraming.overhead + ChunkRecordPrefix.length) + UInt64(reader.manifest.chunks[Int($1)].storedLength)
        }
    }

    // MARK: - One meaning without the walk

    @Test("a remote source is not walked, and extracting one file reads little more than its stored records")
    func remoteSingleFileReadsLittle() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = try await Self.archive(Self.tree(), in: directory)
        let source = try CountingRemoteSource(path: path)
        let extractor = try Extractor(source: source, keying: nil)
        defer { extractor.close() }
        #expect(!extractor.reader.walkedRecords)
        let local = try ArchiveReader(path: path)
        defer { local.close() }
        #expect(local.walkedRecords)
        let opened = source.bytesRead
        try await extractor.extractItem(atPathInArchive: "t/large.bin", to: directory.url(appending: "out"))
        let stored = Self.storedBytes(of: "t/large.bin", in: local)
        #expect(stored > 3 << 20)
        let read = source.bytesRead - opened
        #expect(read >= stored && Double(read) <= 1.1 * Double(stored), "read \(read) for \(stored) stored bytes")
        let extracted = try RawFileSystem.contents(ofFile: Array(directory.appending("out/t/large.bin").utf8))
        #expect(extracted.count == 3 << 20)
        #expect(try FileStatus.of(Array(directory.appending("out/t/large.bin").utf8)).permissions == 0o640)
    }

    @Test("a manifest that gives an entry another mode than its record is refused remotely as locally", arguments: [false, true])
    func forgedModeRefusedRemotely(packed: Bool) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let honest: [UInt8]
        if packed {
            honest = try RawFileSystem.contents(ofFile: Array(try await Self.archive(Self.tree(largeMiB: 1), in: directory).utf8))
        } else {
            honest = try OneMeaningTests.twoFiles()
        }
        let target = packed ? "t/small/3.txt" : "d/second.txt"
        let manifest = try OneMeaningTests.manifest(of: honest)
        let index = try #require(manifest.entries.firstIndex { $0.entry.path == target })
        #expect((manifest.entries[index].pack != nil) == packed)
        let forged = try OneMeaningTests.editingManifest(honest) { $0.entries[index].entry.permissions = 0o4777 }
        let path = try Hostile.write(forged, "forged.cairn", in: directory)
        // Locally the walk refuses to open it.
        #expect(throws: CairnError.self) { _ = try Extractor(reader: ArchiveReader(path: path)) }
        // Remotely it opens (the rows obey the entry rules) but extracting the entry reads its
        // record (or pack) and refuses, naming the URL, and nothing appears.
        let source = try CountingRemoteSource(path: path)
        let extractor = try Extractor(source: source, keying: nil)
        defer { extractor.close() }
        let out = directory.url(appending: "out")
        do {
            try await extractor.extractItem(atPathInArchive: target, to: out)
            Issue.record("a forged manifest extracted")
        } catch let error as CairnError {
            #expect(error.code == .corrupted)
            #expect(error.message.contains("disagree"), "\(error)")
            #expect(error.description.contains("mode 4777"), "\(error)")
        }
        #expect(!FileManager.default.fileExists(atPath: out.path))
        // An entry in an entry record of its own that agrees still extracts (a pack's rows are
        // checked together: its other items are refused too).
        if !packed {
            try await extractor.extractItem(atPathInArchive: "d/first.txt", to: directory.url(appending: "other"))
            #expect(FileManager.default.fileExists(atPath: directory.appending("other/d/first.txt")))
        }
    }

    // MARK: - Resuming everything from the journal

    /// Cuts a streaming extraction of `archive` into `destination` after `fraction` of its bytes.
    static func cutStreamExtraction(_ archive: String, into destination: URL, fraction: Double, in directory: TemporaryDirectory)
        async throws
    {
        let bytes = try RawFileSystem.contents(ofFile: Array(archive.utf8))
        let cutPath = try Hostile.write(Array(bytes[0..<Int(Double(bytes.count) * fraction)]), "cut.cairn", in: directory)
        let handle = try #require(FileHandle(forReadingAtPath: cutPath))
        defer { try? handle.close() }
        await #expect(throws: CairnError.self) { _ = try await Extractor.extractStream(from: handle, to: destination) }
    }

    @Test("resuming an extraction of everything reads only the missing entries' records and ends with the same tree")
    func resumeEverythingRemotely() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = try await Self.archive(Self.tree(), in: directory)
        let out = directory.url(appending: "out")
        try await Self.cutStreamExtraction(path, into: out, fraction: 0.75, in: directory)
        let source = try CountingRemoteSource(path: path)
        let extractor = try Extractor(source: source, keying: nil)
        defer { extractor.close() }
        var options = ExtractionOptions()
        options.resume = true
        try await extractor.extractAll(to: out, options: options)
        // The first two large files (5 of the 8 MiB) were complete: only the rest is read.
        let local = try ArchiveReader(path: path)
        defer { local.close() }
        let missing = Self.storedBytes(of: "t/large.bin", in: local)
        #expect(source.bytesRead > missing && source.bytesRead < source.size / 2, "read \(source.bytesRead) of \(source.size)")
        let expected = directory.url(appending: "expected")
        try await Extractor.withExtractor(at: .file(path: path)) { try await $0.extractAll(to: expected) }
        let a = try TreeSnapshot(at: expected.path + "/t")
        let b = try TreeSnapshot(at: out.path + "/t")
        #expect(a == b, "\(a.diff(b))")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains("staging") }
        #expect(leftovers.isEmpty)
    }

    @Test("resuming from another archive is refused naming its URL, and the staging directory is kept")
    func resumeFromAnotherArchiveRefused() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = try await Self.archive(Self.tree(), in: directory)
        // The same names and sizes, other contents.
        let other = try await Self.archive(Self.tree(seed: 11), in: directory, name: "b.cairn")
        let out = directory.url(appending: "out")
        try await Self.cutStreamExtraction(path, into: out, fraction: 0.6, in: directory)
        let source = try CountingRemoteSource(path: other, name: "http://example.invalid/other.cairn")
        let extractor = try Extractor(source: source, keying: nil)
        defer { extractor.close() }
        var options = ExtractionOptions()
        options.resume = true
        do {
            try await extractor.extractAll(to: out, options: options)
            Issue.record("resumed from another archive")
        } catch let error as CairnError {
            #expect(error.code == .notResumable)
            #expect(error.description.contains("http://example.invalid/other.cairn"), "\(error)")
        }
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains("staging") }
        #expect(leftovers == [".out.cairn-staging"])
        #expect(!FileManager.default.fileExists(atPath: out.path))
    }
}

/// The HTTP archive source and the commands over URLs, against a real nginx (``NginxServer``):
/// the same results as locally, the bytes a single-file extraction transfers, one meaning,
/// servers without range support, an archive replaced while it is read, 404, and resuming.
@Suite("Remote archives over HTTP", .serialized)
struct RemoteHTTPTests {
    typealias Remote = RemoteArchiveTests

    static func cairn(_ arguments: [String], in directory: String? = nil) throws -> ChildProcess.Result {
        try ChildProcess.run(ChildProcess.cairnExecutable(besideBundle: Bundle.module.bundleURL), arguments, in: directory)
    }

    /// A served directory holding `a.cairn` (``RemoteArchiveTests/tree(largeMiB:seed:)``).
    static func served(_ directory: TemporaryDirectory) async throws -> (server: NginxServer, archive: String) {
        let www = directory.appending("www")
        try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
        let path = try await Remote.archive(Remote.tree(), in: directory)
        try FileManager.default.moveItem(atPath: path, toPath: www + "/a.cairn")
        return (try NginxServer(root: www), www + "/a.cairn")
    }

    @Test("list, info and extract of a URL print and write what they do for the local file")
    func sameAsLocal() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (server, local) = try await Self.served(directory)
        defer { server.stop() }
        let url = server.url("a.cairn")
        for arguments in [["list"], ["list", "--long"], ["list", "--json"], ["info", "--json"]] {
            let remote = try Self.cairn(arguments + [url])
            let here = try Self.cairn(arguments + [local])
            #expect(remote.status == 0, "\(arguments): \(remote.stderr)")
            let expected = arguments[0] == "info" ? here.stdout : here.stdout
            #expect(remote.stdout == expected, "\(arguments)")
        }
        // Text info names the URL.
        #expect(try Self.cairn(["info", url]).stdout.contains("archive:           \(url)"))
        // Everything (streamed), and a selection (ranges).
        for (name, extra) in [("all", [String]()), ("some", ["t/small", "t/large.bin"])] {
            let remote = try Self.cairn(["extract", url, "-C", directory.appending("remote-\(name)")] + extra)
            let here = try Self.cairn(["extract", local, "-C", directory.appending("local-\(name)")] + extra)
            #expect(remote.status == 0 && here.status == 0, "\(remote.stderr)")
            // A selection's parent directories are made, not extracted: their times are now.
            let a = try TreeSnapshot(at: directory.appending("remote-\(name)/t"), directoryTimes: name == "all")
            let b = try TreeSnapshot(at: directory.appending("local-\(name)/t"), directoryTimes: name == "all")
            #expect(a == b, "\(a.diff(b))")
        }
        let verified = try Self.cairn(["verify", url])
        #expect(verified.status == 0 && verified.stdout.hasPrefix("OK \(url)"), "\(verified.stderr)")
        // cat from an offset is the local file's tail, and a token is checked remotely.
        let cat = try Self.cairn(["cat", url, "--from-offset", "1000"])
        #expect(cat.stdoutBytes == Array(try RawFileSystem.contents(ofFile: Array(local.utf8)).dropFirst(1000)))
        let token = try Self.cairn(["cat", url, "--expect-token", "cairn1-1000-" + String(repeating: "0", count: 64)])
        #expect(token.status == 1 && token.stderr.contains(url), "\(token.stderr)")
        // The receiver's half: a cut copy's token, then the rest from the URL, makes the archive.
        let whole = try RawFileSystem.contents(ofFile: Array(local.utf8))
        let copy = try HostileArchiveTests.write(Array(whole[0..<(whole.count / 2)]), "copy.cairn", in: directory)
        let partial = try Self.cairn(["verify", "--partial", "--json", copy])
        let json = try #require(try JSONSerialization.jsonObject(with: Data(partial.stdoutBytes)) as? [String: Any])
        let verifiedLength = try #require(json["verifiedLength"] as? Int)
        let resumeToken = try #require(json["resumeToken"] as? String)
        #expect(verifiedLength > 0)
        let rest = try Self.cairn(["cat", url, "--expect-token", resumeToken])
        #expect(rest.status == 0, "\(rest.stderr)")
        #expect(Array(whole[0..<verifiedLength]) + rest.stdoutBytes == whole)
    }

    @Test("extracting one file of a few MiB transfers at most 1.1 times its stored bytes plus the manifest and footer")
    func singleFileTransfer() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (server, local) = try await Self.served(directory)
        defer { server.stop() }
        let reader = try ArchiveReader(path: local)
        defer { reader.close() }
        let stored = Remote.storedBytes(of: "t/large.bin", in: reader)
        let manifestAndFooter = reader.fileSize - reader.footer.manifestOffset
        let result = try Self.cairn(["extract", server.url("a.cairn"), "-C", directory.appending("out"), "t/large.bin"])
        #expect(result.status == 0, "\(result.stderr)")
        let log = server.accessLog(waitingFor: 3)
        let transferred = log.reduce(0) { $0 + $1.bodyBytesSent }
        // The opening suffix request reads the manifest and footer (and up to 64 KiB before
        // them); the header's record comes in one small block.
        let opening = max(manifestAndFooter, UInt64(Footer.framedLength) + HTTPArchiveSource.tailSlack) + HTTPArchiveSource.blockSize
        print("single-file remote extract: \(transferred) bytes transferred in \(log.count) requests for \(stored) stored bytes (+ \(manifestAndFooter) manifest and footer)")
        #expect(Double(transferred) <= 1.1 * Double(stored) + Double(opening), "\(transferred) bytes for \(stored): \(log)")
        #expect(log.allSatisfy { $0.status == 206 })
        let extracted = try RawFileSystem.contents(ofFile: Array(directory.appending("out/t/large.bin").utf8))
        #expect(extracted.count == 3 << 20)
    }

    @Test("a manifest forged to give a file another mode is refused over HTTP as locally")
    func forgedManifestRefused() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let www = directory.appending("www")
        try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
        let honest = try OneMeaningTests.twoFiles()
        let forged = try OneMeaningTests.editingManifest(honest) { $0.entries[2].entry.permissions = 0o4777 }
        let path = try HostileArchiveTests.write(forged, "forged.cairn", in: directory)
        try FileManager.default.moveItem(atPath: path, toPath: www + "/forged.cairn")
        let server = try NginxServer(root: www)
        defer { server.stop() }
        let url = server.url("forged.cairn")
        let remote = try Self.cairn(["extract", url, "-C", directory.appending("out"), "d/second.txt"])
        let here = try Self.cairn(["extract", www + "/forged.cairn", "-C", directory.appending("out"), "d/second.txt"])
        #expect(here.status == 1 && here.stderr.contains("disagrees"), "\(here.stderr)")
        #expect(remote.status == 1, "\(remote.stderr)")
        #expect(remote.stderr.contains(url) && remote.stderr.contains("disagrees with its records: mode 4777"), "\(remote.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.appending("out")))
        // Streaming from the URL reads every record: refused as well.
        let streamed = try Self.cairn(["extract", url, "-C", directory.appending("out")])
        #expect(streamed.status == 1 && !FileManager.default.fileExists(atPath: directory.appending("out")), "\(streamed.stderr)")
    }

    @Test("without range support seekable commands say what works, and verify and extract of everything still work")
    func noRanges() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (server, local) = try await Self.served(directory)
        defer { server.stop() }
        let url = server.url("noranges/a.cairn")
        for arguments in [["list", url], ["info", url], ["extract", url, "-C", directory.appending("x"), "t/large.bin"]] {
            let result = try Self.cairn(arguments)
            #expect(result.status == 1, "\(arguments)")
            #expect(result.stderr.contains(url) && result.stderr.contains("does not support range requests"), "\(result.stderr)")
            #expect(result.stderr.contains("'cairn verify URL'"), "\(result.stderr)")
        }
        let verified = try Self.cairn(["verify", url])
        #expect(verified.status == 0, "\(verified.stderr)")
        let extracted = try Self.cairn(["extract", url, "-C", directory.appending("out")])
        #expect(extracted.status == 0, "\(extracted.stderr)")
        let expected = try Self.cairn(["extract", local, "-C", directory.appending("expected")])
        #expect(expected.status == 0)
        #expect(try TreeSnapshot(at: directory.appending("out/t")) == TreeSnapshot(at: directory.appending("expected/t")))
    }

    @Test("an archive replaced on the server between two reads is sourceChanged naming the URL")
    func replacedWhileRead() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (server, served) = try await Self.served(directory)
        defer { server.stop() }
        let url = server.url("a.cairn")
        let extractor = try Extractor(source: HTTPArchiveSource(url: url), keying: nil)
        defer { extractor.close() }
        // Another archive at the same URL (renamed into place: a new ETag).
        let other = try await Remote.archive(Remote.tree(seed: 12), in: directory, name: "b.cairn")
        try FileManager.default.removeItem(atPath: served)
        try FileManager.default.moveItem(atPath: other, toPath: served)
        do {
            try await extractor.extractItem(atPathInArchive: "t/large.bin", to: directory.url(appending: "out"))
            Issue.record("read across a replaced archive")
        } catch let error as CairnError {
            #expect(error.code == .sourceChanged, "\(error)")
            #expect(error.path == url && error.message.contains("changed while it was read"), "\(error)")
            #expect(error.offset != nil)
        }
        #expect(!FileManager.default.fileExists(atPath: directory.appending("out")))
    }

    @Test("a 404 names the URL and exits 1, for every command")
    func notFound() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (server, _) = try await Self.served(directory)
        defer { server.stop() }
        let url = server.url("missing.cairn")
        for arguments in [["list", url], ["info", url], ["verify", url], ["extract", url, "-C", directory.appending("o")],
            ["extract", url, "-C", directory.appending("o"), "x"], ["cat", url]]
        {
            let result = try Self.cairn(arguments)
            #expect(result.status == 1, "\(arguments)")
            #expect(result.stderr.contains(url) && result.stderr.contains("404"), "\(arguments): \(result.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: directory.appending("o")))
    }

    @Test("extract URL --resume after a cut fetches only what is missing and ends with the same tree; another archive is refused")
    func resumeAfterCut() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (server, local) = try await Self.served(directory)
        defer { server.stop() }
        // A transfer cut after 75% of the archive: the same bytes as a connection cut there.
        let bytes = try RawFileSystem.contents(ofFile: Array(local.utf8))
        try RawFileSystem.writeFile(Array((server.root + "/cut.cairn").utf8), Array(bytes[0..<(bytes.count * 3 / 4)]))
        let out = directory.appending("out")
        let cut = try Self.cairn(["extract", server.url("cut.cairn"), "-C", out])
        #expect(cut.status == 1 && cut.stderr.contains("--resume"), "\(cut.stderr)")
        #expect(FileManager.default.fileExists(atPath: directory.appending(".out.cairn-staging")))
        // Another archive at the URL: refused, naming it, and the staging directory stays.
        let otherPath = try await Remote.archive(Remote.tree(seed: 13), in: directory, name: "other.cairn")
        try FileManager.default.moveItem(atPath: otherPath, toPath: server.root + "/other.cairn")
        let refused = try Self.cairn(["extract", server.url("other.cairn"), "-C", out, "--resume"])
        #expect(refused.status == 1 && refused.stderr.contains(server.url("other.cairn")), "\(refused.stderr)")
        #expect(refused.stderr.contains("not the one whose extraction was interrupted"), "\(refused.stderr)")
        #expect(FileManager.default.fileExists(atPath: directory.appending(".out.cairn-staging")))
        let before = server.accessLog().count
        let resumed = try Self.cairn(["extract", server.url("a.cairn"), "-C", out, "--resume"])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        let log = Array(server.accessLog(waitingFor: before + 3).dropFirst(before))
        let transferred = log.reduce(0) { $0 + $1.bodyBytesSent }
        // Two of the three large files were complete: only the third and the small ones are fetched.
        let reader = try ArchiveReader(path: local)
        defer { reader.close() }
        let missing = Remote.storedBytes(of: "t/large.bin", in: reader)
        #expect(transferred > missing && transferred < UInt64(bytes.count) / 2, "\(transferred) of \(bytes.count): \(log)")
        #expect(log.allSatisfy { $0.status == 206 })
        let expected = try Self.cairn(["extract", local, "-C", directory.appending("expected")])
        #expect(expected.status == 0)
        let a = try TreeSnapshot(at: out + "/t")
        let b = try TreeSnapshot(at: directory.appending("expected/t"))
        #expect(a == b, "\(a.diff(b))")
        #expect(!FileManager.default.fileExists(atPath: directory.appending(".out.cairn-staging")))
    }

    @Test("extract URL killed mid-transfer, then extract URL --resume, ends with the same tree")
    func resumeAfterKill() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let www = directory.appending("www")
        try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
        let local = www + "/a.cairn"
        try FileManager.default.moveItem(atPath: try await Remote.archive(Remote.tree(), in: directory), toPath: local)
        // About 2 s for the whole archive: killed once a commit is journaled.
        let server = try NginxServer(root: www, slowRate: "4m")
        defer { server.stop() }
        let out = directory.appending("out")
        let child = try ChildProcess.start(
            ChildProcess.cairnExecutable(besideBundle: Bundle.module.bundleURL), ["extract", server.url("slow/a.cairn"), "-C", out])
        let journal = directory.appending(".out.cairn-staging/.cairn-journal")
        try await Await.suspendingUntil("the extraction journals a commit") {
            ((try? String(contentsOfFile: journal, encoding: .utf8)) ?? "").contains("\ncommit ") || !child.process.isRunning
        }
        kill(child.pid, SIGKILL)
        let killed = child.wait()
        #expect(killed.killed, "the extraction ended before it was killed: \(killed.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out))
        let resumed = try Self.cairn(["extract", server.url("a.cairn"), "-C", out, "--resume"])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        let expected = try Self.cairn(["extract", local, "-C", directory.appending("expected")])
        #expect(expected.status == 0)
        let a = try TreeSnapshot(at: out + "/t")
        let b = try TreeSnapshot(at: directory.appending("expected/t"))
        #expect(a == b, "\(a.diff(b))")
    }

    @Test("a 206 whose Content-Range starts elsewhere than asked is sourceChanged naming the URL; a cut connection is retried")
    func shiftedRangeAndRetry() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (server, local) = try await Self.served(directory)
        defer { server.stop() }
        let proxy = try FaultProxy(upstreamPort: server.port)
        defer { proxy.stop() }
        let url = proxy.url("a.cairn")
        // A connection cut once in the middle of a chunk range: retried, and the file is whole.
        let extractor = try Extractor(source: HTTPArchiveSource(url: url), keying: nil)
        defer { extractor.close() }
        try proxy.set(.cut(afterBodyBytes: 100_000, times: 1))
        try await extractor.extractItem(atPathInArchive: "t/large.bin", to: directory.url(appending: "retried"))
        let reference = directory.appending("reference")
        try await Extractor.withExtractor(at: .file(path: local)) { try await $0.extractItem(atPathInArchive: "t/large.bin", to: URL(fileURLWithPath: reference)) }
        #expect(
            try RawFileSystem.contents(ofFile: Array(directory.appending("retried/t/large.bin").utf8))
                == RawFileSystem.contents(ofFile: Array((reference + "/t/large.bin").utf8)))
        #expect(proxy.requests.contains { $0.fault.contains("cut") }, "\(proxy.requests)")
        // A shifted Content-Range: refused, naming the URL and the offset asked for.
        try proxy.set(.shiftContentRange(by: 16))
        do {
            try await extractor.extractItem(atPathInArchive: "t/before.bin", to: directory.url(appending: "shifted"))
            Issue.record("a shifted range was accepted")
        } catch let error as CairnError {
            #expect(error.code == .sourceChanged && error.path == url && error.offset != nil, "\(error)")
        }
        #expect(!FileManager.default.fileExists(atPath: directory.appending("shifted")))
    }

    @Test("the library opens and verifies an archive at a URL: Extractor(url:), verifyArchive(at:)")
    func libraryURLs() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (server, local) = try await Self.served(directory)
        defer { server.stop() }
        let url = try #require(URL(string: server.url("a.cairn")))
        let remote = try await Extractor(at: url)
        defer { remote.close() }
        let here = try await Extractor(at: .file(path: local))
        defer { here.close() }
        #expect(remote.entries == here.entries)
        #expect(remote.summary == here.summary)
        let report = try await Extractor.verifyArchive(at: ArchiveLocation(url))
        #expect(report == (try await Extractor.verifyArchive(at: .file(path: local))))
        #expect(try await remote.verify() == report)
        let noRanges = try #require(URL(string: server.url("noranges/a.cairn")))
        #expect(try await Extractor.verifyArchive(at: ArchiveLocation(noRanges)) == report)
        await #expect { _ = try await Extractor(at: noRanges) } throws: { ($0 as? CairnError)?.code == .invalidArgument }
    }
}
