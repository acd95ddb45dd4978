import CairnTestSupport
import Foundation
import Testing

import Cairn

/// The README's library tour, compiled and run, so it cannot rot. Keep the two in step: the
/// body below is the README's `moveAppData()` with its paths replaced by a temporary directory.
@Suite("README")
struct ReadmeExampleTests {
    @Test("The README's library example compiles and round-trips a tree")
    @MainActor
    func readmeLibraryExample() async throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let source = scratch.url.appendingPathComponent("srv/app/data")
        try FileManager.default.createDirectory(at: source.appendingPathComponent("Notes"), withIntermediateDirectories: true)
        var generator = SeededGenerator(seed: 11)
        try Data(generator.bytes(300_000)).write(to: source.appendingPathComponent("Notes/a.bin"))
        try Data("hello\n".utf8).write(to: source.appendingPathComponent("readme.txt"))
        let exportPath = scratch.path + "/export.cairn"
        let otherPath = scratch.path + "/other.cairn"
        let restored = scratch.url.appendingPathComponent("restored")

        // From here on: the README example (run on the main actor, as top-level code would be).
        let properties = try await Archiver.withArchiver(writingTo: exportPath) { archiver in
            try await archiver.appendItem(at: source)  // stored as data/...
        }
        #expect(properties.uncompressedBytes == 300_006)

        let archiver = try Archiver(writingTo: otherPath)
        try await archiver.appendItem(at: source, pathInArchive: "export/data")
        _ = try await archiver.finish()

        let extractor = try Extractor(path: exportPath)
        defer { extractor.close() }
        #expect(extractor.entries.map(\.path) == ["data", "data/Notes", "data/Notes/a.bin", "data/readme.txt"])
        try await extractor.extractAll(to: restored)

        let report = try await Extractor.verifyArchive(atPath: exportPath)
        #expect(report.contentBytes == 300_006)
        // End of the README example.

        let copy = try Data(contentsOf: restored.appendingPathComponent("data/Notes/a.bin"))
        #expect(copy == (try Data(contentsOf: source.appendingPathComponent("Notes/a.bin"))))
        let other = try Extractor(path: otherPath)
        defer { other.close() }
        #expect(other.entries.first?.path == "export/data")
    }
}
