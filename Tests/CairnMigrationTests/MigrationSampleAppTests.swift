import Cairn
import CairnMigration
import CairnMigrationTesting
import CairnTestSupport
import Foundation
import Testing

@testable import cairn_migration_sample

/// The sample app as a process: what the README walks through.
@Suite("Migration sample app")
struct MigrationSampleAppTests {
    @Test("seed, export, import, status and --clear, as the README shows")
    func readmeWalkthrough() throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let sample = sampleExecutable()
        let notes = scratch.url.appending(path: "notes").path
        let archive = scratch.url.appending(path: "notes.cairn").path
        let restored = scratch.url.appending(path: "restored").path
        #expect(try ChildProcess.run(sample, ["seed", notes]).status == 0)
        let export = try ChildProcess.run(sample, ["export", notes, archive, "--version", "2"])
        #expect(export.status == 0, "\(export.stderr)")
        #expect(export.stderr.contains("data version 2"))
        #expect(try ChildProcess.run(sample, ["status", restored]).stdout == "no import\n")
        let imported = try ChildProcess.run(sample, ["import", archive, restored])
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stderr.contains("imported data version 2 from linux/org.example.cairn-notes@flathub"))
        #expect(try ChildProcess.run(sample, ["status", restored, "--clear"]).stdout == "imported\n")
        #expect(try ChildProcess.run(sample, ["status", restored]).stdout == "no import\n")
        let again = try ChildProcess.run(sample, ["import", archive + ".missing", restored])
        #expect(again.status == 1)
        #expect(again.stderr.contains(archive + ".missing"))
        #expect(try ChildProcess.run(sample, ["status", restored]).stdout.hasPrefix("import failed: "))
        #expect(try ChildProcess.run(sample, ["bogus"]).status == 2)
    }

    @Test("group containers and directories outside the root are moved aside and restored too")
    func groupContainersRestored() async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let source = try scratch.source(count: 1)
        let group = scratch.url.appending(path: "group", directoryHint: .isDirectory)
        var tree = TreeBuilder()
        tree.file("shared.db", Array("shared between apps".utf8), mode: 0o660)
        try tree.materialize(at: group.path)
        let destination = MigrationDataContainer(
            bundleIdentifier: NotesApp.identifier.bundleIdentifier,
            containerRootDirectory: scratch.url.appending(path: "destination", directoryHint: .isDirectory),
            documentsDirectory: scratch.url.appending(path: "documents", directoryHint: .isDirectory),
            groupContainerDirectories: [group])
        struct GroupWipingImporter: ResourcesImporting, Sendable {
            var group: URL
            let resourcesImportProgress = Progress(totalUnitCount: 1)
            nonisolated(nonsending) func importResources(at importedDataURL: URL, request: ResourcesImportRequest) async throws {
                // The session moved the group container aside and left its place empty (absent,
                // so an importer can move a whole directory there); write, then fail.
                #expect(!FileManager.default.fileExists(atPath: group.path))
                try FileManager.default.createDirectory(at: group, withIntermediateDirectories: false)
                try Data("new".utf8).write(to: group.appending(path: "shared.db"))
                throw CairnError(.corrupted, "the test importer fails after writing the group container")
            }
        }
        try FileManager.default.createDirectory(at: destination.containerRootDirectory, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: destination.documentsDirectory, withIntermediateDirectories: true)
        try Data("outside the root".utf8).write(to: destination.documentsDirectory.appending(path: "mine.txt"))
        let before = try ContainerSnapshot(of: destination)
        #expect(before.trees.count == 3)
        let tester = MigrationTester(
            exporter: NotesExporter(container: source), importer: GroupWipingImporter(group: group),
            appIdentifier: NotesApp.identifier, container: destination, workDirectory: try scratch.work())
        let exported = try await tester.exportController.exportResources()
        await #expect(throws: CairnError.self) { try await tester.importController.importResources(from: exported.archiveURL) }
        let after = try ContainerSnapshot(of: destination)
        #expect(after == before, "\(after.diff(before))")
        guard case .failure(let stored as CairnError)? = MigrationStatus.importStatus(in: destination) else {
            Issue.record("no failure status")
            return
        }
        #expect(stored.code == .corrupted)
    }

    @Test("a failed import into a container that did not exist records its status there")
    func failureIntoMissingContainer() async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let destination = scratch.container("nested/destination")
        let session = MigrationImportSession(importer: NotesImporter(container: destination), container: destination)
        await #expect(throws: CairnError.self) {
            try await session.importResources(fromArchiveAt: scratch.url.appending(path: "missing.cairn"))
        }
        guard case .failure(let stored as CairnError)? = MigrationStatus.importStatus(in: destination) else {
            Issue.record("no failure status")
            return
        }
        #expect(stored.code == .notFound)
        let root = destination.containerRootDirectory.path
        #expect(try FileManager.default.contentsOfDirectory(atPath: root) == [MigrationDataContainer.stateDirectoryName])
    }
}
