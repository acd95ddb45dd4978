import Cairn
import CairnMigrationTesting
import CairnTestSupport
import Foundation
import Synchronization
import Testing

@testable import CairnMigration
@testable import cairn_migration_sample

/// Encrypted exports and decrypting imports (`Spec/0004-trusted-archives.md §7.4`), by every
/// import path: a file, a stream from a `FileHandle`, and HTTP (nginx).
@Suite("Migration: encrypted exports, decrypting imports")
struct MigrationEncryptedImportTests {
    enum ImportPath: String, CaseIterable, CustomStringConvertible, Sendable {
        case file, stream, http
        var description: String { rawValue }
    }

    /// The destination device's identity, and another device's (fixed secrets: deterministic).
    static func destinationIdentity() throws -> AgeIdentity { try AgeIdentity(secretBytes: [UInt8](repeating: 0x17, count: 32)) }
    static func otherIdentity() throws -> AgeIdentity { try AgeIdentity(secretBytes: [UInt8](repeating: 0x42, count: 32)) }

    final class AcceptLog: Sendable {
        private let requests = Mutex<[ResourcesImportRequest]>([])
        func record(_ request: ResourcesImportRequest) { requests.withLock { $0.append(request) } }
        var all: [ResourcesImportRequest] { requests.withLock { $0 } }
    }

    /// Exports `source` into `url`, signed with `key` and encrypted for `recipients` (each
    /// optional).
    private func export(_ source: MigrationDataContainer, to url: URL, key: SigningKey?, recipients: [AgeRecipient]) async throws {
        var session = MigrationExportSession(exporter: NotesExporter(container: source), appIdentifier: NotesApp.identifier)
        session.signingKey = key
        session.recipients = recipients
        session.creationTime = 1_765_000_000_000_000_001
        _ = try await session.exportResources(to: url)
    }

    private func session(
        _ destination: MigrationDataContainer, trusting signers: [PublicKey], identities: [AgeIdentity], log: AcceptLog
    ) -> MigrationImportSession<NotesImporter> {
        let session = MigrationImportSession(importer: NotesImporter(container: destination), container: destination)
        session.trustedSigners = signers
        session.decryption = ArchiveDecryption(identities: identities)
        session.acceptRequest = { request in
            log.record(request)
            try NotesImporter.accept(request)
        }
        return session
    }

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
            return try await session.importResources(fromArchiveAt: url)
        }
    }

    @Test("§6.5, §7.4: unsigned encrypted exports made with one maker key file share their chunk id and chunker keys (a seeded fetch can use the earlier one); without it each export gets keys of its own")
    func makerKeyExports() async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let source = try scratch.source(count: 2, seed: 9)
        let identity = try Self.destinationIdentity()
        let maker = try MakerKey(secretBytes: [UInt8](repeating: 0x5A, count: 32))
        func exportKeys(_ name: String, makerKey: MakerKey?) async throws -> (idKey: [UInt8], chunkerKey: [UInt8]) {
            let archive = try scratch.work().appending(path: name)
            var session = MigrationExportSession(exporter: NotesExporter(container: source), appIdentifier: NotesApp.identifier)
            session.recipients = [identity.recipient]
            session.makerKey = makerKey
            _ = try await session.exportResources(to: archive)
            let opened = try ArchiveDecryption(identities: [identity]).open(LocalArchiveSource(path: archive.path))
            defer { opened.close() }
            let sealed = try #require(opened as? SealedArchiveSource)
            return (sealed.secrets.idKey, sealed.secrets.chunkerKey)
        }
        let first = try await exportKeys("first.cairn", makerKey: maker)
        let second = try await exportKeys("second.cairn", makerKey: maker)
        let keyless = try await exportKeys("keyless.cairn", makerKey: nil)
        #expect(first.idKey == second.idKey && first.chunkerKey == second.chunkerKey)
        #expect(first.idKey != keyless.idKey && first.chunkerKey != keyless.chunkerKey)
    }

    @Test("§7.4: a signed and encrypted export imports with the destination's identity, by file, stream and HTTP", arguments: ImportPath.allCases)
    func encryptedRoundTrip(path: ImportPath) async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let source = try scratch.source(count: 3, seed: 5)
        let archive = try scratch.work().appending(path: "sealed.cairn")
        let key = try TestSigningKey.key()
        let identity = try Self.destinationIdentity()
        try await export(source, to: archive, key: key, recipients: [identity.recipient])

        // Format 3.0: without an identity the archive is refused, and no note's text is in its bytes.
        let plainRead = await #expect(throws: CairnError.self) {
            _ = try await Extractor(at: .file(path: archive.path), trustedKeys: [key.publicKey])
        }
        #expect(plainRead?.code == .untrusted)
        let bytes = try Data(contentsOf: archive)
        let note = try Data(contentsOf: source.documentsDirectory.appending(path: "note-0.txt"))
        #expect(bytes.range(of: note.prefix(32)) == nil, "a note's text is readable in the sealed archive")

        let destination = try scratch.populatedDestination()
        let log = AcceptLog()
        let request = try await runImport(
            session(destination, trusting: [key.publicKey], identities: [identity], log: log), archive, by: path)
        #expect(request.sourceAppIdentifier == NotesApp.identifier)
        #expect(log.all == [request])
        let imported = try TreeSnapshot(at: destination.documentsDirectory.path, directoryTimes: false)
        #expect(imported == (try TreeSnapshot(at: source.documentsDirectory.path, directoryTimes: false)))
        #expect(MigrationStatus.importStatus(in: destination)?.isSuccess == true)
        #expect(try StoredImportStatus.read(in: destination)?.lastSignedImport?.signer == "5345544E52494143")
    }

    /// What each refusal case exports and what the import is given.
    enum Refusal: String, CaseIterable, CustomStringConvertible, Sendable {
        /// Encrypted, imported without identities.
        case noIdentity
        /// Encrypted for another device.
        case wrongIdentity
        /// Plain, imported with identities: a downgrade (`Spec/0004 §6.2`).
        case plainWithIdentity
        var description: String { rawValue }
    }

    @Test(
        "§7.4: an encrypted archive without identities, with the wrong one, and a plain one given identities are refused, untouched",
        arguments: Refusal.allCases, ImportPath.allCases)
    func refused(_ refusal: Refusal, path: ImportPath) async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let source = try scratch.source(count: 2)
        let archive = try scratch.work().appending(path: "refused.cairn")
        let identity = try Self.destinationIdentity()
        let recipients = refusal == .plainWithIdentity ? [] : [identity.recipient]
        try await export(source, to: archive, key: nil, recipients: recipients)
        let identities: [AgeIdentity] =
            switch refusal {
            case .noIdentity: []
            case .wrongIdentity: [try Self.otherIdentity()]
            case .plainWithIdentity: [identity]
            }
        let destination = try scratch.populatedDestination()
        let before = try ContainerSnapshot(of: destination)
        let parentNames = try siblings(of: destination.containerRootDirectory)
        let log = AcceptLog()
        let importer = session(destination, trusting: [], identities: identities, log: log)
        let thrown = await #expect(throws: CairnError.self) { try await runImport(importer, archive, by: path) }
        #expect(thrown?.code == .untrusted, "\(String(describing: thrown))")
        #expect(log.all.isEmpty, "acceptRequest saw \(log.all)")
        let after = try ContainerSnapshot(of: destination)
        #expect(after == before, "\(after.diff(before))")
        #expect(try siblings(of: destination.containerRootDirectory) == parentNames)
        guard case .failure(let stored as CairnError)? = MigrationStatus.importStatus(in: destination) else {
            Issue.record("no failure status")
            return
        }
        #expect(stored.code == .untrusted)
    }

    @Test("§7.4: the tester's signed and encrypted round trip; a flipped byte in a sealed block is refused, container untouched", arguments: [0.3, 0.6, 0.9])
    func testerEncryptedExport(flippedAt fraction: Double) async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let source = try scratch.source(count: 4, seed: 9)
        let work = try scratch.work()
        let key = try TestSigningKey.key()
        let identity = try Self.destinationIdentity()
        let destination = try scratch.populatedDestination()
        let tester = MigrationTester(
            exporter: NotesExporter(container: source), importer: NotesImporter(container: destination),
            appIdentifier: NotesApp.identifier, container: destination, workDirectory: work, signingKey: key,
            trustedSigners: [key.publicKey], recipients: [identity.recipient], decryption: ArchiveDecryption(identities: [identity]))
        let exported = try await tester.exportController.exportResources()
        let refusedPlain = await #expect(throws: CairnError.self) {
            _ = try await Extractor(at: .file(path: exported.archiveURL.path))
        }
        #expect(refusedPlain?.code == .untrusted, "the export is not encrypted")

        // The key block and envelope are the first bytes; a flip past them lands in a sealed block.
        let before = try ContainerSnapshot(of: destination)
        let parentNames = try siblings(of: destination.containerRootDirectory)
        let offset = UInt64(Double(exported.exportProperties.archiveBytes) * fraction)
        let flipped = await #expect(throws: CairnError.self) {
            try await tester.importController.importResources(from: exported.archiveURL, fault: .flipByte(atOffset: offset))
        }
        #expect(flipped?.code == .checksumMismatch || flipped?.code == .corrupted, "\(String(describing: flipped))")
        #expect(flipped?.path?.hasSuffix("-damaged.cairn") == true, "\(String(describing: flipped))")
        #expect(try ContainerSnapshot(of: destination) == before)
        #expect(try siblings(of: destination.containerRootDirectory) == parentNames)

        try await tester.importController.importResources(from: exported.archiveURL)
        let imported = try TreeSnapshot(at: destination.documentsDirectory.path, directoryTimes: false)
        #expect(imported == (try TreeSnapshot(at: source.documentsDirectory.path, directoryTimes: false)))
        #expect(MigrationStatus.importStatus(in: destination)?.isSuccess == true)
    }
}
