import Cairn
import CairnMigration
import CairnTestSupport
import Foundation
import Testing

@testable import cairn_migration_sample

@Suite("Migration status")
struct MigrationStatusTests {
    @Test("no import: nil; a recorded failure reads back with its code, path and offset; clear removes it")
    func recordedFailure() async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let destination = try scratch.populatedDestination()
        #expect(MigrationStatus.importStatus(in: destination) == nil)
        let archive = scratch.url.appending(path: "damaged.cairn")
        try Data("CAIRN but not really an archive".utf8).write(to: archive)
        let session = MigrationImportSession(importer: NotesImporter(container: destination), container: destination)
        let thrown = await #expect(throws: CairnError.self) { try await session.importResources(fromArchiveAt: archive) }
        // A second reader, as after a restart: only the file is shared.
        guard case .failure(let stored as CairnError)? = MigrationStatus.importStatus(in: destination) else {
            Issue.record("no stored CairnError")
            return
        }
        #expect(stored.code == thrown?.code)
        #expect(stored.message == thrown?.message)
        #expect(stored.path == archive.path)
        #expect(stored.offset == thrown?.offset)
        let stateDirectory = destination.statusFileURL.deletingLastPathComponent().path
        #expect(try FileManager.default.contentsOfDirectory(atPath: stateDirectory) == ["import-status.json"])
        try MigrationStatus.clearImportStatus(in: destination)
        #expect(MigrationStatus.importStatus(in: destination) == nil)
        try MigrationStatus.clearImportStatus(in: destination)
    }

    @Test(
        "MigrationStatus.importStatus follows MigrationDataContainer.current: nil while it is unset, even with a status recorded (importStatus(in:) reads it)"
    )
    func currentContainer() async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let destination = scratch.container("destination")
        let golden = try #require(Bundle.module.url(forResource: "notes-v3", withExtension: "cairn", subdirectory: "Fixtures"))
        try await MigrationImportSession(importer: NotesImporter(container: destination), container: destination)
            .importResources(fromArchiveAt: golden)
        let previous = MigrationDataContainer.current
        defer { MigrationDataContainer.current = previous }
        // The session does not set it: an app that never sets it reads nil.
        MigrationDataContainer.current = nil
        #expect(MigrationStatus.importStatus == nil)
        #expect(MigrationStatus.importStatus(in: destination)?.isSuccess == true)
        MigrationStatus.clearImportStatus()
        #expect(MigrationStatus.importStatus(in: destination)?.isSuccess == true, "clearImportStatus() without a container clears nothing")
        MigrationDataContainer.current = destination
        #expect(MigrationStatus.importStatus?.isSuccess == true)
        MigrationStatus.clearImportStatus()
        #expect(MigrationStatus.importStatus == nil)
    }

    @Test("a damaged or oversized status file reads as a failure naming it")
    func damagedStatusFile() throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let destination = try scratch.populatedDestination()
        let file = destination.statusFileURL
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data("{not json".utf8).write(to: file)
        guard case .failure(let error as CairnError)? = MigrationStatus.importStatus(in: destination) else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.code == .corrupted)
        #expect(error.path == file.path)
        try Data(repeating: 0x20, count: 100_000).write(to: file)
        guard case .failure(let large as CairnError)? = MigrationStatus.importStatus(in: destination) else {
            Issue.record("expected a failure")
            return
        }
        #expect(large.code == .limitExceeded)
    }

    @Test("container defaults follow XDG: $XDG_DATA_HOME/<bundle id>, else ~/.local/share")
    func xdgDefaults() {
        let set = MigrationDataContainer(bundleIdentifier: "org.example.app", environment: ["XDG_DATA_HOME": "/data", "HOME": "/home/u"])
        #expect(set.containerRootDirectory.path == "/data/org.example.app")
        #expect(set.documentsDirectory.path == "/data/org.example.app/Documents")
        #expect(set.applicationSupportDirectory.path == "/data/org.example.app/Application Support")
        let unset = MigrationDataContainer(bundleIdentifier: "org.example.app", environment: ["XDG_DATA_HOME": "relative", "HOME": "/home/u"])
        #expect(unset.containerRootDirectory.path == "/home/u/.local/share/org.example.app")
        let named = MigrationDataContainer(
            bundleIdentifier: "org.example.app", documentsDirectory: URL(filePath: "/home/u/Notes"),
            groupContainerDirectories: [URL(filePath: "/srv/group"), URL(filePath: "/data/org.example.app/inner")],
            environment: ["XDG_DATA_HOME": "/data"])
        #expect(named.protectedDirectories.map(\.path) == ["/data/org.example.app", "/home/u/Notes", "/srv/group"])
    }
}
