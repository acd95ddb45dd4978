import Cairn
import CairnMigration
import CairnMigrationTesting
import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import cairn_migration_sample

/// The exporting process is killed (SIGKILL) in the middle; the import refuses what it left.
@Suite("Migration killed export")
struct MigrationKilledExportTests {
    @Test("a stream cut by SIGKILL of the exporter is refused, container untouched")
    func killedStreamingExport() async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let source = try scratch.source(count: 2)
        var random = SeededGenerator(seed: 9)
        try Data(random.bytes(2 << 20)).write(to: source.documentsDirectory.appending(path: "video.raw"))

        // The exporter writes to a pipe nobody drains past 64 KiB, so it is mid-export when killed.
        let process = Process()
        process.executableURL = sampleExecutable()
        process.arguments = ["export", source.containerRootDirectory.path, "-"]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        let reader = pipe.fileHandleForReading
        var received = Data()
        while received.count < 64 << 10, let piece = try reader.read(upToCount: 16 << 10), !piece.isEmpty {
            received += piece
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(process.terminationReason == .uncaughtSignal)
        received += try reader.readToEnd() ?? Data()
        let cut = scratch.url.appending(path: "cut.cairn")
        try received.write(to: cut)

        let destination = try scratch.populatedDestination()
        let before = try ContainerSnapshot(of: destination)
        let parentNames = try siblings(of: destination.containerRootDirectory)
        let session = MigrationImportSession(importer: NotesImporter(container: destination), container: destination)
        let input = try FileHandle(forReadingFrom: cut)
        defer { try? input.close() }
        let error = await #expect(throws: CairnError.self) { try await session.importResources(from: input, name: cut.path) }
        #expect(error?.code == .truncated)
        let after = try ContainerSnapshot(of: destination)
        #expect(after == before, "\(after.diff(before))")
        #expect(try siblings(of: destination.containerRootDirectory) == parentNames)
        guard case .failure(let stored as CairnError)? = MigrationStatus.importStatus(in: destination) else {
            Issue.record("no failure status")
            return
        }
        #expect(stored.code == .truncated)
        #expect(stored.path == cut.path)
    }
}
