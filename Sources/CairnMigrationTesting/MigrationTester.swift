import Cairn
import CairnMigration
import Foundation
import Synchronization

/// Runs an app's exporter and importer the way the migration system does, for unit tests:
/// export to an archive, import it into a container, read the stored status, and inject faults.
///
/// ```swift
/// let tester = MigrationTester(
///     exporter: NotesExporter(container: source), importer: NotesImporter(container: destination),
///     appIdentifier: notesApp, container: destination, workDirectory: scratch)
/// let exported = try await tester.exportController.exportResources()
/// try await tester.importController.importResources(from: exported.archiveURL)
/// #expect(MigrationStatus.importStatus(in: destination)?.isSuccess == true)
/// ```
///
/// Archives and extracted copies go to `workDirectory`, numbered in order.
///
/// Signed exports (`Spec/0004-trusted-archives.md §7`): give `signingKey` to sign every export
/// (the tester then checks each export with the key's public half as it extracts it), and
/// `trustedSigners` to import only archives one of those keys signed, as
/// ``CairnMigration/MigrationImportSession/trustedSigners`` does. A tampered archive (the
/// `.flipByte(atOffset:)` fault, or an export of a tester signing with another key) must then
/// be refused with the container untouched.
///
/// Encrypted exports (`Spec/0004 §7.4`): give `recipients` to encrypt every export for them,
/// and `decryption` (their identities) with which the tester reads its own exports back and
/// every import opens them, as ``CairnMigration/MigrationImportSession/decryption`` does. A
/// sealed block with a flipped byte must then be refused with the container untouched.
public final class MigrationTester<Exporter: ResourcesExportingWithOptions & Sendable, Importer: ResourcesImporting & Sendable>: Sendable {
    /// Runs the exporter.
    public let exportController: AppExportController
    /// Runs the importer.
    public let importController: AppImportController

    /// A tester exporting with `exporter` as `appIdentifier` and importing with `importer`
    /// into `container`; its files go to `workDirectory` (which must exist).
    public init(
        exporter: Exporter, importer: Importer, appIdentifier: MigrationAppIdentifier, container: MigrationDataContainer,
        workDirectory: URL, configuration: Archiver.Configuration = Archiver.Configuration(), signingKey: SigningKey? = nil,
        trustedSigners: [PublicKey] = [], recipients: [AgeRecipient] = [], decryption: ArchiveDecryption = ArchiveDecryption()
    ) {
        let counter = Counter()
        exportController = AppExportController(
            exporter: exporter, appIdentifier: appIdentifier, workDirectory: workDirectory, configuration: configuration,
            signingKey: signingKey, recipients: recipients, decryption: decryption, counter: counter)
        importController = AppImportController(
            importer: importer, container: container, workDirectory: workDirectory, trustedSigners: trustedSigners,
            decryption: decryption, counter: counter)
    }

    /// What an export produced.
    public struct ResourcesExportResult: Sendable {
        /// The archive's properties.
        public var exportProperties: ExportProperties
        /// The archive file.
        public var archiveURL: URL
        /// The archive extracted again (verified), as an importer would receive it.
        public var extractedResourcesURL: URL
    }

    final class Counter: Sendable {
        private let value = Mutex(0)
        func next() -> Int { value.withLock { $0 += 1; return $0 } }
    }

    /// Runs the exporter into archives in the work directory.
    public final class AppExportController: Sendable {
        let exporter: Exporter
        let appIdentifier: MigrationAppIdentifier
        let workDirectory: URL
        let configuration: Archiver.Configuration
        let signingKey: SigningKey?
        let recipients: [AgeRecipient]
        let decryption: ArchiveDecryption
        let counter: Counter

        init(
            exporter: Exporter, appIdentifier: MigrationAppIdentifier, workDirectory: URL, configuration: Archiver.Configuration,
            signingKey: SigningKey?, recipients: [AgeRecipient], decryption: ArchiveDecryption, counter: Counter
        ) {
            self.recipients = recipients
            self.decryption = decryption
            self.exporter = exporter
            self.appIdentifier = appIdentifier
            self.workDirectory = workDirectory
            self.configuration = configuration
            self.signingKey = signingKey
            self.counter = counter
        }

        /// Tells the exporter to export, through ``MigrationExportSession``, into
        /// `<work>/export-<n>.cairn`, then extracts it to `<work>/export-<n>-extracted`.
        ///
        /// - Parameters:
        ///   - request: the request the exporter receives (default: to Linux, no options).
        ///   - progress: receives the export's progress.
        ///   - fault: `.cancel(afterBytes:)` or `.diskFull(afterBytes:)` break the export (it
        ///     throws; `<archive>.partial` stays for an import to refuse); `.flipByte(atOffset:)`
        ///     damages the finished archive after it was extracted.
        /// - Throws: what the session throws, `CancellationError` for a cancel fault.
        public func exportResources(
            request: MigrationRequestWithOptions<Exporter.OptionsType>? = nil, progress: Progress? = nil, fault: MigrationFault? = nil
        ) async throws -> ResourcesExportResult {
            let number = counter.next()
            let archive = workDirectory.appending(path: "export-\(number).cairn")
            let extracted = workDirectory.appending(path: "export-\(number)-extracted", directoryHint: .isDirectory)
            var session = MigrationExportSession(exporter: exporter, appIdentifier: appIdentifier, configuration: configuration)
            session.signingKey = signingKey
            session.recipients = recipients
            let request = request ?? MigrationRequestWithOptions()
            let properties: ExportProperties
            switch fault?.kind {
            case .cancel(let limit)?, .diskFull(let limit)?:
                let fails: Bool = if case .diskFull? = fault?.kind { true } else { false }
                let handle = TaskHandle()
                let path = archive.path(percentEncoded: false)
                let task = Task {
                    let sink = FaultInjectingSink(base: try FileSink(writingTo: .file(path: path)), limit: limit, failsWrites: fails) { handle.cancel() }
                    return try await session.exportResources(to: sink, name: path, request: request, progress: progress)
                }
                handle.set(task)
                properties = try await task.value
            default:
                properties = try await session.exportResources(to: archive, request: request, progress: progress)
            }
            let trusted = signingKey.map { [$0.publicKey] } ?? []
            try await Extractor.withExtractor(at: .file(path: archive.path(percentEncoded: false)), trustedKeys: trusted, decryption: decryption) { extractor in
                try await extractor.extractAll(to: extracted)
            }
            if case .flipByte(let offset)? = fault?.kind {
                try MigrationFaults.flipByte(at: offset, in: archive)
            }
            return ResourcesExportResult(exportProperties: properties, archiveURL: archive, extractedResourcesURL: extracted)
        }
    }

    /// Runs the importer on archives, through ``MigrationImportSession``.
    public final class AppImportController: Sendable {
        let importer: Importer
        let container: MigrationDataContainer
        let workDirectory: URL
        let trustedSigners: [PublicKey]
        let decryption: ArchiveDecryption
        let counter: Counter
        private let completions = Mutex<[@Sendable (MigrationStatus) -> Void]>([])

        init(
            importer: Importer, container: MigrationDataContainer, workDirectory: URL, trustedSigners: [PublicKey],
            decryption: ArchiveDecryption, counter: Counter
        ) {
            self.decryption = decryption
            self.importer = importer
            self.container = container
            self.workDirectory = workDirectory
            self.trustedSigners = trustedSigners
            self.counter = counter
        }

        /// Calls `handler` with the stored status after every import this controller runs,
        /// successful or not (as the app's next launch would read it).
        public func registerImportCompletion(with handler: @escaping @Sendable (MigrationStatus) -> Void) {
            completions.withLock { $0.append(handler) }
        }

        /// Imports the archive at `archiveURL` into the container.
        ///
        /// - Parameters:
        ///   - importRequest: the request the importer receives instead of the header's (for
        ///     example to claim an older source version); nil uses the header's.
        ///   - progress: receives the import's progress.
        ///   - fault: `.cancel(afterBytes:)` cancels the import once the entries extracted
        ///     hold that many content bytes; `.flipByte(atOffset:)` imports a damaged copy.
        /// - Throws: what the session throws.
        public func importResources(
            from archiveURL: URL, importRequest: ResourcesImportRequest? = nil, progress: Progress? = nil,
            fault: MigrationFault? = nil
        ) async throws {
            var source = archiveURL
            let session = MigrationImportSession(importer: importer, container: container)
            session.requestOverride = importRequest
            session.trustedSigners = trustedSigners
            session.decryption = decryption
            let handle = TaskHandle()
            switch fault?.kind {
            case .flipByte(let offset)?:
                source = workDirectory.appending(path: "import-\(counter.next())-damaged.cairn")
                try FileManager.default.copyItem(at: archiveURL, to: source)
                try MigrationFaults.flipByte(at: offset, in: source)
            case .cancel(let limit)?:
                let seen = Mutex(0)
                session.extractionOptions.onEntry = { entry in
                    let reached = seen.withLock { total in
                        let before = total
                        total += Int(clamping: entry.size)
                        return before < limit && total >= limit
                    }
                    if reached { handle.cancel() }
                }
            default:
                break
            }
            let task = Task { [source] in
                try await session.importResources(fromArchiveAt: source, progress: progress)
            }
            handle.set(task)
            let result = await task.result
            let status = MigrationStatus.importStatus(in: container) ?? .failure(CairnError(.notFound, "no import status was recorded"))
            for handler in completions.withLock({ $0 }) { handler(status) }
            _ = try result.get()
        }
    }
}
