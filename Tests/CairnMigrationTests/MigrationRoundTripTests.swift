import Cairn
import CairnMigration
import CairnMigrationTesting
import CairnTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

@testable import cairn_migration_sample

@Suite("Migration round trip")
struct MigrationRoundTripTests {
    @Test("export then import through the tester: same notes, success status, header fields")
    func roundTrip() async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let source = try scratch.source()
        let destination = scratch.container("destination")
        let tester = notesTester(source: source, destination: destination, work: try scratch.work())
        let statuses = StatusLog()
        tester.importController.registerImportCompletion { statuses.append($0) }

        let progress = Progress(totalUnitCount: 0)
        let exported = try await tester.exportController.exportResources(progress: progress)
        #expect(exported.exportProperties.version == "3")
        #expect(progress.fractionCompleted > 0.99)
        let extractedDocuments = try TreeSnapshot(at: exported.extractedResourcesURL.appending(path: "Documents").path)
        #expect(extractedDocuments == (try TreeSnapshot(at: source.documentsDirectory.path)))

        let header = try await Extractor.withExtractor(at: .file(path: exported.archiveURL.path)) { $0.header }
        #expect(header.resourcesVersion == "3")
        #expect(header.sourcePlatform == "linux")
        #expect(header.appIdentifier == "org.example.cairn-notes")
        #expect(header.metadata[MigrationAppIdentifier.storeMetadataKey] == "flathub")
        #expect(header.sizeEstimate == UInt64(NotesExporter(container: source).resourcesSizeEstimate))
        #expect(header.isCompressible)

        let importProgress = Progress(totalUnitCount: 0)
        try await tester.importController.importResources(from: exported.archiveURL, progress: importProgress)
        #expect(importProgress.fractionCompleted > 0.99)
        // The importer moved the files into a new Documents directory: file times kept, its own not.
        let imported = try TreeSnapshot(at: destination.documentsDirectory.path, directoryTimes: false)
        #expect(imported.diff(try TreeSnapshot(at: source.documentsDirectory.path, directoryTimes: false)) == "identical")
        #expect(try NotesApp.readSettings(destination.applicationSupportDirectory.appending(path: "settings.json"))["theme"] == "dark")
        #expect(MigrationStatus.importStatus(in: destination)?.isSuccess == true)
        #expect(statuses.count == 1 && statuses.first?.isSuccess == true)
        // Nothing left beside the container: no aside, import or discard directories.
        #expect(try siblings(of: destination.containerRootDirectory) == ["destination", "source", "work"])
    }

    @Test("a successful import replaces the existing data and removes the moved-aside copy")
    func replacesExistingData() async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let source = try scratch.source(count: 2)
        let destination = try scratch.populatedDestination()
        let tester = notesTester(source: source, destination: destination, work: try scratch.work())
        let exported = try await tester.exportController.exportResources()
        try await tester.importController.importResources(from: exported.archiveURL)
        let names = try FileManager.default.contentsOfDirectory(atPath: destination.documentsDirectory.path).sorted()
        #expect(names == ["note-0.txt", "note-1.txt"])
        #expect(try siblings(of: destination.containerRootDirectory) == ["destination", "source", "work"])
    }

    @Test("import from a stream: the header is read and checked before anything is written")
    func streamHeaderBeforeWriting() async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let source = try scratch.source(count: 2)
        let work = try scratch.work()
        let archive = work.appending(path: "v9.cairn")
        var exporter = NotesExporter(container: source)
        exporter.resourcesVersion = "3"
        var session = MigrationExportSession(exporter: exporter, appIdentifier: NotesApp.identifier)
        session.configuration.metadata["note"] = "stream"
        _ = try await session.exportResources(to: archive)

        // Refused by the app from the header: nothing appears beside or in the container.
        let destination = try scratch.populatedDestination()
        let before = try ContainerSnapshot(of: destination)
        let parentBefore = try siblings(of: destination.containerRootDirectory)
        let importer = MigrationImportSession(importer: NotesImporter(container: destination), container: destination)
        let seen = HeaderLog()
        importer.acceptRequest = { request in
            seen.record(request, parentNames: try siblings(of: destination.containerRootDirectory))
            throw CairnError(.unsupportedVersion, "refused version \(request.sourceVersion) in the test")
        }
        let input = try FileHandle(forReadingFrom: archive)
        await #expect(throws: CairnError.self) { try await importer.importResources(from: input) }
        try input.close()
        #expect(seen.request?.sourceVersion == "3")
        #expect(seen.request?.sourceAppIdentifier == NotesApp.identifier)
        #expect(seen.parentNames == parentBefore)
        #expect(try siblings(of: destination.containerRootDirectory) == parentBefore)
        let after = try ContainerSnapshot(of: destination)
        #expect(after == before, "\(after.diff(before))")
        guard case .failure(let error as CairnError)? = MigrationStatus.importStatus(in: destination) else {
            Issue.record("no failure status")
            return
        }
        #expect(error.code == .unsupportedVersion)

        // Accepted: the stream imports.
        importer.acceptRequest = NotesImporter.accept
        let again = try FileHandle(forReadingFrom: archive)
        defer { try? again.close() }
        let request = try await importer.importResources(from: again)
        #expect(request.sourceVersion == "3")
        #expect(MigrationStatus.importStatus(in: destination)?.isSuccess == true)
    }

    @Test("export to a file handle as a stream, import it from a file handle")
    func fileHandleStream() async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let source = try scratch.source(count: 3)
        let streamURL = try scratch.work().appending(path: "stream.cairn")
        #expect(FileManager.default.createFile(atPath: streamURL.path, contents: nil))
        let output = try FileHandle(forWritingTo: streamURL)
        let session = MigrationExportSession(exporter: NotesExporter(container: source), appIdentifier: NotesApp.identifier)
        let properties = try await session.exportResources(to: output, name: "stream")
        try output.close()
        #expect(properties.archiveBytes == UInt64(try FileManager.default.attributesOfItem(atPath: streamURL.path)[.size] as? Int ?? -1))

        let destination = scratch.container("destination")
        let input = try FileHandle(forReadingFrom: streamURL)
        defer { try? input.close() }
        let importer = MigrationImportSession(importer: NotesImporter(container: destination), container: destination)
        try await importer.importResources(from: input, name: "stream")
        let imported = try TreeSnapshot(at: destination.documentsDirectory.path, directoryTimes: false)
        #expect(imported == (try TreeSnapshot(at: source.documentsDirectory.path, directoryTimes: false)))
    }

    @Test("a plain Cairn archive (no app in its header) is refused before writing")
    func refusesPlainArchive() async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let source = try scratch.source(count: 1)
        let archive = try scratch.work().appending(path: "plain.cairn")
        _ = try await Archiver.withArchiver(writingTo: .file(path: archive.path)) { try await $0.appendItem(at: source.documentsDirectory) }
        let destination = try scratch.populatedDestination()
        let before = try ContainerSnapshot(of: destination)
        let session = MigrationImportSession(importer: NotesImporter(container: destination), container: destination)
        let error = await #expect(throws: CairnError.self) { try await session.importResources(fromArchiveAt: archive) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.path == archive.path)
        let after = try ContainerSnapshot(of: destination)
        #expect(after == before, "\(after.diff(before))")
    }

    @Test("the export refuses a destination without room for the size estimate, before writing")
    func freeSpaceCheck() async throws {
        struct HugeExporter: ResourcesExporting {
            var resourcesSizeEstimate: Int { Int.max / 2 }
            var resourcesVersion: String { "1" }
            var resourcesCompressible: Bool { false }
            nonisolated(nonsending) func exportResources(to archiver: ResourcesArchiver, request: ResourcesExportRequest) async throws {
                Issue.record("the exporter ran")
            }
        }
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let archive = try scratch.work().appending(path: "huge.cairn")
        let session = MigrationExportSession(exporter: HugeExporter(), appIdentifier: NotesApp.identifier)
        let error = await #expect(throws: CairnError.self) { try await session.exportResources(to: archive) }
        #expect(error?.code == .limitExceeded)
        #expect(error?.path == archive.path)
        #expect(!FileManager.default.fileExists(atPath: archive.path + ".partial"))
    }
}

/// Statuses handed to an import completion.
final class StatusLog: Sendable {
    private let statuses = Mutex<[MigrationStatus]>([])
    func append(_ status: MigrationStatus) { statuses.withLock { $0.append(status) } }
    var count: Int { statuses.withLock { $0.count } }
    var first: MigrationStatus? { statuses.withLock { $0.first } }
}

/// What an `acceptRequest` saw.
final class HeaderLog: Sendable {
    private let stored = Mutex<(ResourcesImportRequest, [String])?>(nil)
    func record(_ request: ResourcesImportRequest, parentNames: [String]) { stored.withLock { $0 = (request, parentNames) } }
    var request: ResourcesImportRequest? { stored.withLock { $0?.0 } }
    var parentNames: [String]? { stored.withLock { $0?.1 } }
}
