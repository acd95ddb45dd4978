import CairnTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

import Cairn

/// Special files and exact times (issue 9, items 2 and 6; `Spec/0001 §6`): FIFOs and device
/// nodes are entries, recreated on extraction (device nodes only as root); sockets are skipped
/// with a warning, as tar does; times are seconds and nanoseconds, and a time the destination
/// cannot hold is a warning naming the file.
@Suite("Special files and exact times")
struct SpecialFileAndTimeTests {
    /// `<root>/tree` with a file, a FIFO, `/dev/null`'s twin when `mknod` works here, and a
    /// listening UNIX socket; returns whether the device node was made.
    static func makeTree(at root: String) throws -> Bool {
        try FileManager.default.createDirectory(atPath: root + "/tree", withIntermediateDirectories: true)
        try RawFileSystem.writeFile(Array((root + "/tree/a.txt").utf8), Array("a\n".utf8))
        guard mkfifo(root + "/tree/pipe", 0o640) == 0 else { throw CairnError(.io, "mkfifo failed") }
        let device = mknod(root + "/tree/null", S_IFCHR | 0o600, dev_t(SpecialFiles.join(.init(major: 1, minor: 3)))) == 0
        try bindSocket(root + "/tree/socket")
        return device
    }

    /// A UNIX socket bound at `path` (the descriptor is closed; the name stays, as a socket).
    static func bindSocket(_ path: String) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw CairnError(.io, "socket failed") }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.prefix(raw.count - 1).enumerated() { raw[index] = byte }
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else { throw CairnError(.io, "bind failed: \(errno)") }
    }

    @Test("FIFOs and device nodes round-trip as entries through both extractors; a socket is skipped with a warning", arguments: [false, true])
    func specialFilesRoundTrip(selecting: Bool) async throws {
        let work = try TemporaryDirectory(prefix: "cairn-special")
        defer { work.remove() }
        let madeDevice = try Self.makeTree(at: work.path)
        let archive = work.appending("a.cairn")
        let (_, properties) = try await RoundTrip.archive(path: work.appending("tree"), to: archive)
        #expect(properties.warnings.count == 1, "\(properties.warnings)")
        #expect(properties.warnings.first?.code == .unsupportedFileType)
        #expect(properties.warnings.first?.path?.hasSuffix("tree/socket") == true, "\(properties.warnings)")

        let extractor = try await Extractor(at: .file(path: archive))
        defer { extractor.close() }
        let byPath = Dictionary(uniqueKeysWithValues: extractor.entries.map { ($0.path, $0) })
        #expect(byPath["tree/pipe"]?.kind == .fifo)
        #expect(byPath["tree/pipe"]?.permissions == 0o640)
        #expect(byPath["tree/socket"] == nil)
        if madeDevice {
            #expect(byPath["tree/null"]?.kind == .characterDevice)
            #expect(byPath["tree/null"]?.device == ArchiveEntry.Device(major: 1, minor: 3))
        }
        let warnings = Mutex<[CairnError]>([])
        var options = ExtractionOptions()
        options.onWarning = { warning in warnings.withLock { $0.append(warning) } }
        let destination = work.appending("out")
        if selecting {
            try await extractor.extractItem(atPathInArchive: "tree", to: URL(fileURLWithPath: destination), options: options)
        } else {
            try await extractor.extractAll(to: URL(fileURLWithPath: destination), options: options)
        }
        let pipe = try RawFileSystem.status(Array((destination + "/tree/pipe").utf8))
        #expect(pipe.st_mode & S_IFMT == S_IFIFO)
        #expect(pipe.st_mode & 0o7777 == 0o640)
        if madeDevice {
            // This process could make one, so extraction (as the same user) must too.
            let node = try RawFileSystem.status(Array((destination + "/tree/null").utf8))
            #expect(node.st_mode & S_IFMT == S_IFCHR)
            #expect(SpecialFiles.split(UInt64(node.st_rdev)) == ArchiveEntry.Device(major: 1, minor: 3))
            #expect(warnings.withLock { $0 }.isEmpty, "\(warnings.withLock { $0 })")
        }
        #expect(!RawFileSystem.exists(Array((destination + "/tree/socket").utf8)))
    }

    @Test("diff finds an extracted FIFO and device node the same as archived, and names a changed device number")
    func diffOfSpecialFiles() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-special-diff")
        defer { work.remove() }
        let madeDevice = try Self.makeTree(at: work.path)
        unlink(work.appending("tree/socket"))
        let archive = work.appending("a.cairn")
        _ = try await RoundTrip.archive(path: work.appending("tree"), to: archive)
        let extractor = try await Extractor(at: .file(path: archive))
        defer { extractor.close() }
        try await extractor.extractAll(to: work.url(appending: "out"))
        let entries = try extractor.entriesWithContentDigests()
        let root = Array(work.appending("out").utf8)
        let same = try ArchiveDiff.compare(entries: entries, chunking: extractor.header.chunking, keying: nil, with: root)
        #expect(same.isEmpty, "\(same)")
        guard madeDevice else { return }
        let node = work.appending("out/tree/null")
        unlink(node)
        #expect(mknod(node, S_IFCHR | 0o600, dev_t(SpecialFiles.join(.init(major: 1, minor: 5)))) == 0)
        let changed = try ArchiveDiff.compare(entries: entries, chunking: extractor.header.chunking, keying: nil, with: root)
        let difference = try #require(changed.first { $0.path == Array("tree/null".utf8) })
        #expect(difference.aspects.contains(.device), "\(changed)")
        #expect(difference.details.contains { $0.contains("device 1, 3 in the archive, 1, 5 here") }, "\(changed)")
    }

    @Test("the CLI archives a FIFO, warns about a socket by name and exits 3; the archive verifies and lists the FIFO")
    func socketWarningOnTheCommandLine() throws {
        let work = try TemporaryDirectory(prefix: "cairn-special-cli")
        defer { work.remove() }
        _ = try Self.makeTree(at: work.path)
        let archive = work.appending("a.cairn")
        let result = try BehaviourCLI.run(["create", "-o", archive, "tree"], in: work.path)
        #expect(result.status == 3, "\(result.stderr)")
        #expect(result.stderr.contains("tree/socket"), "\(result.stderr)")
        #expect(!result.stderr.contains("tree/pipe"), "\(result.stderr)")
        #expect(try BehaviourCLI.run(["verify", archive]).status == 0)
        let list = try BehaviourCLI.run(["list", "-l", archive])
        #expect(list.stdoutLines.contains { $0.hasPrefix("p 0640") && $0.hasSuffix("tree/pipe") }, "\(list.stdout)")
    }

    /// Times beyond every `i64`-of-nanoseconds encoding: 1600, 2600 and 3000, with nanoseconds.
    static let extremeTimes: [Timestamp] = [
        Timestamp(seconds: -11_676_096_000, nanoseconds: 123_456_789),  // 1600-01-01
        Timestamp(seconds: 19_880_899_200, nanoseconds: 1),  // 2600-01-01
        Timestamp(seconds: 32_503_680_000, nanoseconds: 999_999_999),  // 3000-01-01
    ]

    @Test("times outside 1677–2262 are stored exactly, and extraction either restores each or warns naming the file")
    func extremeTimesAreExactOrWarned() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-times")
        defer { work.remove() }
        let archive = work.appending("t.cairn")
        let archiver = try await Archiver(writingTo: .file(path: archive))
        for (index, time) in Self.extremeTimes.enumerated() {
            let content = AsyncStream<[UInt8]> { continuation in
                continuation.yield(Array("t\(index)\n".utf8))
                continuation.finish()
            }
            try await archiver.append(contentsOf: content, pathInArchive: "t\(index)", modificationTime: time)
        }
        _ = try await archiver.finish()

        let extractor = try await Extractor(at: .file(path: archive))
        defer { extractor.close() }
        #expect(extractor.formatVersion == FormatVersion.current)
        #expect(extractor.entries.map(\.modificationTime) == Self.extremeTimes)

        let warnings = Mutex<[CairnError]>([])
        var options = ExtractionOptions()
        options.onWarning = { warning in warnings.withLock { $0.append(warning) } }
        let destination = work.appending("out")
        try await extractor.extractAll(to: URL(fileURLWithPath: destination), options: options)
        let all = warnings.withLock { $0 }
        for (index, time) in Self.extremeTimes.enumerated() {
            let held = try FileStatus.of(Array((destination + "/t\(index)").utf8)).modificationTime
            let warned = all.filter { $0.path == "t\(index)" }
            if held == time {
                #expect(warned.isEmpty, "t\(index) kept its time, yet: \(warned)")
            } else {
                // The file system clamped it (ext4 holds 1901–2446): said, not silent.
                #expect(warned.count == 1, "t\(index): held \(held), wanted \(time), warnings \(all)")
                #expect(warned.first?.message.contains(time.description) == true, "\(warned)")
            }
        }
    }

    @Test("a time reads as seconds and nanoseconds summed, before 1970 too")
    func timestampDescription() {
        #expect(Timestamp(seconds: 1_700_000_000, nanoseconds: 123).description == "1700000000.000000123")
        #expect(Timestamp(nanosecondsSinceEpoch: -1_250_000_000).description == "-1.250000000")
        #expect(Timestamp(seconds: -11_676_096_000, nanoseconds: 123_456_789).description == "-11676095999.876543211")
        #expect(Timestamp(seconds: -5).description == "-5.000000000")
        #expect(Timestamp(seconds: .min, nanoseconds: 1).description == "-9223372036854775807.999999999")
    }

    @Test("the entry encoding round-trips the extremes of every field and refuses what is out of range")
    func entryCodecLimits() throws {
        let extremes = [
            ArchiveEntry(
                pathBytes: Array(repeating: 0x61, count: FormatLimits.maximumPathLength), kind: .blockDevice, permissions: 0o7777,
                modificationTime: Timestamp(seconds: .min, nanoseconds: 999_999_999), userID: .max, groupID: .max,
                device: .init(major: .max, minor: .max)),
            ArchiveEntry(
                pathBytes: [0xFF, 0x2F, 0x01], kind: .file, permissions: 0, modificationTime: Timestamp(seconds: .max), size: .max),
            ArchiveEntry(pathBytes: Array("fifo".utf8), kind: .fifo, permissions: 0o600, modificationTime: 0),
        ]
        var w = ByteWriter()
        EntryCodec.encode(extremes, into: &w)
        var r = ByteReader(w.bytes, baseOffset: 0, what: "test")
        #expect(try EntryCodec.decode(&r) == extremes)
        #expect(r.isAtEnd)

        // Nanoseconds of a whole second, and a varint not in its shortest form, are corrupted.
        let one = ArchiveEntry(pathBytes: Array("x".utf8), kind: .directory, permissions: 0o755, modificationTime: 0)
        let encoded = EntryCodec.encode(one)
        // count 1, kind 2, shared 0, suffix 1 "x", mode (2 bytes), uid 0, gid 0, seconds 0, nanoseconds 0, xattrs 0.
        #expect(encoded == [1, 2, 0, 1, 0x78, 0xED, 0x03, 0, 0, 0, 0, 0])
        var bad = encoded
        bad.replaceSubrange(10...10, with: [0x80, 0x94, 0xEB, 0xDC, 0x03])  // 10^9
        var reader = ByteReader(bad, baseOffset: 0, what: "entry record")
        #expect(throws: CairnError.self) { _ = try EntryCodec.decodeRecord(&reader) }
        var long = encoded
        long.replaceSubrange(7...7, with: [0x80, 0x00])  // uid 0 in two bytes
        reader = ByteReader(long, baseOffset: 0, what: "entry record")
        let error = #expect(throws: CairnError.self) { _ = try EntryCodec.decodeRecord(&reader) }
        #expect(error?.message.contains("shortest form") == true, "\(String(describing: error))")
    }
}
