import Cairn
import CairnMigration
import CairnMigrationTesting
import CairnTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

@testable import cairn_migration_sample

/// Every way an import can fail ends the same: an error, a stored failure status, and a
/// container byte-identical to before (contents, types, modes, times, links).
@Suite("Migration failures")
struct MigrationFailureTests {
    /// Checks the three outcomes; returns the stored error.
    @discardableResult
    private func expectCleanFailure(
        _ destination: MigrationDataContainer, before: ContainerSnapshot, parentNames: [String],
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> (any Error)? {
        let after = try ContainerSnapshot(of: destination)
        #expect(after == before, "\(after.diff(before))", sourceLocation: sourceLocation)
        #expect(try siblings(of: destination.containerRootDirectory) == parentNames, sourceLocation: sourceLocation)
        guard case .failure(let error)? = MigrationStatus.importStatus(in: destination) else {
            Issue.record("no failure status", sourceLocation: sourceLocation)
            return nil
        }
        return error
    }

    @Test("the importer throws: the container is put back exactly, and a new process reads the failure")
    func importerThrows() async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let source = try scratch.source()
        let destination = try scratch.populatedDestination()
        let work = try scratch.work()
        let before = try ContainerSnapshot(of: destination)
        let parentNames = try siblings(of: destination.containerRootDirectory)
        let tester = MigrationTester(
            exporter: NotesExporter(container: source), importer: FailingImporter(container: destination),
            appIdentifier: NotesApp.identifier, container: destination, workDirectory: work)
        let exported = try await tester.exportController.exportResources()
        await #expect(throws: FailingImporter.Failure.self) {
            try await tester.importController.importResources(from: exported.archiveURL)
        }
        let error = try expectCleanFailure(destination, before: before, parentNames: parentNames)
        #expect("\(error.map { String(describing: $0) } ?? "")".contains("the sample importer gave up"))

        // Another process (the app's next launch) reads the status, then clears it.
        let status = try ChildProcess.run(sampleExecutable(), ["status", destination.containerRootDirectory.path, "--clear"])
        #expect(status.status == 0)
        #expect(status.stdout.hasPrefix("import failed: "), "\(status.stdout)")
        #expect(status.stdout.contains("the importer failed: the sample importer gave up"))
        #expect(MigrationStatus.importStatus(in: destination) == nil)
    }

    @Test("a flipped byte in the archive: the import fails cleanly", arguments: [0.3, 0.6, 0.97])
    func flippedByte(at fraction: Double) async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let source = try scratch.source(count: 6, seed: 11)
        let destination = try scratch.populatedDestination()
        let tester = notesTester(source: source, destination: destination, work: try scratch.work())
        let exported = try await tester.exportController.exportResources()
        let offset = UInt64(Double(exported.exportProperties.archiveBytes) * fraction)
        let before = try ContainerSnapshot(of: destination)
        let parentNames = try siblings(of: destination.containerRootDirectory)
        let thrown = await #expect(throws: CairnError.self) {
            try await tester.importController.importResources(from: exported.archiveURL, fault: .flipByte(atOffset: offset))
        }
        #expect(thrown?.path?.hasSuffix("-damaged.cairn") == true, "\(String(describing: thrown))")
        let stored = try expectCleanFailure(destination, before: before, parentNames: parentNames)
        #expect((stored as? CairnError)?.code == thrown?.code)
    }

    @Test("cancelling the import after N bytes: CancellationError, recorded, container untouched")
    func cancelledImport() async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let source = try scratch.source(count: 8, seed: 3)
        let destination = try scratch.populatedDestination()
        let tester = notesTester(source: source, destination: destination, work: try scratch.work())
        let exported = try await tester.exportController.exportResources()
        let before = try ContainerSnapshot(of: destination)
        let parentNames = try siblings(of: destination.containerRootDirectory)
        await #expect(throws: CancellationError.self) {
            try await tester.importController.importResources(from: exported.archiveURL, fault: .cancel(afterBytes: 1))
        }
        let stored = try expectCleanFailure(destination, before: before, parentNames: parentNames)
        #expect(stored is CancellationError)
    }

    @Test("cancelling the export after N bytes, or a full disk: no archive, and its partial file is refused")
    func brokenExports() async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        // Incompressible notes, so the archive is larger than the limits below.
        let source = try scratch.source(count: 2)
        var random = SeededGenerator(seed: 5)
        try Data(random.bytes(300_000)).write(to: source.documentsDirectory.appending(path: "photo.raw"))
        let destination = try scratch.populatedDestination()
        let tester = notesTester(source: source, destination: destination, work: try scratch.work())
        let sourceBefore = try ContainerSnapshot(of: source)
        let before = try ContainerSnapshot(of: destination)

        await #expect(throws: CancellationError.self) {
            _ = try await tester.exportController.exportResources(fault: .cancel(afterBytes: 1))
        }
        let full = await #expect(throws: CairnError.self) {
            _ = try await tester.exportController.exportResources(fault: .diskFull(afterBytes: 100_000))
        }
        #expect(full?.code == .io)
        #expect(full?.path?.hasSuffix("export-2.cairn") == true, "\(String(describing: full))")
        #expect(try ContainerSnapshot(of: source) == sourceBefore)

        for number in 1...2 {
            let archive = try scratch.work().appending(path: "export-\(number).cairn")
            #expect(!FileManager.default.fileExists(atPath: archive.path))
            let partial = URL(filePath: archive.path + ".partial")
            #expect(FileManager.default.fileExists(atPath: partial.path))
            let parentNames = try siblings(of: destination.containerRootDirectory)
            let thrown = await #expect(throws: CairnError.self) {
                try await tester.importController.importResources(from: partial)
            }
            #expect(thrown?.path == partial.path)
            try expectCleanFailure(destination, before: before, parentNames: parentNames)
        }
    }

    @Test("an unsupported source version is refused by the app before anything is extracted")
    func unsupportedVersion() async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let source = try scratch.source(count: 1)
        let destination = try scratch.populatedDestination()
        let work = try scratch.work()
        let archive = work.appending(path: "v4.cairn")
        let exporter = NotesExporter(container: source, resourcesVersion: "3")
        var session = MigrationExportSession(exporter: exporter, appIdentifier: NotesApp.identifier)
        session.configuration.resourcesVersion = "ignored"  // the exporter's version wins
        _ = try await session.exportResources(to: archive)
        // Claim version 4 to the importer, as a newer exporter would.
        let before = try ContainerSnapshot(of: destination)
        let parentNames = try siblings(of: destination.containerRootDirectory)
        let tester = notesTester(source: source, destination: destination, work: work)
        let request = ResourcesImportRequest(sourceAppIdentifier: NotesApp.identifier, sourceVersion: "4")
        let error = await #expect(throws: CairnError.self) {
            try await tester.importController.importResources(from: archive, importRequest: request)
        }
        #expect(error?.code == .unsupportedVersion)
        try expectCleanFailure(destination, before: before, parentNames: parentNames)
    }

    @Test("a second import into the same container while one runs is refused as busy; the first then fails cleanly")
    func concurrentImportBusy() async throws {
        struct BlockingImporter: ResourcesImporting, Sendable {
            var container: MigrationDataContainer
            var other: MigrationImportSession<NotesImporter>.Probe
            let resourcesImportProgress = Progress(totalUnitCount: 1)
            nonisolated(nonsending) func importResources(at importedDataURL: URL, request: ResourcesImportRequest) async throws {
                try await other.run()
            }
        }
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let destination = try scratch.populatedDestination()
        let golden = try #require(Bundle.module.url(forResource: "notes-v3", withExtension: "cairn", subdirectory: "Fixtures"))
        let before = try ContainerSnapshot(of: destination)
        let probe = MigrationImportSession<NotesImporter>.Probe(archive: golden, container: destination)
        let first = MigrationImportSession(importer: BlockingImporter(container: destination, other: probe), container: destination)
        await #expect(throws: CairnError.self) { try await first.importResources(fromArchiveAt: golden) }
        #expect(probe.error?.code == .busy, "\(String(describing: probe.error))")
        // The first import failed because its importer threw the second one's error: put back.
        let after = try ContainerSnapshot(of: destination)
        #expect(after == before, "\(after.diff(before))")
        guard case .failure(let stored as CairnError)? = MigrationStatus.importStatus(in: destination) else {
            Issue.record("no failure status")
            return
        }
        #expect(stored.code == .busy)
    }

    @Test("an import killed after moving the container aside is undone by the next session")
    func interruptedImportRecovered() async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let destination = try scratch.populatedDestination()
        let before = try ContainerSnapshot(of: destination)
        let parentNames = try siblings(of: destination.containerRootDirectory)
        // What a process killed inside the importer leaves: the root moved aside, a half-written new one.
        let root = destination.containerRootDirectory.path(percentEncoded: false).trimmingSuffix("/")
        let parent = (root as NSString).deletingLastPathComponent
        #expect(rename(root, parent + "/.destination.cairn-aside-deadbeef") == 0)
        try FileManager.default.createDirectory(atPath: root + "/Documents", withIntermediateDirectories: true)
        try Data("half".utf8).write(to: URL(filePath: root + "/Documents/half.txt"))

        let session = MigrationImportSession(importer: NotesImporter(container: destination), container: destination)
        let missing = scratch.url.appending(path: "missing.cairn")
        await #expect(throws: CairnError.self) { try await session.importResources(fromArchiveAt: missing) }
        try expectCleanFailure(destination, before: before, parentNames: parentNames)
    }
}

extension String {
    func trimmingSuffix(_ suffix: String) -> String {
        var text = self
        while text.count > 1, text.hasSuffix(suffix) { text.removeLast(suffix.count) }
        return text
    }
}

extension MigrationImportSession where Importer == NotesImporter {
    /// Runs a second import from inside a first one and keeps its error.
    final class Probe: Sendable {
        let archive: URL
        let container: MigrationDataContainer
        private let failure = Mutex<CairnError?>(nil)

        init(archive: URL, container: MigrationDataContainer) {
            self.archive = archive
            self.container = container
        }

        var error: CairnError? { failure.withLock { $0 } }

        nonisolated(nonsending) func run() async throws {
            let session = MigrationImportSession(importer: NotesImporter(container: container), container: container)
            do {
                try await session.importResources(fromArchiveAt: archive)
            } catch let error as CairnError {
                failure.withLock { $0 = error }
                throw error
            }
        }
    }
}
