import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import Cairn

/// One meaning for every archive (issue 8; the Design article of the Cairn documentation, "One
/// meaning"; `Spec/0001 §9`, §13): every reading command applies the same rules, because they
/// all go through one checker (``ArchiveScanner``, with ``EntryRules``). Split views (a manifest
/// that disagrees with the records), forged footers inside truncated archives and grammar
/// violations are refused by `list`, `info`, `verify`, `extract ARCHIVE` (all or one entry) and
/// `extract -` alike, and nothing appears at DEST.
@Suite("One meaning")
struct OneMeaningTests {
    typealias Hostile = HostileArchiveTests
    typealias Crafter = ExtractorTests.Crafter

    // MARK: - Crafting

    /// Two files with different contents and modes, a directory, a symlink.
    static func twoFiles() throws -> [UInt8] {
        let crafter = try Crafter()
        try crafter.directory(Array("d".utf8))
        try crafter.file(Array("d/first.txt".utf8), Array("first file's content\n".utf8), mode: 0o644)
        try crafter.file(Array("d/second.txt".utf8), Array("second, different, longer content\n".utf8), mode: 0o600)
        try crafter.symlink(Array("d/link".utf8), target: Array("first.txt".utf8))
        return try crafter.finish()
    }

    /// The manifest of a complete archive, decoded.
    static func manifest(of archive: [UInt8]) throws -> Manifest {
        let footer = Hostile.footerPayload(archive)
        let offset = Int(Hostile.u64(footer, 0))
        let length = Int(Hostile.u64(footer, 8))
        return try Manifest.decode(
            region: Array(archive[offset..<(offset + length)]), offset: UInt64(offset), version: try Prelude.parse(Array(archive[0..<12]))
        ).0
    }

    /// `archive` with its manifest replaced by `edit`ed copy: the footer (manifest length and
    /// digest) and the chain digests are recomputed, so every CRC and digest holds and only the
    /// manifest disagrees with the records.
    static func editingManifest(_ archive: [UInt8], _ edit: (inout Manifest) -> Void) throws -> [UInt8] {
        var manifest = try manifest(of: archive)
        edit(&manifest)
        var footer = Hostile.footerPayload(archive)
        let offset = Int(Hostile.u64(footer, 0))
        var encoded: [UInt8] = []
        manifest.encode(into: &encoded)
        Hostile.put64(UInt64(encoded.count), into: &footer, at: 8)
        footer.replaceSubrange(16..<48, with: try SHA256.hash(encoded).bytes)
        var result = Array(archive[0..<offset]) + encoded
        RecordCodec.append(.footer, payload: footer, to: &result)
        try Hostile.rechain(&result)
        return result
    }

    /// `archive` with the records in `range` replaced by `bytes`: the manifest's offsets after
    /// the range move, and the footer and chain digests are recomputed, so the only fault left is
    /// the one the edit made.
    static func splicing(_ archive: [UInt8], replacing range: Range<Int>, with bytes: [UInt8]) throws -> [UInt8] {
        var manifest = try manifest(of: archive)
        var footer = Hostile.footerPayload(archive)
        let manifestOffset = Int(Hostile.u64(footer, 0))
        let delta = Int64(bytes.count) - Int64(range.count)
        func moved(_ offset: UInt64) -> UInt64 {
            offset >= UInt64(range.upperBound) ? UInt64(Int64(offset) + delta) : offset
        }
        for index in manifest.chunks.indices { manifest.chunks[index].offset = moved(manifest.chunks[index].offset) }
        for index in manifest.entries.indices { manifest.entries[index].recordOffset = moved(manifest.entries[index].recordOffset) }
        var encoded: [UInt8] = []
        manifest.encode(into: &encoded)
        var result = Array(archive[0..<range.lowerBound]) + bytes + Array(archive[range.upperBound..<manifestOffset])
        Hostile.put64(UInt64(result.count), into: &footer, at: 0)
        Hostile.put64(UInt64(encoded.count), into: &footer, at: 8)
        footer.replaceSubrange(16..<48, with: try SHA256.hash(encoded).bytes)
        result += encoded
        RecordCodec.append(.footer, payload: footer, to: &result)
        try Hostile.rechain(&result)
        return result
    }

    /// A truncated archive whose last chunk ends with a forged manifest and footer: the manifest
    /// lists `forged.txt` (the first file's content under another name) and is internally
    /// consistent, so a reader that trusts the end of the file lists and extracts it.
    static func forgedFooterInTruncatedArchive() throws -> [UInt8] {
        let content = Array("real content of a real file\n".utf8)
        // The honest archive the forgery imitates: the same first file, complete.
        let honest = try Crafter()
        try honest.file(Array("real.txt".utf8), content)
        let honestArchive = try honest.finish()
        var forgedManifest = try manifest(of: honestArchive)
        forgedManifest.entries[0].entry.pathBytes = Array("forged.txt".utf8)
        var forgedManifestBytes: [UInt8] = []
        forgedManifest.encode(into: &forgedManifestBytes)

        // The real archive: the same file, then a file whose (raw) chunk holds the forgery.
        let writer = try ArchiveWriter(header: ArchiveHeader())
        try writer.beginEntry(ArchiveEntry(pathBytes: Array("real.txt".utf8), kind: .file, permissions: 0o644, modificationTime: 1_000, size: UInt64(content.count)))
        try content.withUnsafeBytes { raw in
            try writer.appendChunk(id: try SHA256.hash(content), rawLength: content.count, codec: .none, stored: raw)
        }
        try writer.endFile()
        let payloadLength = forgedManifestBytes.count + Footer.framedLength
        try writer.beginEntry(
            ArchiveEntry(pathBytes: Array("carrier.bin".utf8), kind: .file, permissions: 0o644, modificationTime: 1_000, size: UInt64(payloadLength)))
        // The carrier's chunk payload starts after its record header and 40-byte prefix.
        let forgedManifestOffset = writer.offset + UInt64(RecordFraming.headerLength + ChunkRecordPrefix.length)
        var footer = Hostile.footerPayload(honestArchive)
        Hostile.put64(forgedManifestOffset, into: &footer, at: 0)
        Hostile.put64(UInt64(forgedManifestBytes.count), into: &footer, at: 8)
        footer.replaceSubrange(16..<48, with: try SHA256.hash(forgedManifestBytes).bytes)
        var payload = forgedManifestBytes
        RecordCodec.append(.footer, payload: footer, to: &payload)
        try payload.withUnsafeBytes { raw in
            try writer.appendChunk(id: try SHA256.hash(payload), rawLength: payload.count, codec: .none, stored: raw)
        }
        let whole = writer.takeOutput()
        // Cut right after the forged footer, inside the carrier's chunk record (before its CRC).
        return Array(whole[0..<(Int(forgedManifestOffset) + payload.count)])
    }

    /// Cases that every reading command must refuse.
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var make: @Sendable () throws -> [UInt8]
        var testDescription: String { name }
    }

    static let splitViews: [Case] = [
        Case(name: "manifest rows of two files swap their content") {
            try editingManifest(try twoFiles()) { manifest in
                let (a, b) = (1, 2)
                let first = manifest.entries[a]
                let second = manifest.entries[b]
                manifest.entries[a].firstReference = second.firstReference
                manifest.entries[a].referenceCount = second.referenceCount
                manifest.entries[a].contentDigest = second.contentDigest
                manifest.entries[a].entry.size = second.entry.size
                manifest.entries[a].entry.contentDigest = second.contentDigest
                manifest.entries[b].firstReference = first.firstReference
                manifest.entries[b].referenceCount = first.referenceCount
                manifest.entries[b].contentDigest = first.contentDigest
                manifest.entries[b].entry.size = first.entry.size
                manifest.entries[b].entry.contentDigest = first.contentDigest
            }
        },
        Case(name: "manifest names a file differently from its entry record") {
            try editingManifest(try twoFiles()) { $0.entries[1].entry.pathBytes = Array("d/renamed.txt".utf8) }
        },
        Case(name: "manifest gives a file another mode than its entry record") {
            try editingManifest(try twoFiles()) { $0.entries[2].entry.permissions = 0o4777 }
        },
        Case(name: "forged manifest and footer at the end of a truncated archive") { try forgedFooterInTruncatedArchive() },
    ]

    /// Grammar violations (`Spec/0001 §9`), each with everything else made consistent.
    static let grammarViolations: [Case] = [
        Case(name: "no commit 0 after the header") {
            let archive = try twoFiles()
            let commit0 = try #require(Hostile.records(archive).first { $0.type == RecordType.commit.rawValue })
            return try splicing(archive, replacing: commit0.offset..<commit0.end, with: [])
        },
        Case(name: "no commit after a directory entry") {
            let archive = try twoFiles()
            let records = Hostile.records(archive)
            let entry = try #require(records.firstIndex { $0.type == RecordType.entry.rawValue })
            let commit = records[entry + 1]
            return try splicing(archive, replacing: commit.offset..<commit.end, with: [])
        },
        Case(name: "no commit after a file end") {
            let archive = try twoFiles()
            let records = Hostile.records(archive)
            let end = try #require(records.firstIndex { $0.type == RecordType.fileEnd.rawValue })
            let commit = records[end + 1]
            return try splicing(archive, replacing: commit.offset..<commit.end, with: [])
        },
        Case(name: "a commit inside a file right after a chunk record") {
            let archive = try twoFiles()
            let records = Hostile.records(archive)
            let chunk = try #require(records.first { $0.type == RecordType.chunk.rawValue })
            let commit = try #require(records.first { $0.type == RecordType.commit.rawValue })
            return try splicing(archive, replacing: chunk.end..<chunk.end, with: Array(archive[commit.offset..<commit.end]))
        },
        Case(name: "two commits in a row") {
            let archive = try twoFiles()
            let commit = try #require(Hostile.records(archive).first { $0.type == RecordType.commit.rawValue })
            return try splicing(archive, replacing: commit.end..<commit.end, with: Array(archive[commit.offset..<commit.end]))
        },
        Case(name: "a later symlink turns a directory that earlier entries implied into a link") {
            let crafter = try Crafter()
            try crafter.file(Array("a/b.txt".utf8), Array("below an implied directory".utf8))
            try crafter.symlink(Array("a".utf8), target: Array("/tmp".utf8))
            return try crafter.finish()
        },
    ]

    static var cairn: URL {
        get throws { try ChildProcess.cairnExecutable(besideBundle: Bundle.module.bundleURL) }
    }

    /// Runs every reading command on `bytes` as a process; each must exit 1, and DEST must not
    /// appear, nor any staging directory.
    static func expectEveryCommandRefuses(_ bytes: [UInt8], _ name: String) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let archive = try Hostile.write(bytes, "hostile.cairn", in: directory)
        let commands: [(arguments: [String], stdin: String?)] = [
            (["list", archive], nil),
            (["info", archive], nil),
            (["verify", archive], nil),
            (["verify", "-"], archive),
            (["extract", archive, "-C", directory.appending("all")], nil),
            (["extract", archive, "-C", directory.appending("one"), "d"], nil),
            (["extract", "-", "-C", directory.appending("stream")], archive),
        ]
        for command in commands {
            let result = try ChildProcess.run(try cairn, command.arguments, standardInput: command.stdin)
            if command.arguments.first == "info", result.status == 0 {
                // `info` on an incomplete archive reports what its commits vouch for (Spec/0003
                // §6), which is never what a forged end says.
                #expect(result.stdout.contains("complete:          no") && !result.stdout.contains("forged"), "\(name): \(result.stdout)")
                continue
            }
            #expect(result.status == 1, "\(name): cairn \(command.arguments.joined(separator: " ")) exited \(result.status): \(result.stderr)")
            #expect(result.stderr.contains("error"), "\(name): \(result.stderr)")
            // An error at an offset names the entry or the archive, standard input included.
            #expect(!result.stderr.contains("error: at offset"), "\(name): \(result.stderr)")
            // A stream that ends early keeps what verified for --resume and says so (Spec/0003
            // §4.1); that is beside DEST, never at it.
            if command.stdin != nil, command.arguments.first == "extract", result.stderr.contains("--resume") {
                RawFileSystem.removeTree(Array(directory.appending(".stream.cairn-staging").utf8))
            }
        }
        // Nothing but the archive: no DEST, no staging directory.
        let names = try RawFileSystem.names(atPath: Array(directory.path.utf8)).map { String(decoding: $0, as: UTF8.self) }
        #expect(names == ["hostile.cairn"], "\(name): \(names)")
    }

    @Test("split views are refused by every reading command, with nothing at DEST", arguments: splitViews)
    func splitViewRefused(_ hostile: Case) throws {
        try Self.expectEveryCommandRefuses(try hostile.make(), hostile.name)
    }

    @Test("grammar violations (Spec/0001 §9) and implied-directory replacement are refused by every reading command",
          arguments: grammarViolations)
    func grammarViolationRefused(_ hostile: Case) throws {
        try Self.expectEveryCommandRefuses(try hostile.make(), hostile.name)
    }

    @Test("the honest twin of each crafted case is accepted, so the refusals above are about the fault")
    func honestTwinsAccepted() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        // Rewriting the manifest unchanged and splicing nothing keep the archive valid.
        let unchanged = try Self.editingManifest(try Self.twoFiles()) { _ in }
        let spliced = try Self.splicing(try Self.twoFiles(), replacing: 100..<100, with: [])
        for (index, bytes) in [unchanged, spliced].enumerated() {
            let path = try Hostile.write(bytes, "honest-\(index).cairn", in: directory)
            _ = try await Extractor.verifyArchive(at: .file(path: path))
            let extractor = try await Extractor(at: .file(path: path))
            try await extractor.extractAll(to: directory.url(appending: "out-\(index)"))
            extractor.close()
            #expect(RawFileSystem.exists(Array(directory.appending("out-\(index)/d/second.txt").utf8)))
        }
    }

    @Test("a forged footer inside a truncated archive is reported as incomplete, after falling back to scanning")
    func forgedFooterSaysIncomplete() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = try Hostile.write(try Self.forgedFooterInTruncatedArchive(), "forged.cairn", in: directory)
        let error = #expect(throws: CairnError.self) { _ = try Extractor(reader: ArchiveReader(path: path)) }
        #expect(error?.code == .truncated, "\(String(describing: error))")
        #expect(error?.message.contains("looks like a footer") == true, "\(String(describing: error))")
        #expect(error?.message.contains("verify --partial") == true, "\(String(describing: error))")
        // Without the structural walk (as over a network), the rows are still checked by the
        // entry rules, but the forgery itself is what only the walk can see.
        let unchecked = try ArchiveReader(path: path, verifyingStructure: false)
        #expect(unchecked.manifest.entries.map(\.entry.path) == ["forged.txt"])
        unchecked.close()
    }

    @Test("flipping any one byte of a small archive: extract refuses exactly when verify does, and leaves nothing")
    func everyByteFlipped() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let original = try HostileArchiveTests.smallArchive()
        var refused = 0
        for position in 0..<original.count {
            var bytes = original
            bytes[position] ^= 0x5A
            let path = try Hostile.write(bytes, "flipped.cairn", in: directory)
            let verifyFailed = await Hostile.verifyError(path) != nil
            let destination = directory.appending("out")
            let extractFailed = await Hostile.openAndExtract(path, in: directory) != nil
            let streamDestination = directory.url(appending: "stream")
            let input = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
            var streamError: CairnError?
            do {
                _ = try await Extractor.extractStream(from: input, to: streamDestination)
            } catch let error as CairnError {
                streamError = error
            }
            try input.close()
            let streamFailed = streamError != nil
            #expect(extractFailed == verifyFailed, "byte \(position): verify \(verifyFailed), extract \(extractFailed)")
            #expect(streamFailed == verifyFailed, "byte \(position): verify \(verifyFailed), extract - \(streamFailed)")
            if verifyFailed {
                refused += 1
                #expect(!RawFileSystem.exists(Array(destination.utf8)), "byte \(position)")
                #expect(!RawFileSystem.exists(Array(streamDestination.path.utf8)), "byte \(position)")
            }
            RawFileSystem.removeTree(Array(destination.utf8))
            RawFileSystem.removeTree(Array(streamDestination.path.utf8))
            // A stream that looks cut (a flipped length runs past its end) keeps what verified,
            // for --resume, by design (Spec/0003 §4.1); nothing else is ever left.
            if streamError?.code == .truncated { RawFileSystem.removeTree(Array(directory.appending(".stream.cairn-staging").utf8)) }
            let names = try RawFileSystem.names(atPath: Array(directory.path.utf8)).map { String(decoding: $0, as: UTF8.self) }
            #expect(names.allSatisfy { !$0.contains("cairn-staging") }, "byte \(position): \(names)")
        }
        // Nearly every byte matters; the few that do not are inside padding a reader ignores.
        #expect(refused > original.count * 9 / 10, "\(refused) of \(original.count) flips refused")
    }

    @Test("verify reports every damaged chunk, each naming the entries that use it")
    func verifyReportsEveryBadChunk() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let crafter = try Crafter()
        var generator = SeededGenerator(seed: 808)
        let shared = generator.bytes(500)
        try crafter.file("one.bin", shared)
        try crafter.file("two.bin", generator.bytes(400))
        try crafter.file("three.bin", shared)  // the same chunk as one.bin
        let pristine = try crafter.finish()
        var bytes = pristine
        // Damage the payload of both stored chunks, keeping every CRC valid.
        let chunks = Hostile.records(bytes).filter { $0.type == RecordType.chunk.rawValue }
        #expect(chunks.count == 2)
        for chunk in chunks {
            bytes[chunk.offset + 12 + 40 + 10] ^= 0xFF
            Hostile.recomputeCRC(&bytes, at: chunk.offset)
        }
        try Hostile.rechain(&bytes)
        let path = try Hostile.write(bytes, "damaged.cairn", in: directory)
        let error = await Hostile.verifyError(path)
        #expect(error?.code == .checksumMismatch, "\(String(describing: error))")
        #expect(error?.offset == UInt64(chunks[0].offset))
        #expect(error?.message.contains("one.bin, three.bin") == true, "\(String(describing: error))")
        #expect(error?.additionalErrors.count == 1)
        #expect(error?.additionalErrors.first?.offset == UInt64(chunks[1].offset))
        #expect(error?.additionalErrors.first?.message.contains("two.bin") == true)
        // Extraction names every user of the chunk too.
        let extract = await Hostile.openAndExtract(path, in: directory)
        #expect(extract?.message.contains("one.bin, three.bin") == true, "\(String(describing: extract))")

        // Real damage: the bytes change and nothing is recomputed, so the CRCs and the chain
        // digests fail too; verify still reports each damaged chunk with its entries, and
        // nothing else.
        var damaged = pristine
        for chunk in chunks { damaged[chunk.offset + 12 + 40 + 10] ^= 0xFF }
        let damagedPath = try Hostile.write(damaged, "really-damaged.cairn", in: directory)
        let real = await Hostile.verifyError(damagedPath)
        #expect(real?.code == .checksumMismatch, "\(String(describing: real))")
        #expect(real?.offset == UInt64(chunks[0].offset))
        #expect(real?.message.contains("one.bin, three.bin") == true, "\(String(describing: real))")
        #expect(real?.additionalErrors.map(\.offset) == [UInt64(chunks[1].offset)], "\(String(describing: real?.additionalErrors))")
    }

    @Test("an incomplete archive's verify message says how many bytes verify and suggests verify --partial")
    func cutArchiveMessage() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let original = try HostileArchiveTests.smallArchive()
        let path = try Hostile.write(Array(original.dropLast(200)), "cut.cairn", in: directory)
        let error = await Hostile.verifyError(path)
        #expect(error?.code == .truncated)
        #expect(error?.message.contains("bytes verify") == true, "\(String(describing: error))")
        #expect(error?.message.contains("verify --partial") == true, "\(String(describing: error))")
    }

    @Test("resuming a write checks the chain digests of the prefix it keeps: a tampered partial resumes from before the tampering")
    func tamperedPartialIsNotTrusted() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let target = directory.appending("out.cairn")
        let crafter = try Crafter(header: ArchiveHeader(compression: .none, isCompressible: false))
        for index in 0..<6 { try crafter.file("f\(index).txt", Array("file \(index) content\n".utf8)) }
        let complete = try crafter.finish()
        let manifestOffset = Int(Hostile.u64(Hostile.footerPayload(complete), 0))
        var partial = Array(complete[0..<manifestOffset])
        // Change a byte of f4's stored chunk and fix only its CRC: the records still parse, but
        // the chain digest of the following commit no longer matches.
        let chunks = Hostile.records(partial).filter { $0.type == RecordType.chunk.rawValue }
        partial[chunks[4].offset + 12 + 40] ^= 0x01
        Hostile.recomputeCRC(&partial, at: chunks[4].offset)
        try RawFileSystem.writeFile(Array((target + ".partial").utf8), partial)
        let recovery = try ArchiveRecovery.scan(try FileDescriptor.open(target + ".partial", flags: O_RDONLY), path: target, keying: nil)
        // The last commit kept is the one after f3, before the tampered chunk.
        #expect(recovery.last.end <= UInt64(chunks[4].offset), "kept \(recovery.last.end), tampered at \(chunks[4].offset)")
        #expect(recovery.last.commit.entryCount == 4)
    }

    @Test("stream extraction with declared sizes of 0 cannot write past the output limit")
    func zeroDeclaredSizesAreCountedAsWritten() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        // Streamed content declares size 0 in its entry record (Spec/0001 §6.4).
        let archive = directory.appending("streamed.cairn")
        let archiver = try await Archiver(writingTo: .file(path: archive))
        var generator = SeededGenerator(seed: 77)
        let content = generator.bytes(300_000)
        for index in 0..<4 {
            try await archiver.append(contentsOf: AsyncStream { continuation in
                continuation.yield(content)
                continuation.finish()
            }, pathInArchive: "s\(index).bin")
        }
        _ = try await archiver.finish()
        var options = ExtractionOptions()
        options.maximumOutputBytes = 700_000
        let input = try FileHandle(forReadingFrom: URL(fileURLWithPath: archive))
        defer { try? input.close() }
        let error = await #expect(throws: CairnError.self) {
            _ = try await Extractor.extractStream(from: input, to: directory.url(appending: "out"), options: options)
        }
        #expect(error?.code == .limitExceeded, "\(String(describing: error))")
        #expect(!RawFileSystem.exists(Array(directory.appending("out").utf8)))
    }

    @Test("strip-components drops leading components in both extraction paths; hard links to dropped files still work",
          arguments: [false, true])
    func stripComponents(stream: Bool) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let crafter = try Crafter()
        try crafter.file("top.txt", Array("dropped but linked".utf8))
        try crafter.directory(Array("pkg".utf8))
        try crafter.file("pkg/a.txt", Array("dropped but linked".utf8))  // its chunk is the dropped file's
        try crafter.hardLink(Array("pkg/link".utf8), target: Array("top.txt".utf8))
        let path = try Hostile.write(try crafter.finish(), "strip.cairn", in: directory)
        var options = ExtractionOptions()
        options.stripComponents = 1
        let out = directory.url(appending: "out")
        if stream {
            let input = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
            defer { try? input.close() }
            _ = try await Extractor.extractStream(from: input, to: out, options: options)
        } else {
            let extractor = try await Extractor(at: .file(path: path))
            defer { extractor.close() }
            try await extractor.extractItem(atPathInArchive: "pkg", to: out, options: options)
        }
        let names = try RawFileSystem.names(atPath: Array(out.path.utf8)).map { String(decoding: $0, as: UTF8.self) }.sorted()
        #expect(names == ["a.txt", "link"])
        #expect(try RawFileSystem.contents(ofFile: Array(out.appendingPathComponent("a.txt").path.utf8)) == Array("dropped but linked".utf8))
        #expect(try RawFileSystem.contents(ofFile: Array(out.appendingPathComponent("link").path.utf8)) == Array("dropped but linked".utf8))
    }
}
