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
        let export = ArchiveLocation.file(path: scratch.appending("export.cairn"))
        let other = ArchiveLocation.file(path: scratch.appending("other.cairn"))
        let copy = scratch.url(appending: "copy.cairn")
        let restored = scratch.url.appendingPathComponent("restored")

        // From here on: the README example (run on the main actor, as top-level code would be).
        var configuration = Archiver.Configuration()
        configuration.sizeEstimate = try Archiver.sizeEstimate(of: [source])
        #expect(configuration.sizeEstimate == 300_006)
        let properties = try await Archiver.withArchiver(writingTo: export, configuration: configuration) { archiver in
            try await archiver.appendItem(at: source)  // stored as data/...
        }
        #expect(properties.uncompressedBytes == 300_006)

        let archiver = try await Archiver(writingTo: other)
        try await archiver.appendItem(at: source, pathInArchive: "export/data")
        _ = try await archiver.finish()

        let extractor = try await Extractor(at: export)
        defer { extractor.close() }
        #expect(extractor.entries.map(\.path) == ["data", "data/Notes", "data/Notes/a.bin", "data/readme.txt"])
        try await extractor.extractAll(to: restored)

        let report = try await Extractor.verifyArchive(at: export)
        #expect(report.contentBytes == 300_006)

        try await ArchiveTransfer.send(archiveAt: export, to: FileSink(writingTo: .file(path: copy.path)))
        #expect(try Data(contentsOf: copy) == (try Data(contentsOf: URL(filePath: export.description))))
        // End of the README example.

        let restoredCopy = try Data(contentsOf: restored.appendingPathComponent("data/Notes/a.bin"))
        #expect(restoredCopy == (try Data(contentsOf: source.appendingPathComponent("Notes/a.bin"))))
        let otherExtractor = try await Extractor(at: other)
        defer { otherExtractor.close() }
        #expect(otherExtractor.entries.first?.path == "export/data")
    }
}

/// The README's object-storage snippet, compiled (it needs a store to run; the object-storage
/// suites run the same calls against rclone): an API change that breaks the README breaks this.
func readmeObjectStoreSnippet(source: URL, configuration: Archiver.Configuration) async throws {
    let store = try S3Configuration.fromEnvironment()
    let object = try S3Location(parsing: "s3://backups/app/export.cairn")
    let state = "/var/lib/app/export.partial.upload"
    let sink = try await ObjectStoreSink.startUpload(to: object, configuration: store, statePath: state)
    _ = { () async throws(CairnError) in try await ObjectStoreSink.resumeUpload(of: object, configuration: store, statePath: state) }
    _ = { () async throws(CairnError) in
        try await ObjectStoreSink.recordedUpload(at: state, location: object, configuration: store)
    }
    let archiver = try Archiver(sink: sink, configuration: configuration)
    try await archiver.appendItem(at: source)
    _ = try await archiver.finish()
    let back = try await Extractor(at: .object(object, configuration: store))
    back.close()
}
