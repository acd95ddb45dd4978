import Foundation
import Testing

import Cairn

/// Replays the fuzz seed corpus and every kept crasher through every fuzz target with the
/// plain build of `cairn-fuzz` (Tests/Fuzz/README.md), so a fixed crash stays fixed: the 1.x
/// seeds (`v1-*`, the 1.x reader's coverage) and the 2.0 seeds (`v2-*`, written by the 2.0
/// `cairn`, and the 2.0 golden archive).
@Suite("Fuzz corpus replay")
struct FuzzCorpusTests {
    static var fuzzBinary: URL {
        Bundle.module.bundleURL.deletingLastPathComponent().appendingPathComponent("cairn-fuzz")
    }

    static var fuzzDirectory: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fuzz")
    }

    static func files(in directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
    }

    @Test("Every seed and every kept crasher passes each target", arguments: ["records", "manifest", "extract", "entries", "keys", "age", "sealed"])
    func replay(target: String) throws {
        let binary = Self.fuzzBinary
        try #require(FileManager.default.isExecutableFile(atPath: binary.path), "cairn-fuzz not built at \(binary.path)")
        let corpus = Self.fuzzDirectory.appendingPathComponent("Corpus").path
        let crashers = Self.fuzzDirectory.appendingPathComponent("Crashers").path
        let seeds = try Self.files(in: corpus)
        let kept = try Self.files(in: crashers)
        #expect(seeds.filter { $0.hasPrefix("v1-") }.count >= 8, "the 1.x seeds are missing: \(seeds)")
        #expect(seeds.filter { $0.hasPrefix("v2-") }.count >= 10, "the 2.0 seeds are missing: \(seeds)")
        let process = Process()
        process.executableURL = binary
        process.arguments = [corpus, crashers]
        var environment = ProcessInfo.processInfo.environment
        environment["CAIRN_FUZZ_TARGET"] = target
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(text)")
        // Every file of both directories went through the target (none skipped).
        #expect(text.contains("\(target): replayed \(seeds.count + kept.count) inputs"), "\(text)")
    }

    @Test("the seed corpus holds every kind of 2.0 seed Tests/Fuzz/README.md lists")
    func seedsOfVersion2() throws {
        let corpus = Self.fuzzDirectory.appendingPathComponent("Corpus")
        let seeds = Set(try Self.files(in: corpus.path))
        for name in [
            "v2-none.cairn", "v2-lz4.cairn", "v2-zstd.cairn", "v2-zlib.cairn", "v2-fixed-zstd.cairn", "v2-not-compressible.cairn",
            "v2-special.cairn", "v2-cut-mid-pack.cairn", "v2-incomplete.cairn.partial", "v2-golden.cairn", "v2.1-golden.cairn", "v1-golden.cairn",
            "entries-entry-record.bin", "entries-pack-payload.bin", "entries-pack-table.bin", "entries-manifest-segment.bin",
            "entries-manifest-body.bin",
        ] {
            #expect(seeds.contains(name), "\(name)")
        }
        // Every 2.0 seed starts with the 2.0 prelude; the 1.x ones with 1.x.
        for name in seeds where name.hasPrefix("v1-") || name.hasPrefix("v2-") {
            let bytes = Array(try Data(contentsOf: corpus.appendingPathComponent(name)).prefix(12))
            #expect(bytes.count == 12 && bytes[8] == (name.hasPrefix("v2-") ? 2 : 1), "\(name)")
        }
        // The golden seeds are the test fixtures themselves, so a regenerated fixture is seen.
        let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")
        #expect(
            try Data(contentsOf: corpus.appendingPathComponent("v2-golden.cairn"))
                == Data(contentsOf: fixtures.appendingPathComponent("golden-v2.cairn")), "copy Fixtures/golden-v2.cairn to Corpus/v2-golden.cairn")
        #expect(
            try Data(contentsOf: corpus.appendingPathComponent("v2.1-golden.cairn"))
                == Data(contentsOf: fixtures.appendingPathComponent("golden-v2.1.cairn")),
            "copy Fixtures/golden-v2.1.cairn to Corpus/v2.1-golden.cairn")
        #expect(
            try Data(contentsOf: corpus.appendingPathComponent("v1-golden.cairn"))
                == Data(contentsOf: fixtures.appendingPathComponent("golden-v1.cairn")))
    }

    @Test("a packed file over 8 MiB is corrupted, not a trap: sizes of 2^63 and two of 2^62 (Crashers/*-pack-*)")
    func packedFileSizeLimit() async throws {
        let crashers = Self.fuzzDirectory.appendingPathComponent("Crashers")
        let payload = Array(try Data(contentsOf: crashers.appendingPathComponent("entries-pack-file-size-over-int.bin")))
        let error = #expect(throws: CairnError.self) {
            _ = try PackContent.read(payload: payload, offset: 0, chunkCount: 0, contentIDs: .sha256, using: ChunkDecompressor())
        }
        #expect(error?.code == .corrupted)
        #expect(error?.message.contains("declares 9223372036854775808 bytes") == true, "\(String(describing: error))")
        for name in ["records-pack-file-size-over-int.cairn", "records-pack-inline-sizes-overflow.cairn"] {
            let path = crashers.appendingPathComponent(name).path
            let failure = await #expect(throws: CairnError.self) { _ = try await Extractor.verifyArchive(at: .file(path: path)) }
            #expect(failure?.code == .corrupted, "\(name): \(String(describing: failure))")
        }
        // The largest packed file the format allows (8 MiB, one chunk: a section or a chunk at
        // most) still decodes; one byte more does not.
        for (size, decodes) in [(UInt64(8 << 20), true), (UInt64(8 << 20) + 1, false)] {
            let entry = ArchiveEntry(pathBytes: Array("big".utf8), kind: .file, permissions: 0o644, modificationTime: 0, size: size)
            let table = PackItemTable.encode([PackItem(entry: entry, content: .chunk(0))])
            let items = try? PackItemTable.decode(table, packOffset: 0, chunkCount: 1)
            #expect((items?.first?.entry.size == size) == decodes, "\(size)")
        }
    }
}
