import Cairn
import CairnMigration
import CairnMigrationTesting
import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import cairn_migration_sample

/// Scratch containers and sample apps for the migration tests.
struct MigrationScratch {
    let directory: TemporaryDirectory

    init() throws { directory = try TemporaryDirectory(prefix: "cairn-migration") }

    func remove() { directory.remove() }

    var url: URL { directory.url }

    /// A container rooted at `<scratch>/<name>`.
    func container(_ name: String) -> MigrationDataContainer {
        NotesApp.container(root: directory.url(appending: name))
    }

    /// A work directory for the tester.
    func work(_ name: String = "work") throws -> URL {
        let url = directory.url(appending: name)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// A seeded source container.
    func source(count: Int = 4, seed: UInt64 = 7) throws -> MigrationDataContainer {
        let container = container("source")
        try NotesApp.seed(container, count: count, seed: seed)
        return container
    }

    /// A destination that already holds user data of every kind the comparer sees: files with
    /// odd modes and old times, a symlink, a hard link, a nested directory, an empty directory.
    func populatedDestination(_ name: String = "destination") throws -> MigrationDataContainer {
        let container = container(name)
        let root = container.containerRootDirectory.path(percentEncoded: false)
        var tree = TreeBuilder()
        tree.rootMode = 0o750
        tree.file("Documents/mine.txt", Array("my own note\n".utf8), mode: 0o600)
        tree.file("Documents/deep/nested/old.txt", Array(repeating: 0x41, count: 5000), mtime: 1_600_000_000_000_000_001)
        tree.directory("Documents/empty", mode: 0o700)
        tree.symlink("Documents/link", target: "mine.txt")
        tree.file("Application Support/settings.json", Array(#"{"theme":"light"}"#.utf8), mode: 0o640)
        tree.hardLink("Application Support/settings-copy.json", to: "Application Support/settings.json")
        try tree.materialize(at: root)
        return container
    }
}

/// An importer that writes into the container and then fails.
struct FailingImporter: ResourcesImporting, Sendable {
    var container: MigrationDataContainer
    let resourcesImportProgress = Progress(totalUnitCount: 1)

    struct Failure: Error, CustomStringConvertible {
        var description: String { "the sample importer gave up" }
    }

    nonisolated(nonsending) func importResources(at importedDataURL: URL, request: ResourcesImportRequest) async throws {
        let files = FileManager.default
        try files.createDirectory(at: container.documentsDirectory, withIntermediateDirectories: true)
        try Data("half an import".utf8).write(to: container.documentsDirectory.appending(path: "partial.txt"))
        try Data("x".utf8).write(to: container.containerRootDirectory.appending(path: "stray"))
        throw Failure()
    }
}

/// The sample app's tester: exporting `source`, importing into `destination`.
func notesTester(
    source: MigrationDataContainer, destination: MigrationDataContainer, work: URL, version: String = NotesApp.currentVersion
) -> MigrationTester<NotesExporter, NotesImporter> {
    MigrationTester(
        exporter: NotesExporter(container: source, resourcesVersion: version), importer: NotesImporter(container: destination),
        appIdentifier: NotesApp.identifier, container: destination, workDirectory: work)
}

/// The sample binary, built beside the test bundle.
func sampleExecutable() -> URL {
    Bundle.module.bundleURL.deletingLastPathComponent().appending(path: "cairn-migration-sample")
}

/// The names directly in `url`'s parent, sorted, without import lock files (left by design).
func siblings(of url: URL) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: url.deletingLastPathComponent().path(percentEncoded: false))
        .filter { !$0.hasSuffix(".cairn-import.lock") }.sorted()
}
