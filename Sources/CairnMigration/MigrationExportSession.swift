import Cairn
import Foundation
import Glibc

/// Exports an app's data: runs its exporter into a Cairn archive whose header carries the data
/// version, the source platform, the app identifier, the size estimate and the compressible hint.
///
/// ```swift
/// let session = MigrationExportSession(exporter: NotesExporter(), appIdentifier: notesApp)
/// let properties = try await session.exportResources(to: URL(filePath: "/tmp/notes.cairn"))
/// ```
///
/// Before a byte is written to a file, the destination's free space is checked against the
/// exporter's ``ResourcesExportingWithOptions/resourcesSizeEstimate``; the estimate is also the
/// progress total. The archive appears only when complete (`FileSink`); after an error or a
/// cancellation nothing is left at the destination but `<path>.partial`.
///
/// - Throws: `CairnError` naming the archive, what the exporter throws, or `CancellationError`.
public struct MigrationExportSession<Exporter: ResourcesExportingWithOptions> {
    /// The app's exporter.
    public var exporter: Exporter
    /// The exporting app, stored in the header.
    public var appIdentifier: MigrationAppIdentifier
    /// Chunking, compression, backpressure and worker settings; the session sets the header
    /// fields (version, platform, app identifier, size estimate, compressibility).
    public var configuration: Archiver.Configuration
    /// The maker's key: when set, the export is signed with it (`Spec/0004-trusted-archives.md
    /// §3`, format 2.2; it becomes the archiver's `Archiver.Configuration.signingKey`) and its
    /// header records the export's creation time under the metadata key `cairn.created`
    /// (nanoseconds since 1970, UTC, in decimal: `Spec/0004 §7.1`), which an import's rollback
    /// guard compares (``MigrationImportSession/allowOlder``). Nil (the default): the
    /// configuration's own `signingKey`, usually none.
    ///
    /// The importing device trusts the matching public key through
    /// ``MigrationImportSession/trustedSigners``. Encrypting the export for the destination is
    /// ``recipients``.
    public var signingKey: SigningKey?
    /// The destination device's age X25519 recipients (`age1…`, `AgeRecipient`): when not
    /// empty, the export is encrypted for them (`Spec/0004-trusted-archives.md §7.4`, format
    /// 3.0; it becomes the archiver's `Archiver.Configuration.encryption`, replacing the
    /// configuration's own). Signed and encrypted together, the signature is inside the
    /// sealed blocks, and the chunk id and chunker keys are derived from ``signingKey``, so two
    /// exports of one maker share chunk ids (`Spec/0004 §6.5`). Empty (the default): the
    /// configuration's own `encryption`, usually none.
    ///
    /// The importing device opens the export with the matching identity through
    /// ``MigrationImportSession/decryption``.
    public var recipients: [AgeRecipient] = []
    /// The maker's key file (`MakerKey`, `cairn key generate --maker`) for an encrypted export
    /// that is not signed: the chunk id and chunker keys are derived from it instead of from
    /// ``signingKey`` (`Spec/0004-trusted-archives.md §6.5`), so that two exports of one maker
    /// share chunk ids and a seeded fetch of the next one downloads only what changed. Without
    /// it or a signing key, each encrypted export gets keys of its own. Used only with
    /// ``recipients``.
    public var makerKey: MakerKey?
    /// The creation time a signed export records, in nanoseconds since 1970; nil: the clock when
    /// ``archiverConfiguration`` is read (for tests).
    package var creationTime: UInt64?

    /// A session for `exporter`.
    public init(exporter: Exporter, appIdentifier: MigrationAppIdentifier, configuration: Archiver.Configuration = Archiver.Configuration()) {
        self.exporter = exporter
        self.appIdentifier = appIdentifier
        self.configuration = configuration
    }

    /// The configuration the archiver gets: ``configuration`` with the exporter's header fields,
    /// ``recipients`` when given, and, when signing, ``signingKey`` and the creation time (`cairn.created`, taken from the
    /// clock each time this is read).
    public var archiverConfiguration: Archiver.Configuration {
        var configuration = self.configuration
        if let signingKey { configuration.signingKey = signingKey }
        if !recipients.isEmpty { configuration.encryption = ArchiveEncryption(recipients: recipients, makerKey: makerKey) }
        if configuration.signingKey != nil {
            configuration.metadata[ExportCreationTime.metadataKey] = String(creationTime ?? ExportCreationTime.now())
        }
        configuration.resourcesVersion = exporter.resourcesVersion
        configuration.sourcePlatform = appIdentifier.platform.rawValue
        configuration.appIdentifier = appIdentifier.bundleIdentifier
        configuration.sizeEstimate = UInt64(max(0, exporter.resourcesSizeEstimate))
        configuration.isCompressible = exporter.resourcesCompressible
        if !appIdentifier.storeIdentifier.rawValue.isEmpty {
            configuration.metadata[MigrationAppIdentifier.storeMetadataKey] = appIdentifier.storeIdentifier.rawValue
        }
        return configuration
    }

    /// Exports into the file at `archiveURL`, which appears only when complete.
    ///
    /// - Parameters:
    ///   - archiveURL: a `file:` URL (another scheme is refused with `.invalidArgument`); the
    ///     archive is written to `<path>.partial` until complete.
    ///   - request: passed to the exporter (the destination platform and options).
    ///   - overwrite: whether an existing file at `archiveURL` may be replaced.
    ///   - progress: receives the content bytes appended, out of the size estimate.
    /// - Returns: the export's properties.
    /// - Throws: `.limitExceeded` when the destination has less free space than the size
    ///   estimate; `.alreadyExists`; `.busy`; `.io`; what the exporter throws; `CancellationError`.
    ///   Every `CairnError` names the archive.
    nonisolated(nonsending) public func exportResources(
        to archiveURL: URL, request: MigrationRequestWithOptions<Exporter.OptionsType> = MigrationRequestWithOptions(),
        overwrite: Bool = false, progress: Progress? = nil
    ) async throws -> ExportProperties {
        // One reading of a URL, the archive location's: an http(s) or s3 URL is not taken for a
        // path of the same text.
        guard case .file(let path) = try ArchiveLocation(archiveURL) else {
            throw CairnError(
                .invalidArgument, "an export is written to a file: URL (a stream: exportResources(to: FileHandle))",
                path: archiveURL.absoluteString)
        }
        do {
            try checkFreeSpace(for: path)
            return try await exportResources(to: FileSink(writingTo: .file(path: path), overwrite: overwrite), name: path, request: request, progress: progress)
        } catch let error as CairnError {
            throw error.naming(path)
        }
    }

    /// Exports as a stream into `output` (a pipe, a socket, a file opened for writing), with no
    /// free-space check; the handle stays open. An import reads it with
    /// ``MigrationImportSession/importResources(from:name:progress:)``.
    ///
    /// - Parameters:
    ///   - output: where the archive's bytes go, in order.
    ///   - name: how errors name the archive.
    ///   - request: passed to the exporter (the destination platform and options).
    ///   - progress: receives the content bytes appended, out of the size estimate.
    /// - Throws: as ``exportResources(to:name:request:progress:)``.
    nonisolated(nonsending) public func exportResources(
        to output: FileHandle, name: String = "<output>",
        request: MigrationRequestWithOptions<Exporter.OptionsType> = MigrationRequestWithOptions(), progress: Progress? = nil
    ) async throws -> ExportProperties {
        try await exportResources(to: FileHandleSink(output, name: name), name: name, request: request, progress: progress)
    }

    /// Exports into any sink (a pipe, a socket, a transfer), with no free-space check.
    ///
    /// - Parameters:
    ///   - sink: where the archive's bytes go, in order.
    ///   - name: how errors name the archive, for example `"<output>"`.
    ///   - request: passed to the exporter (the destination platform and options).
    ///   - progress: receives the content bytes appended, out of the size estimate.
    /// - Throws: as ``exportResources(to:request:overwrite:progress:)``, without the space check.
    nonisolated(nonsending) public func exportResources(
        to sink: any ArchiveSink, name: String = "<output>",
        request: MigrationRequestWithOptions<Exporter.OptionsType> = MigrationRequestWithOptions(), progress: Progress? = nil
    ) async throws -> ExportProperties {
        let archiver: Archiver
        do {
            archiver = try Archiver(sink: sink, configuration: archiverConfiguration)
        } catch {
            throw error.naming(name)
        }
        if let progress {
            let total = Int64(max(1, exporter.resourcesSizeEstimate))
            progress.totalUnitCount = total
            progress.addChild(archiver.progress, withPendingUnitCount: total)
        }
        do {
            try Task.checkCancellation()
            try await exporter.exportResources(to: ResourcesArchiver(archiver), request: request)
            return try await archiver.finish()
        } catch {
            await archiver.abandon()
            throw (error as? CairnError)?.naming(name) ?? error
        }
    }

    /// Refuses an export the destination's file system has no room for.
    private func checkFreeSpace(for path: String) throws(CairnError) {
        let estimate = UInt64(max(0, exporter.resourcesSizeEstimate))
        guard estimate > 0 else { return }
        var info = statvfs()
        let directory = (path as NSString).deletingLastPathComponent
        guard statvfs(directory.isEmpty ? "." : directory, &info) == 0 else { return }
        let available = UInt64(info.f_bavail).multipliedReportingOverflow(by: UInt64(info.f_frsize))
        let free = available.overflow ? UInt64.max : available.partialValue
        if free < estimate {
            throw CairnError(
                .limitExceeded, "not enough free space for the export: about \(estimate) bytes needed, \(free) available",
                path: path)
        }
    }
}
