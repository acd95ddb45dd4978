import Cairn
import CairnMigration
import CairnMigrationTesting
import CairnTestSupport
import Foundation
import Testing

@testable import cairn_migration_sample

/// Every hop: archives written once by versions "1", "2" and "3" of the sample exporter
/// (`Fixtures/make-golden.sh`) import with the current importer.
@Suite("Migration version hops")
struct MigrationVersionHopTests {
    @Test("a golden archive of an older exporter imports with the current importer", arguments: ["1", "2", "3"])
    func goldenArchive(version: String) async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let golden = try #require(Bundle.module.url(forResource: "notes-v\(version)", withExtension: "cairn", subdirectory: "Fixtures"))
        let destination = try scratch.populatedDestination()
        let session = MigrationImportSession(importer: NotesImporter(container: destination), container: destination)
        session.acceptRequest = NotesImporter.accept
        let request = try await session.importResources(fromArchiveAt: golden)
        #expect(request.sourceVersion == version)
        #expect(request.sourceAppIdentifier == NotesApp.identifier)

        // The same data the fixtures were made from: 3 notes, seed 1.
        let expected = scratch.container("expected")
        try NotesApp.seed(expected)
        let names = try FileManager.default.contentsOfDirectory(atPath: destination.documentsDirectory.path).sorted()
        #expect(names == ["note-0.txt", "note-1.txt", "note-2.txt"])
        for name in names {
            let imported = try Data(contentsOf: destination.documentsDirectory.appending(path: name))
            #expect(imported == (try Data(contentsOf: expected.documentsDirectory.appending(path: name))), "\(name)")
        }
        let settings = try NotesApp.readSettings(destination.applicationSupportDirectory.appending(path: "settings.json"))
        #expect(settings == ["theme": "dark", "sort": "modified"])
        #expect(MigrationStatus.importStatus(in: destination)?.isSuccess == true)
    }

    @Test("an archive given by an https URL is read over HTTP, not taken for a local path; an export refuses such a URL")
    func importByURL() async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let golden = try #require(Bundle.module.url(forResource: "notes-v3", withExtension: "cairn", subdirectory: "Fixtures"))
        let www = try scratch.work("www")
        try FileManager.default.copyItem(at: golden, to: www.appending(path: "notes.cairn"))
        let nginx = try NginxServer(root: www.path)
        defer { nginx.stop() }
        let destination = try scratch.populatedDestination()
        let session = MigrationImportSession(importer: NotesImporter(container: destination), container: destination)
        session.acceptRequest = NotesImporter.accept
        let url = try #require(URL(string: nginx.url("/notes.cairn")))
        let request = try await session.importResources(fromArchiveAt: url)
        #expect(request.sourceVersion == "3")
        #expect(nginx.accessLog().contains { $0.path == "/notes.cairn" }, "the archive was read over HTTP")
        #expect(MigrationStatus.importStatus(in: destination)?.isSuccess == true)

        let source = try scratch.source(count: 1, seed: 1)
        let export = MigrationExportSession(exporter: NotesExporter(container: source), appIdentifier: NotesApp.identifier)
        let refused = await #expect(throws: CairnError.self) { _ = try await export.exportResources(to: url) }
        #expect(refused?.code == .invalidArgument && refused?.path == url.absoluteString, "\(String(describing: refused))")
    }

    @Test("each version the current exporter can write round-trips through the tester", arguments: ["1", "2", "3"])
    func exportEveryVersion(version: String) async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let source = try scratch.source(count: 3, seed: 1)
        let destination = scratch.container("destination")
        let tester = notesTester(source: source, destination: destination, work: try scratch.work(), version: version)
        let exported = try await tester.exportController.exportResources()
        #expect(exported.exportProperties.version == version)
        try await tester.importController.importResources(from: exported.archiveURL)
        let imported = try TreeSnapshot(at: destination.documentsDirectory.path, directoryTimes: false)
        #expect(imported == (try TreeSnapshot(at: source.documentsDirectory.path, directoryTimes: false)))
    }
}
