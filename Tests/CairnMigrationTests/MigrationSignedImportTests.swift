import Cairn
import CairnMigrationTesting
import CairnTestSupport
import Foundation
import Synchronization
import Testing

@testable import CairnMigration
@testable import cairn_migration_sample

/// Signed exports and trusting imports (`Spec/0004-trusted-archives.md §7`), by every import
/// path: a file, a stream from a `FileHandle`, and HTTP (nginx).
@Suite("Migration: signed exports, trusted imports")
struct MigrationSignedImportTests {
    /// The ways an import reads an archive.
    enum ImportPath: String, CaseIterable, CustomStringConvertible, Sendable {
        case file, stream, http
        var description: String { rawValue }
    }

    /// Fixed creation times: `older` is an hour before `newer`.
    static let older: UInt64 = 1_765_000_000_000_000_001
    static let newer: UInt64 = 1_765_000_000_000_000_001 + 3_600_000_000_000
    /// The same, as RFC 3339 (computed with Python's `datetime`, the oracle).
    static let olderText = "2025-12-06T05:46:40.000000001Z"
    static let newerText = "2025-12-06T06:46:40.000000001Z"
    /// The test keys' ids as messages show them (`Spec/0004 §2.1`: the 8 bytes read
    /// little-endian, `%016X`; computed with Python's `struct`).
    static let testKeyID = "5345544E52494143"
    static let otherKeyID = "59454B524548544F"

    /// The requests `acceptRequest` was called with.
    final class AcceptLog: Sendable {
        private let requests = Mutex<[ResourcesImportRequest]>([])
        func record(_ request: ResourcesImportRequest) { requests.withLock { $0.append(request) } }
        var all: [ResourcesImportRequest] { requests.withLock { $0 } }
    }

    /// Exports `source` into `url`, signed with `key` (unsigned when nil) at time `created`.
    private func export(_ source: MigrationDataContainer, to url: URL, key: SigningKey?, created: UInt64? = older) async throws {
        var session = MigrationExportSession(exporter: NotesExporter(container: source), appIdentifier: NotesApp.identifier)
        session.signingKey = key
        session.creationTime = created
        _ = try await session.exportResources(to: url)
    }

    /// A session into `destination` trusting `signers`, whose `acceptRequest` logs into `log`.
    private func session(
        _ destination: MigrationDataContainer, trusting signers: [PublicKey], log: AcceptLog
    ) -> MigrationImportSession<NotesImporter> {
        let session = MigrationImportSession(importer: NotesImporter(container: destination), container: destination)
        session.trustedSigners = signers
        session.acceptRequest = { request in
            log.record(request)
            try NotesImporter.accept(request)
        }
        return session
    }

    /// Imports `archive` by `path`.
    @discardableResult
    private func runImport(
        _ session: MigrationImportSession<NotesImporter>, _ archive: URL, by path: ImportPath
    ) async throws -> ResourcesImportRequest {
        switch path {
        case .file:
            return try await session.importResources(fromArchiveAt: archive)
        case .stream:
            let input = try FileHandle(forReadingFrom: archive)
            defer { try? input.close() }
            return try await session.importResources(from: input, name: archive.lastPathComponent)
        case .http:
            let nginx = try NginxServer(root: archive.deletingLastPathComponent().path(percentEncoded: false))
            defer { nginx.stop() }
            let url = try #require(URL(string: nginx.url("/" + archive.lastPathComponent)))
            let request = try await session.importResources(fromArchiveAt: url)
            #expect(nginx.accessLog().contains { $0.path == "/" + archive.lastPathComponent }, "read over HTTP")
            return request
        }
    }

    /// A refused import: the error, no `acceptRequest` call, the container and its parent as
    /// before (a pre-existing file's bytes too), and the failure recorded with the same code.
    private func expectRefused(
        _ destination: MigrationDataContainer, before: ContainerSnapshot, parentNames: [String], log: AcceptLog,
        _ body: () async throws -> Void, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> CairnError? {
        let thrown = await #expect(throws: CairnError.self, sourceLocation: sourceLocation) { try await body() }
        #expect(log.all.isEmpty, "acceptRequest saw \(log.all)", sourceLocation: sourceLocation)
        let after = try ContainerSnapshot(of: destination)
        #expect(after == before, "\(after.diff(before))", sourceLocation: sourceLocation)
        let mine = try Data(contentsOf: destination.documentsDirectory.appending(path: "mine.txt"))
        #expect(mine == Data("my own note\n".utf8), sourceLocation: sourceLocation)
        #expect(try siblings(of: destination.containerRootDirectory) == parentNames, sourceLocation: sourceLocation)
        guard case .failure(let stored as CairnError)? = MigrationStatus.importStatus(in: destination) else {
            Issue.record("no failure status", sourceLocation: sourceLocation)
            return thrown
        }
        #expect(stored.code == thrown?.code, sourceLocation: sourceLocation)
        return thrown
    }

    @Test("§7.1, §7.2: a signed export imports with its key trusted, by file, stream and HTTP; its header holds cairn.created", arguments: ImportPath.allCases)
    func signedRoundTrip(path: ImportPath) async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let source = try scratch.source(count: 3, seed: 5)
        let archive = try scratch.work().appending(path: "signed.cairn")
        let key = try TestSigningKey.key()
        try await export(source, to: archive, key: key, created: Self.newer)
        let (header, signer) = try await Extractor.withExtractor(at: .file(path: archive.path), trustedKeys: [key.publicKey]) {
            extractor in (extractor.header, try extractor.signingKeyID())
        }
        #expect(signer == key.keyID)
        #expect(header.metadata["cairn.created"] == String(Self.newer))

        let destination = try scratch.populatedDestination()
        let log = AcceptLog()
        let request = try await runImport(session(destination, trusting: [key.publicKey], log: log), archive, by: path)
        #expect(request.sourceAppIdentifier == NotesApp.identifier)
        #expect(log.all == [request])
        let imported = try TreeSnapshot(at: destination.documentsDirectory.path, directoryTimes: false)
        #expect(imported == (try TreeSnapshot(at: source.documentsDirectory.path, directoryTimes: false)))
        #expect(MigrationStatus.importStatus(in: destination)?.isSuccess == true)
        let record = try #require(try StoredImportStatus.read(in: destination)?.lastSignedImport)
        #expect(record == SignedImportRecord(signer: Self.testKeyID, created: String(Self.newer)))
    }

    @Test("§7.2: an archive signed by another key is refused naming both keys, before acceptRequest, container untouched", arguments: ImportPath.allCases)
    func foreignKeyRefused(path: ImportPath) async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let source = try scratch.source(count: 2)
        let archive = try scratch.work().appending(path: "foreign.cairn")
        try await export(source, to: archive, key: try TestSigningKey.otherKey())
        let destination = try scratch.populatedDestination()
        let before = try ContainerSnapshot(of: destination)
        let parentNames = try siblings(of: destination.containerRootDirectory)
        let log = AcceptLog()
        let importer = session(destination, trusting: [try TestSigningKey.key().publicKey], log: log)
        let refused = try await expectRefused(destination, before: before, parentNames: parentNames, log: log) {
            try await runImport(importer, archive, by: path)
        }
        #expect(refused?.code == .untrusted, "\(String(describing: refused))")
        let message = refused?.message ?? ""
        #expect(message.contains(Self.otherKeyID) && message.contains(Self.testKeyID), "\(message)")
    }

    @Test("§7.2: an unsigned archive is refused when signers are trusted, naming the key wanted", arguments: ImportPath.allCases)
    func unsignedRefused(path: ImportPath) async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let source = try scratch.source(count: 2)
        let archive = try scratch.work().appending(path: "unsigned.cairn")
        try await export(source, to: archive, key: nil)
        let destination = try scratch.populatedDestination()
        let before = try ContainerSnapshot(of: destination)
        let parentNames = try siblings(of: destination.containerRootDirectory)
        let log = AcceptLog()
        let importer = session(destination, trusting: [try TestSigningKey.key().publicKey], log: log)
        let refused = try await expectRefused(destination, before: before, parentNames: parentNames, log: log) {
            try await runImport(importer, archive, by: path)
        }
        #expect(refused?.code == .untrusted, "\(String(describing: refused))")
        let message = refused?.message ?? ""
        #expect(message.contains("not signed") && message.contains(Self.testKeyID), "\(message)")

        // Without trusted signers the same archive imports, as before signing existed.
        importer.trustedSigners = []
        try await runImport(importer, archive, by: path)
        #expect(MigrationStatus.importStatus(in: destination)?.isSuccess == true)
    }

    @Test("§4.2, §7.2: a stream's header reaches acceptRequest only after the signature after commit 0 verified")
    func streamHeaderWaitsForSignature() async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let source = try scratch.source(count: 2)
        let work = try scratch.work()
        let key = try TestSigningKey.key()
        let archive = work.appending(path: "signed.cairn")
        try await export(source, to: archive, key: key)
        // The prefix signature of commit 0 follows the header record and commit 0 (§3.3 rule 5).
        let bodyOffset = try await Extractor.withExtractor(at: .file(path: archive.path)) { $0.reader.bodyOffset }
        let signatureOffset = bodyOffset + UInt64(CommitRecord.framedLength)
        let damaged = work.appending(path: "damaged-signature.cairn")
        try FileManager.default.copyItem(at: archive, to: damaged)
        try MigrationFaults.flipByte(at: signatureOffset + 50, in: damaged)  // inside the 64 signature bytes

        let destination = try scratch.populatedDestination()
        let before = try ContainerSnapshot(of: destination)
        let parentNames = try siblings(of: destination.containerRootDirectory)
        let log = AcceptLog()
        let importer = session(destination, trusting: [key.publicKey], log: log)
        // A damaged signature and a foreign key: the header is intact and would pass any check
        // made before the signature is read; acceptRequest must not see it.
        let refused = try await expectRefused(destination, before: before, parentNames: parentNames, log: log) {
            try await runImport(importer, damaged, by: .stream)
        }
        #expect(refused?.offset == signatureOffset, "\(String(describing: refused))")
        importer.trustedSigners = [try TestSigningKey.otherKey().publicKey]
        let foreign = try await expectRefused(destination, before: before, parentNames: parentNames, log: log) {
            try await runImport(importer, archive, by: .stream)
        }
        #expect(foreign?.code == .untrusted && foreign?.offset == signatureOffset, "\(String(describing: foreign))")

        // The library entry point itself: checkingHeader is not called for the foreign archive.
        let called = Mutex(false)
        let input = try FileHandle(forReadingFrom: archive)
        defer { try? input.close() }
        await #expect(throws: CairnError.self) {
            _ = try await Extractor.extractStream(
                from: input, to: work.appending(path: "out"), trustedKeys: [try TestSigningKey.otherKey().publicKey]
            ) { _ in called.withLock { $0 = true } }
        }
        #expect(!called.withLock { $0 })
        #expect(!FileManager.default.fileExists(atPath: work.appending(path: "out").path))
    }

    @Test("§7.3: an older archive of the same signer is refused after a newer one, unless allowOlder; clearing the status keeps the guard", arguments: [ImportPath.file, .stream])
    func rollbackGuard(path: ImportPath) async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let work = try scratch.work()
        let key = try TestSigningKey.key()
        let oldArchive = work.appending(path: "old.cairn")
        let newArchive = work.appending(path: "new.cairn")
        try await export(try scratch.source(count: 1, seed: 1), to: oldArchive, key: key, created: Self.older)
        try await export(scratch.container("source"), to: newArchive, key: key, created: Self.newer)
        let destination = try scratch.populatedDestination()
        let log = AcceptLog()
        let importer = session(destination, trusting: [key.publicKey], log: log)
        try await runImport(importer, newArchive, by: path)
        #expect(try StoredImportStatus.read(in: destination)?.lastSignedImport?.created == String(Self.newer))

        let before = try ContainerSnapshot(of: destination)
        let parentNames = try siblings(of: destination.containerRootDirectory)
        let quiet = AcceptLog()
        let guarded = session(destination, trusting: [key.publicKey], log: quiet)
        let refused = try await expectRefusedWithoutMine(destination, before: before, parentNames: parentNames, log: quiet) {
            try await runImport(guarded, oldArchive, by: path)
        }
        #expect(refused?.code == .untrusted, "\(String(describing: refused))")
        #expect(
            refused?.message.contains("older than the last import: created \(Self.olderText), last imported \(Self.newerText)") == true,
            "\(String(describing: refused))")
        #expect(refused?.message.contains(Self.testKeyID) == true)
        // The failure keeps the record of the last success.
        #expect(try StoredImportStatus.read(in: destination)?.lastSignedImport?.created == String(Self.newer))

        // The app clears the status after telling the user: the guard still holds.
        try MigrationStatus.clearImportStatus(in: destination)
        #expect(MigrationStatus.importStatus(in: destination) == nil)
        _ = try await expectRefusedWithoutMine(destination, before: before, parentNames: parentNames, log: quiet) {
            try await runImport(guarded, oldArchive, by: path)
        }

        // An unsigned import without trusted signers keeps today's behaviour and the record.
        let unsignedArchive = work.appending(path: "unsigned.cairn")
        try await export(scratch.container("source"), to: unsignedArchive, key: nil)
        guarded.trustedSigners = []
        try await runImport(guarded, unsignedArchive, by: path)
        #expect(try StoredImportStatus.read(in: destination)?.lastSignedImport?.created == String(Self.newer))

        // allowOlder imports it, and the older archive becomes the last import.
        guarded.trustedSigners = [key.publicKey]
        guarded.allowOlder = true
        try await runImport(guarded, oldArchive, by: path)
        #expect(MigrationStatus.importStatus(in: destination)?.isSuccess == true)
        #expect(try StoredImportStatus.read(in: destination)?.lastSignedImport == SignedImportRecord(signer: Self.testKeyID, created: String(Self.older)))
        // The same creation time again is not older.
        guarded.allowOlder = false
        try await runImport(guarded, oldArchive, by: path)
        #expect(MigrationStatus.importStatus(in: destination)?.isSuccess == true)
    }

    /// ``expectRefused`` for a container whose `mine.txt` an earlier import replaced.
    private func expectRefusedWithoutMine(
        _ destination: MigrationDataContainer, before: ContainerSnapshot, parentNames: [String], log: AcceptLog,
        _ body: () async throws -> Void, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> CairnError? {
        let thrown = await #expect(throws: CairnError.self, sourceLocation: sourceLocation) { try await body() }
        #expect(log.all.isEmpty, "acceptRequest saw \(log.all)", sourceLocation: sourceLocation)
        let after = try ContainerSnapshot(of: destination)
        #expect(after == before, "\(after.diff(before))", sourceLocation: sourceLocation)
        #expect(try siblings(of: destination.containerRootDirectory) == parentNames, sourceLocation: sourceLocation)
        guard case .failure(let stored as CairnError)? = MigrationStatus.importStatus(in: destination) else {
            Issue.record("no failure status", sourceLocation: sourceLocation)
            return thrown
        }
        #expect(stored.code == thrown?.code, sourceLocation: sourceLocation)
        return thrown
    }

    @Test("§7.3: the guard's rules on a header: other key, no creation time, a malformed one, no verified signer")
    func guardRules() throws {
        let key = try TestSigningKey.key().keyID
        let other = try TestSigningKey.otherKey().keyID
        let last = SignedImportRecord(signer: Self.testKeyID, created: String(Self.newer))
        func header(_ created: String?) -> ArchiveHeader {
            ArchiveHeader(appIdentifier: "org.example", metadata: created.map { ["cairn.created": $0] } ?? [:])
        }
        // Another key: no comparison; its record replaces the last.
        #expect(
            try SignedImportRecord.admit(header(String(Self.older)), signer: other, after: last, allowOlder: false)
                == SignedImportRecord(signer: Self.otherKeyID, created: String(Self.older)))
        // Not verified (no trusted signers): nothing guarded, nothing recorded.
        #expect(try SignedImportRecord.admit(header(String(Self.older)), signer: nil, after: last, allowOlder: false) == nil)
        // The same key without a creation time: refused, unless allowOlder (then nothing recorded).
        let missing = #expect(throws: CairnError.self) {
            try SignedImportRecord.admit(header(nil), signer: key, after: last, allowOlder: false)
        }
        #expect(missing?.code == .untrusted && missing?.message.contains("no creation time") == true)
        #expect(try SignedImportRecord.admit(header(nil), signer: key, after: last, allowOlder: true) == nil)
        // A value not in the form of §7.1: corrupted, whatever the guard.
        for bad in ["", "01", "+5", "1.5", " 5", "18446744073709551616", "٣"] {
            let thrown = #expect(throws: CairnError.self, "\(bad)") {
                try SignedImportRecord.admit(header(bad), signer: key, after: nil, allowOlder: true)
            }
            #expect(thrown?.code == .corrupted)
        }
        #expect(ExportCreationTime.parse("0") == 0 && ExportCreationTime.parse("18446744073709551615") == UInt64.max)
        #expect(ExportCreationTime.describe(Self.older) == Self.olderText)
    }

    @Test("§7.2: the tester's signed round trip; a tampered signed export (a flipped byte, another signer) is refused with the container untouched", arguments: [0.1, 0.5, 0.95])
    func testerSignedExport(flippedAt fraction: Double) async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let source = try scratch.source(count: 4, seed: 9)
        let work = try scratch.work()
        let key = try TestSigningKey.key()
        let destination = try scratch.populatedDestination()
        let tester = MigrationTester(
            exporter: NotesExporter(container: source), importer: NotesImporter(container: destination),
            appIdentifier: NotesApp.identifier, container: destination, workDirectory: work, signingKey: key,
            trustedSigners: [key.publicKey])
        let exported = try await tester.exportController.exportResources()
        let header = try await Extractor.withExtractor(at: .file(path: exported.archiveURL.path)) { $0.header }
        #expect(header.metadata["cairn.created"].flatMap(UInt64.init) != nil)

        let before = try ContainerSnapshot(of: destination)
        let parentNames = try siblings(of: destination.containerRootDirectory)
        let offset = UInt64(Double(exported.exportProperties.archiveBytes) * fraction)
        let flipped = await #expect(throws: CairnError.self) {
            try await tester.importController.importResources(from: exported.archiveURL, fault: .flipByte(atOffset: offset))
        }
        #expect(flipped?.path?.hasSuffix("-damaged.cairn") == true, "\(String(describing: flipped))")
        #expect(try ContainerSnapshot(of: destination) == before)
        #expect(try siblings(of: destination.containerRootDirectory) == parentNames)

        // Made by a tester that signs with another key, imported by the one trusting `key`.
        let forger = MigrationTester(
            exporter: NotesExporter(container: source), importer: NotesImporter(container: destination),
            appIdentifier: NotesApp.identifier, container: destination, workDirectory: try scratch.work("forger"),
            signingKey: try TestSigningKey.otherKey())
        let forged = try await forger.exportController.exportResources()
        let foreign = await #expect(throws: CairnError.self) {
            try await tester.importController.importResources(from: forged.archiveURL)
        }
        #expect(foreign?.code == .untrusted && foreign?.message.contains(Self.otherKeyID) == true, "\(String(describing: foreign))")
        #expect(try ContainerSnapshot(of: destination) == before)
        guard case .failure(let stored as CairnError)? = MigrationStatus.importStatus(in: destination) else {
            Issue.record("no failure status")
            return
        }
        #expect(stored.code == .untrusted)

        // The genuine export imports.
        try await tester.importController.importResources(from: exported.archiveURL)
        let imported = try TreeSnapshot(at: destination.documentsDirectory.path, directoryTimes: false)
        #expect(imported == (try TreeSnapshot(at: source.documentsDirectory.path, directoryTimes: false)))
        #expect(MigrationStatus.importStatus(in: destination)?.isSuccess == true)
    }

}
