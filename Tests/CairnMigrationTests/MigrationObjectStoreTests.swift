import Cairn
import CairnMigration
import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import cairn_migration_sample

/// Exporting into a transfer (issue 11 item 2): the export session writes the archive straight
/// into S3-compatible object storage (`ObjectStoreSink`, a real `rclone serve s3`), and the
/// import session on the other side reads it back from the store with one GET, checking the
/// header before any byte is written.
@Suite("Migration through object storage", .serialized)
struct MigrationObjectStoreTests {
    @Test("export session → ObjectStoreSink → import session from the store: same notes, success status, no local archive")
    func throughObjectStorage() async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let source = try scratch.source()
        let destination = scratch.container("destination")
        let work = try scratch.work()
        let server = try RcloneS3Server(buckets: ["migrations"])
        defer { server.stop() }
        let configuration = try S3Configuration(
            endpoint: server.endpoint, region: server.region,
            credentials: S3Credentials(accessKeyID: server.accessKeyID, secretAccessKey: server.secretAccessKey))
        let location = try S3Location(parsing: "s3://migrations/notes/export.cairn")

        let session = MigrationExportSession(exporter: NotesExporter(container: source), appIdentifier: NotesApp.identifier)
        let sink = try ObjectStoreSink(
            location: location, configuration: configuration, statePath: work.appending(path: "export.partial.upload").path)
        let properties = try await session.exportResources(to: sink, name: location.description)
        #expect(properties.version == NotesApp.currentVersion)
        #expect(FileManager.default.fileExists(atPath: server.objectPath(bucket: "migrations", key: "notes/export.cairn")))
        #expect(sink.uploadedBytes == properties.archiveBytes)

        // The other side: one GET from the store, the header read before anything is written.
        let input = try RemoteArchive(location: location, store: S3Client(configuration: configuration)).openSequential()
        let handle = FileHandle(fileDescriptor: input.descriptor.rawValue, closeOnDealloc: false)
        let importer = MigrationImportSession(importer: NotesImporter(container: destination), container: destination)
        try await importer.importResources(from: handle, name: location.description)
        try input.finish()
        let imported = try TreeSnapshot(at: destination.documentsDirectory.path, directoryTimes: false)
        #expect(imported.diff(try TreeSnapshot(at: source.documentsDirectory.path, directoryTimes: false)) == "identical")
        #expect(MigrationStatus.importStatus(in: destination)?.isSuccess == true)
    }
}
