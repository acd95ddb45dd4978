import Cairn
import CairnTestSupport
import Foundation
import Glibc
import Testing

/// Safe, all-or-nothing extraction (`Spec/0001-container-format.md §6.2`, `§13`): hostile
/// archives are refused before anything is written, damage is detected, and nothing outside the
/// destination ever changes.
@Suite("Extractor")
struct ExtractorTests {
    // MARK: - Crafting archives

    /// Builds archives entry by entry with the package-level ``ArchiveWriter``, which writes
    /// whatever it is given (only the format's hard limits are checked).
    struct Crafter {
        let writer: ArchiveWriter

        init(header: ArchiveHeader = ArchiveHeader()) throws {
            writer = try ArchiveWriter(header: header)
        }

        func file(_ path: [UInt8], _ content: [UInt8], mode: UInt32 = 0o644) throws {
            try writer.beginEntry(
                ArchiveEntry(pathBytes: path, kind: .file, permissions: mode, modificationTime: 1_000, size: UInt64(content.count)))
            if !content.isEmpty {
                let id = try SHA256.hash(content)
                try content.withUnsafeBytes { raw in
                    try writer.appendChunk(id: id, rawLength: content.count, codec: .none, stored: writer.contains(id) ? nil : raw)
                }
            }
            try writer.endFile()
        }

        func file(_ path: String, _ content: [UInt8]) throws { try file(Array(path.utf8), content) }

        func directory(_ path: [UInt8]) throws {
            try writer.beginEntry(ArchiveEntry(pathBytes: path, kind: .directory, permissions: 0o755, modificationTime: 1_000))
        }

        func symlink(_ path: [UInt8], target: [UInt8]) throws {
            try writer.beginEntry(
                ArchiveEntry(pathBytes: path, kind: .symlink, permissions: 0o777, modificationTime: 1_000, linkTarget: target))
        }

        func hardLink(_ path: [UInt8], target: [UInt8]) throws {
            try writer.beginEntry(
                ArchiveEntry(pathBytes: path, kind: .hardLink, permissions: 0o644, modificationTime: 1_000, linkTarget: target))
        }

        /// A file of `count` references to one chunk of `chunk` bytes: a tiny archive that
        /// declares `count * chunk.count` bytes of output.
        func repeatedChunkFile(_ path: String, chunk: [UInt8], count: Int) throws {
            try writer.beginEntry(
                ArchiveEntry(
                    pathBytes: Array(path.utf8), kind: .file, permissions: 0o644, modificationTime: 1_000,
                    size: UInt64(count) * UInt64(chunk.count)))
            let id = try SHA256.hash(chunk)
            try chunk.withUnsafeBytes { raw in
                try writer.appendChunk(id: id, rawLength: chunk.count, codec: .none, stored: writer.contains(id) ? nil : raw)
            }
            for _ in 1..<count {
                try writer.appendChunk(id: id, rawLength: chunk.count, codec: .none, stored: nil)
            }
            try writer.endFile()
        }

        /// The complete archive.
        func finish() throws -> [UInt8] {
            try writer.finish()
            return writer.takeOutput()
        }

        /// The complete archive, with the manifest rewritten by `edit` (for entries the writer
        /// refuses to write, such as an empty path). The footer's manifest length and digest are
        /// recomputed; the body and the chain digest are left as they were, which a seekable
        /// reader does not check (`§13.1`).
        func finish(editingManifest edit: (inout Manifest) -> Void) throws -> [UInt8] {
            var archive = writer.takeOutput()
            let manifestOffset = UInt64(archive.count)
            try writer.finish()
            let tail = writer.takeOutput()
            let footerRecord = Array(tail.suffix(Footer.framedLength))
            var manifest = writer.manifest
            edit(&manifest)
            var encoded: [UInt8] = []
            manifest.encode(into: &encoded)
            var payload = Array(footerRecord[8..<(8 + Footer.payloadLength)])
            Self.put(manifestOffset, into: &payload, at: 0)
            Self.put(UInt64(encoded.count), into: &payload, at: 8)
            payload.replaceSubrange(16..<48, with: try SHA256.hash(encoded).bytes)
            archive += encoded
            RecordCodec.append(.footer, payload: payload, to: &archive)
            return archive
        }

        static func put(_ value: UInt64, into bytes: inout [UInt8], at offset: Int) {
            for index in 0..<8 { bytes[offset + index] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(index))) }
        }
    }

    /// The display form of a path in archive, as errors carry it.
    static func display(_ path: [UInt8]) -> String {
        ArchiveEntry(pathBytes: path, kind: .file, permissions: 0, modificationTime: 0).path
    }

    // MARK: - Hostile archives

    /// An archive that must be refused with `.unsafePath` naming `path`. Every one starts with a
    /// harmless file, so a partial extraction would show.
    enum Hostile: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case parentEscape, absolute, nestedEscape, emptyComponent, dotComponent, nulByte, emptyPath
        case longComponent, tooDeep, throughSymlink, throughSymlinkDeeper, throughFile
        case hardLinkToLater, hardLinkToNothing, hardLinkToDirectory, duplicateFile, duplicateDirectoryAndFile

        var testDescription: String { rawValue }

        /// The refused entry's path.
        var path: [UInt8] {
            switch self {
            case .parentEscape: Array("../evil".utf8)
            case .absolute: Array("/abs".utf8)
            case .nestedEscape: Array("a/../../b".utf8)
            case .emptyComponent: Array("a//b".utf8)
            case .dotComponent: Array("./a".utf8)
            case .nulByte: [0x61, 0x00, 0x62]
            case .emptyPath: []
            case .longComponent: [UInt8](repeating: 0x78, count: 300)
            case .tooDeep: Array(Array(repeating: "d", count: 600).joined(separator: "/").utf8)
            case .throughSymlink: Array("link/file".utf8)
            case .throughSymlinkDeeper: Array("link/sub/file".utf8)
            case .throughFile: Array("plain/child".utf8)
            case .hardLinkToLater, .hardLinkToNothing, .hardLinkToDirectory: Array("hard".utf8)
            case .duplicateFile: Array("ok.txt".utf8)
            case .duplicateDirectoryAndFile: Array("dir".utf8)
            }
        }

        /// The archive; `outside` is a directory outside the destination that symlinks aim at.
        func archive(outside: String) throws -> [UInt8] {
            let crafter = try Crafter()
            try crafter.file("ok.txt", Array("harmless".utf8))
            switch self {
            case .emptyPath:
                try crafter.file("placeholder", Array("payload".utf8))
                return try crafter.finish { manifest in manifest.entries[1].entry.pathBytes = [] }
            case .throughSymlink, .throughSymlinkDeeper:
                try crafter.symlink(Array("link".utf8), target: Array(outside.utf8))
                try crafter.file(path, Array("escaped".utf8))
            case .throughFile:
                try crafter.file("plain", Array("a file".utf8))
                try crafter.file(path, Array("below a file".utf8))
            case .hardLinkToLater:
                try crafter.hardLink(path, target: Array("later".utf8))
                try crafter.file("later", Array("later".utf8))
            case .hardLinkToNothing:
                try crafter.hardLink(path, target: Array("nowhere".utf8))
            case .hardLinkToDirectory:
                try crafter.directory(Array("somedir".utf8))
                try crafter.hardLink(path, target: Array("somedir".utf8))
            case .duplicateFile:
                try crafter.file(path, Array("second".utf8))
            case .duplicateDirectoryAndFile:
                try crafter.directory(path)
                try crafter.file(path, Array("file named like the directory".utf8))
            default:
                try crafter.file(path, Array("hostile".utf8))
            }
            return try crafter.finish()
        }
    }

    @Test("hostile entries are refused with unsafePath naming the entry, and nothing is written anywhere",
          arguments: Hostile.allCases, [false, true])
    func hostileArchiveRefused(hostile: Hostile, destinationExists: Bool) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let outside = directory.appending("outside")
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: false)
        let archivePath = directory.appending("hostile.cairn")
        try RawFileSystem.writeFile(Array(archivePath.utf8), try hostile.archive(outside: outside))
        let destination = directory.appending("destination")
        if destinationExists {
            var existing = TreeBuilder()
            existing.file("keep.txt", Array("keep".utf8))
            try existing.materialize(at: destination)
        }
        let before = try TreeSnapshot(at: directory.path)

        // Opening applies the entry rules to every record (§13.1 step 5), so the archive is
        // refused before any extraction starts; `verify` refuses it for the same reason.
        let error = await #expect(throws: CairnError.self) {
            let extractor = try await Extractor(at: .file(path: archivePath))
            defer { extractor.close() }
            try await extractor.extractAll(to: URL(fileURLWithPath: destination))
        }
        if hostile == .emptyPath {
            // Only the manifest has the empty path (no writer writes one): a split view, refused
            // because the manifest's row disagrees with the entry record.
            #expect(error?.code == .corrupted, "\(String(describing: error))")
        } else {
            #expect(error?.code == .unsafePath, "\(String(describing: error))")
            #expect(error?.path == Self.display(hostile.path), "\(String(describing: error))")
            let verifyError = await #expect(throws: CairnError.self) { _ = try await Extractor.verifyArchive(at: .file(path: archivePath)) }
            #expect(verifyError?.code == error?.code && verifyError?.offset == error?.offset, "\(String(describing: verifyError))")
        }

        // Nothing changed: not the destination (absent, or as it was), not beside it (no staging
        // directory), not outside (the symlink's target).
        let after = try TreeSnapshot(at: directory.path)
        #expect(before == after, "\(before.diff(after))")
        #expect(try RawFileSystem.names(atPath: Array(outside.utf8)).isEmpty)
        #expect(RawFileSystem.exists(Array(destination.utf8)) == destinationExists)
    }

    @Test("the streaming verifier refuses the same hostile entries", arguments: Hostile.allCases.filter { $0 != .emptyPath })
    func hostileArchiveFailsVerification(hostile: Hostile) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let archivePath = directory.appending("hostile.cairn")
        try RawFileSystem.writeFile(Array(archivePath.utf8), try hostile.archive(outside: directory.appending("outside")))
        let error = await #expect(throws: CairnError.self) { try await Extractor.verifyArchive(at: .file(path: archivePath)) }
        #expect(error?.code == .unsafePath, "\(String(describing: error))")
    }

    @Test("a 5000-byte path is refused when the manifest is read, as the format's hard limit says (§14: corrupted)")
    func overlongPathRefused() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let crafter = try Crafter()
        try crafter.file("placeholder", Array("payload".utf8))
        let long = Array(Array(repeating: "abcdefghi", count: 500).joined(separator: "/").utf8).prefix(5000)
        let archive = try crafter.finish { manifest in manifest.entries[0].entry.pathBytes = Array(long) }
        let archivePath = directory.appending("long.cairn")
        try RawFileSystem.writeFile(Array(archivePath.utf8), archive)
        let before = try TreeSnapshot(at: directory.path)
        let error = #expect(throws: CairnError.self) { _ = try Extractor(reader: ArchiveReader(path: archivePath)) }
        #expect(error?.code == .corrupted, "\(String(describing: error))")
        #expect(error?.offset != nil)
        let after = try TreeSnapshot(at: directory.path)
        #expect(before == after, "\(before.diff(after))")
    }

    // MARK: - Real archives

    static func sampleTree(seed: UInt64) -> TreeBuilder {
        var generator = SeededGenerator(seed: seed)
        var tree = TreeBuilder()
        tree.directory("docs", mode: 0o750, mtime: 1_500_000_000_000_000_001)
        tree.file("docs/a.txt", Array("alpha\n".utf8), mode: 0o640, mtime: 1_600_000_000_123_456_789)
        tree.file("docs/sub/b.bin", generator.bytes(200_000), mode: 0o600, mtime: 1_600_000_000_000_000_002)
        tree.directory("docs/empty", mode: 0o700, mtime: 1_600_000_000_000_000_003)
        tree.symlink("docs/to-a", target: "a.txt", mtime: 1_600_000_000_000_000_004)
        tree.file("other.bin", generator.bytes(300_000), mode: 0o644, mtime: 1_600_000_000_000_000_005)
        return tree
    }

    /// Materialises `tree` as `<directory>/source/tree` and archives it to `<directory>/<name>`.
    static func makeArchive(
        _ tree: TreeBuilder, in directory: TemporaryDirectory, name: String = "archive.cairn",
        configuration: Archiver.Configuration = Archiver.Configuration()
    ) async throws -> String {
        try tree.materialize(at: directory.appending("source/tree"))
        let path = directory.appending(name)
        _ = try await RoundTrip.archive(path: directory.appending("source/tree"), to: path, configuration: configuration)
        return path
    }

    /// The file offset of the record of the chunk with the largest stored payload, and that
    /// payload's length.
    static func largestChunk(_ archivePath: String) throws -> (offset: Int, storedLength: Int) {
        let extractor = try Extractor(reader: ArchiveReader(path: archivePath))
        defer { extractor.close() }
        let row = try #require(extractor.reader.manifest.chunks.max { $0.storedLength < $1.storedLength })
        return (Int(row.offset), Int(row.storedLength))
    }

    @Test("one flipped byte in a chunk payload fails verification with checksumMismatch at the record, and extraction writes nothing",
          arguments: [CompressionMethod.none, .lz4])
    func flippedChunkByte(codec: CompressionMethod) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var configuration = Archiver.Configuration()
        configuration.compression = codec
        let archivePath = try await Self.makeArchive(Self.sampleTree(seed: 30), in: directory, configuration: configuration)
        let chunk = try Self.largestChunk(archivePath)
        let chunkOffset = UInt64(chunk.offset)
        var bytes = try RawFileSystem.contents(ofFile: Array(archivePath.utf8))
        bytes[chunk.offset + 8 + 40 + chunk.storedLength / 2] ^= 0x01
        try RawFileSystem.writeFile(Array(archivePath.utf8), bytes)

        let verifyError = await #expect(throws: CairnError.self) { try await Extractor.verifyArchive(at: .file(path: archivePath)) }
        // The record's CRC-32 is checked before the chunk is decoded (§3.2).
        #expect(verifyError?.code == .checksumMismatch, "\(String(describing: verifyError))")
        #expect(verifyError?.offset == chunkOffset)

        let before = try TreeSnapshot(at: directory.path)
        let extractor = try await Extractor(at: .file(path: archivePath))
        defer { extractor.close() }
        let verifyInPlace = await #expect(throws: CairnError.self) { try await extractor.verify() }
        #expect(verifyInPlace?.code == .checksumMismatch)
        let error = await #expect(throws: CairnError.self) {
            try await extractor.extractAll(to: directory.url(appending: "output"))
        }
        #expect(error?.code == .checksumMismatch, "\(String(describing: error))")
        #expect(error?.offset == chunkOffset)
        // The staging directory was created and removed beside the destination, which moves
        // the parent's mtime; nothing else in it may differ.
        var after = try TreeSnapshot(at: directory.path)
        var unchanged = before
        unchanged.nodes[[]]?.modificationTime = nil
        after.nodes[[]]?.modificationTime = nil
        #expect(unchanged == after, "\(unchanged.diff(after))")
    }

    @Test("a flipped chunk byte behind a recomputed CRC fails the chunk's SHA-256 check")
    func flippedChunkByteWithValidCRC() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var configuration = Archiver.Configuration()
        configuration.compression = .none
        let archivePath = try await Self.makeArchive(Self.sampleTree(seed: 31), in: directory, configuration: configuration)
        let chunkOffset = try Self.largestChunk(archivePath).offset
        var bytes = try RawFileSystem.contents(ofFile: Array(archivePath.utf8))
        let length = Int(bytes[chunkOffset + 4]) | Int(bytes[chunkOffset + 5]) << 8 | Int(bytes[chunkOffset + 6]) << 16
            | Int(bytes[chunkOffset + 7]) << 24
        var record = Array(bytes[chunkOffset..<(chunkOffset + 8 + length)])
        record[8 + 40 + 7] ^= 0x80
        var reframed: [UInt8] = []
        RecordCodec.append(.chunk, payload: Array(record[8...]), to: &reframed)
        bytes.replaceSubrange(chunkOffset..<(chunkOffset + 12 + length), with: reframed)
        try RawFileSystem.writeFile(Array(archivePath.utf8), bytes)

        let verifyError = await #expect(throws: CairnError.self) { try await Extractor.verifyArchive(at: .file(path: archivePath)) }
        #expect(verifyError?.code == .checksumMismatch, "\(String(describing: verifyError))")
        #expect(verifyError?.offset == UInt64(chunkOffset))
        let extractor = try await Extractor(at: .file(path: archivePath))
        defer { extractor.close() }
        let error = await #expect(throws: CairnError.self) {
            try await extractor.extractAll(to: directory.url(appending: "output"))
        }
        #expect(error?.code == .checksumMismatch)
        #expect(!RawFileSystem.exists(Array(directory.appending("output").utf8)))
        #expect(try RawFileSystem.names(atPath: Array(directory.path.utf8)) == [Array("archive.cairn".utf8), Array("source".utf8)])
    }

    @Test("an archive cut in the middle fails to open with truncated")
    func truncatedArchive() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let archivePath = try await Self.makeArchive(Self.sampleTree(seed: 32), in: directory)
        let bytes = try RawFileSystem.contents(ofFile: Array(archivePath.utf8))
        try RawFileSystem.writeFile(Array(archivePath.utf8), Array(bytes.prefix(bytes.count / 2)))
        let error = #expect(throws: CairnError.self) { _ = try Extractor(reader: ArchiveReader(path: archivePath)) }
        #expect(error?.code == .truncated, "\(String(describing: error))")
        let verifyError = await #expect(throws: CairnError.self) { try await Extractor.verifyArchive(at: .file(path: archivePath)) }
        #expect(verifyError?.code == .truncated, "\(String(describing: verifyError))")
    }

    @Test("extracting into a directory that already holds a top-level name throws alreadyExists and changes nothing")
    func existingTopLevelName() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let archivePath = try await Self.makeArchive(Self.sampleTree(seed: 33), in: directory)
        var existing = TreeBuilder()
        existing.file("tree/mine.txt", Array("mine".utf8))
        existing.file("unrelated.txt", Array("unrelated".utf8))
        let destination = directory.appending("destination")
        try existing.materialize(at: destination)
        let before = try TreeSnapshot(at: destination)
        let beside = try RawFileSystem.names(atPath: Array(directory.path.utf8))

        let extractor = try await Extractor(at: .file(path: archivePath))
        defer { extractor.close() }
        let error = await #expect(throws: CairnError.self) {
            try await extractor.extractAll(to: URL(fileURLWithPath: destination))
        }
        #expect(error?.code == .alreadyExists, "\(String(describing: error))")
        #expect(error?.path?.hasSuffix("destination/tree") == true, "\(String(describing: error))")

        // The staging directory lived inside the destination, so the destination's own mtime
        // moved; everything in it, and beside it, is as it was.
        var after = try TreeSnapshot(at: destination)
        var unchanged = before
        unchanged.nodes[[]]?.modificationTime = nil
        after.nodes[[]]?.modificationTime = nil
        #expect(unchanged == after, "\(unchanged.diff(after))")
        #expect(try RawFileSystem.names(atPath: Array(directory.path.utf8)) == beside)
    }

    @Test("extracting into an existing empty directory works")
    func existingEmptyDirectory() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let archivePath = try await Self.makeArchive(Self.sampleTree(seed: 34), in: directory)
        let destination = directory.appending("destination")
        try FileManager.default.createDirectory(atPath: destination, withIntermediateDirectories: false)
        let extractor = try await Extractor(at: .file(path: archivePath))
        defer { extractor.close() }
        try await extractor.extractAll(to: URL(fileURLWithPath: destination))
        #expect(try RawFileSystem.names(atPath: Array(destination.utf8)) == [Array("tree".utf8)])
        let source = try TreeSnapshot(at: directory.appending("source/tree"))
        let extracted = try TreeSnapshot(at: destination + "/tree")
        #expect(source == extracted, "\(source.diff(extracted))")
    }

    @Test("extractItem extracts one file, or one directory subtree, and nothing else")
    func extractItem() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let archivePath = try await Self.makeArchive(Self.sampleTree(seed: 35), in: directory)
        let source = try TreeSnapshot(at: directory.appending("source/tree"))
        let extractor = try await Extractor(at: .file(path: archivePath))
        defer { extractor.close() }

        try await extractor.extractItem(atPathInArchive: "tree/docs/a.txt", to: directory.url(appending: "one"))
        let one = try TreeSnapshot(at: directory.appending("one/tree"))
        #expect(one.paths == [[], Array("docs".utf8), Array("docs/a.txt".utf8)])
        #expect(one.nodes[Array("docs/a.txt".utf8)] == source.nodes[Array("docs/a.txt".utf8)])

        try await extractor.extractItem(atPathInArchive: "tree/docs", to: directory.url(appending: "subtree"))
        let subtree = try TreeSnapshot(at: directory.appending("subtree/tree/docs"))
        let expected = source.nodes.filter { $0.key.starts(with: Array("docs".utf8)) }
        #expect(subtree.nodes.count == expected.count)
        for (path, node) in expected {
            let relative = path == Array("docs".utf8) ? [] : Array(path.dropFirst(5))
            #expect(subtree.nodes[relative] == node, "\(RawFileSystem.display(path))")
        }
        #expect(try RawFileSystem.names(atPath: Array(directory.appending("subtree/tree").utf8)) == [Array("docs".utf8)])

        let error = await #expect(throws: CairnError.self) {
            try await extractor.extractItem(atPathInArchive: "tree/missing", to: directory.url(appending: "missing"))
        }
        #expect(error?.code == .notFound)
        #expect(!RawFileSystem.exists(Array(directory.appending("missing").utf8)))
    }

    @Test("maximumOutputBytes below the content refuses with limitExceeded before writing")
    func maximumOutputBytes() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let tree = Self.sampleTree(seed: 36)
        let archivePath = try await Self.makeArchive(tree, in: directory)
        let before = try RawFileSystem.names(atPath: Array(directory.path.utf8))
        let extractor = try await Extractor(at: .file(path: archivePath))
        defer { extractor.close() }
        var options = ExtractionOptions()
        options.maximumOutputBytes = tree.fileBytes - 1
        let error = await #expect(throws: CairnError.self) {
            try await extractor.extractAll(to: directory.url(appending: "output"), options: options)
        }
        #expect(error?.code == .limitExceeded)
        #expect(try RawFileSystem.names(atPath: Array(directory.path.utf8)) == before)
        // Exactly the content fits.
        options.maximumOutputBytes = tree.fileBytes
        try await extractor.extractAll(to: directory.url(appending: "output"), options: options)
    }

    /// A tiny archive declaring `count` × `chunkLength` bytes of output in one file. A decoy
    /// comes first: a small file whose chunk is damaged, so if the size checks ever let the
    /// archive through, extraction stops on the decoy before writing anything big.
    static func bombArchive(chunkLength: Int, count: Int) throws -> [UInt8] {
        let crafter = try Crafter()
        try crafter.file("0-decoy", Array("decoy content".utf8))
        try crafter.repeatedChunkFile("1-bomb", chunk: [UInt8](repeating: 0, count: chunkLength), count: count)
        var bytes = try crafter.finish()
        let decoy = Int(crafter.writer.manifest.chunks[0].offset)
        bytes[decoy + 8 + 40] ^= 0xFF
        return bytes
    }

    @Test("a tiny deduplicated archive declaring 6.5 GB is refused by maximumOutputBytes without writing")
    func decompressionBombByLimit() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let archivePath = directory.appending("bomb.cairn")
        try RawFileSystem.writeFile(Array(archivePath.utf8), try Self.bombArchive(chunkLength: 65536, count: 100_000))
        let extractor = try await Extractor(at: .file(path: archivePath))
        defer { extractor.close() }
        #expect(extractor.summary.archiveBytes < 8_000_000)
        #expect(extractor.summary.contentBytes > 6_500_000_000)
        var options = ExtractionOptions()
        options.maximumOutputBytes = 1 << 30
        let before = try RawFileSystem.names(atPath: Array(directory.path.utf8))
        let error = await #expect(throws: CairnError.self) {
            try await extractor.extractAll(to: directory.url(appending: "output"), options: options)
        }
        #expect(error?.code == .limitExceeded, "\(String(describing: error))")
        #expect(try RawFileSystem.names(atPath: Array(directory.path.utf8)) == before)
    }

    @Test("an archive declaring more output than the free space is refused before writing")
    func decompressionBombByFreeSpace() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var info = statvfs()
        #expect(statvfs(directory.path, &info) == 0)
        let free = UInt64(info.f_bavail) * UInt64(info.f_frsize)
        let chunkLength = 8 * 1024 * 1024
        let count = Int(free / UInt64(chunkLength)) + 16
        try #require(count < 1_000_000, "free space too large for a small test archive")
        let archivePath = directory.appending("bomb.cairn")
        try RawFileSystem.writeFile(Array(archivePath.utf8), try Self.bombArchive(chunkLength: chunkLength, count: count))
        let extractor = try await Extractor(at: .file(path: archivePath))
        defer { extractor.close() }
        var options = ExtractionOptions()
        options.maximumOutputBytes = .max
        let before = try RawFileSystem.names(atPath: Array(directory.path.utf8))
        let error = await #expect(throws: CairnError.self) {
            try await extractor.extractAll(to: directory.url(appending: "output"), options: options)
        }
        #expect(error?.code == .limitExceeded, "\(String(describing: error))")
        #expect(error?.message.contains("free") == true, "\(String(describing: error))")
        #expect(try RawFileSystem.names(atPath: Array(directory.path.utf8)) == before)
    }
}
