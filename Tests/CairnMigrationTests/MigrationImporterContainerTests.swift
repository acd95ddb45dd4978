import Cairn
import CairnMigration
import CairnMigrationTesting
import CairnTestSupport
import Foundation
import Testing

@testable import cairn_migration_sample

/// What an importer finds in the container (issue 23): the root, empty, and nothing else, so it
/// can move whole extracted directories into place.
@Suite("What an importer finds in the container")
struct MigrationImporterContainerTests {
    /// Moves the extracted `Documents` and `Application Support` into place whole, one
    /// `rename(2)` each, as an AppMigrationKit importer would.
    struct WholeDirectoryImporter: ResourcesImporting, Sendable {
        var container: MigrationDataContainer
        let resourcesImportProgress = Progress(totalUnitCount: 1)

        nonisolated(nonsending) func importResources(at importedDataURL: URL, request: ResourcesImportRequest) async throws {
            let files = FileManager.default
            try files.moveItem(at: importedDataURL.appending(path: "Documents"), to: container.documentsDirectory)
            try files.moveItem(at: importedDataURL.appending(path: "Application Support"), to: container.applicationSupportDirectory)
            resourcesImportProgress.completedUnitCount = 1
        }
    }

    @Test(
        "an importer that moves whole directories into place succeeds, over existing data, with the documents directory inside the root or outside it",
        arguments: [false, true])
    func wholeDirectoriesMoveIntoPlace(documentsOutsideRoot: Bool) async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let source = try scratch.source(count: 3)
        var destination = try scratch.populatedDestination()
        if documentsOutsideRoot {
            let elsewhere = scratch.url.appending(path: "elsewhere/Documents", directoryHint: .isDirectory)
            try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
            try Data("old".utf8).write(to: elsewhere.appending(path: "old.txt"))
            destination.documentsDirectory = elsewhere
        }
        let tester = MigrationTester(
            exporter: NotesExporter(container: source), importer: WholeDirectoryImporter(container: destination),
            appIdentifier: NotesApp.identifier, container: destination, workDirectory: try scratch.work())
        let exported = try await tester.exportController.exportResources()
        try await tester.importController.importResources(from: exported.archiveURL)
        #expect(MigrationStatus.importStatus(in: destination)?.isSuccess == true)
        let imported = try TreeSnapshot(at: destination.documentsDirectory.path, directoryTimes: false)
        #expect(imported.diff(try TreeSnapshot(at: source.documentsDirectory.path, directoryTimes: false)) == "identical")
        let support = try TreeSnapshot(at: destination.applicationSupportDirectory.path, directoryTimes: false)
        #expect(support.diff(try TreeSnapshot(at: source.applicationSupportDirectory.path, directoryTimes: false)) == "identical")
    }

    /// Records what the container looked like when the importer was called, then fails.
    struct InspectingImporter: ResourcesImporting, Sendable {
        var container: MigrationDataContainer
        let resourcesImportProgress = Progress(totalUnitCount: 1)
        struct Seen: Error {
            var rootNames: [String]
            var documentsExists: Bool
            var supportExists: Bool
        }

        nonisolated(nonsending) func importResources(at importedDataURL: URL, request: ResourcesImportRequest) async throws {
            let files = FileManager.default
            throw Seen(
                rootNames: try files.contentsOfDirectory(atPath: container.containerRootDirectory.path(percentEncoded: false)),
                documentsExists: files.fileExists(atPath: container.documentsDirectory.path(percentEncoded: false)),
                supportExists: files.fileExists(atPath: container.applicationSupportDirectory.path(percentEncoded: false)))
        }
    }

    @Test("the importer finds the root empty and no Documents or Application Support; on failure the container comes back as it was")
    func importerFindsAnEmptyRoot() async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let source = try scratch.source(count: 2)
        let destination = try scratch.populatedDestination()
        let before = try TreeSnapshot(at: destination.containerRootDirectory.path, directoryTimes: false)
        let tester = MigrationTester(
            exporter: NotesExporter(container: source), importer: InspectingImporter(container: destination),
            appIdentifier: NotesApp.identifier, container: destination, workDirectory: try scratch.work())
        let exported = try await tester.exportController.exportResources()
        let seen = await #expect(throws: InspectingImporter.Seen.self) {
            try await tester.importController.importResources(from: exported.archiveURL)
        }
        #expect(seen?.rootNames == [])
        #expect(seen?.documentsExists == false)
        #expect(seen?.supportExists == false)
        // The status file is new; everything else is as it was.
        try FileManager.default.removeItem(at: destination.statusFileURL.deletingLastPathComponent())
        #expect(try TreeSnapshot(at: destination.containerRootDirectory.path, directoryTimes: false).diff(before) == "identical")
    }
}
