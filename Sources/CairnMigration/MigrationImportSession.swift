import Cairn
import Foundation
import Glibc

/// Imports an exported archive into an app's container, all or nothing, and records the
/// outcome in ``MigrationStatus``.
///
/// ```swift
/// let session = MigrationImportSession(importer: NotesImporter(), container: container)
/// try await session.importResources(fromArchiveAt: URL(filePath: "/tmp/notes.cairn"))
/// ```
///
/// The steps, in order:
/// 1. Lock out other imports into the same container (`flock(2)` on the empty file
///    `<parent>/.<root name>.cairn-import.lock`, left in place; a second import throws
///    `.busy`), and finish an import a killed process left behind (see ``MigrationDataContainer``).
/// 2. Read the archive's header before anything is written (a file: its header and manifest;
///    a stream: its prelude and header record) and build the ``ResourcesImportRequest``;
///    ``acceptRequest`` may refuse it there. With ``trustedSigners``, the archive's signature is
///    verified first (a file: the root signature; a stream: the signature after commit 0, which
///    covers the header), so the request and ``acceptRequest`` see only signed data, and the
///    rollback guard (``allowOlder``) runs before ``acceptRequest``.
/// 3. Verify and extract the archive into `<parent>/.<root name>.cairn-import-<id>/resources`
///    with Cairn's extractor (all or nothing, every chunk checked).
/// 4. Move the container's directories aside (one `rename(2)` each, same file system), create
///    the root again, empty, and leave the other directories absent, so the importer can move
///    whole directories into place (see ``ResourcesImporting``); call
///    ``ResourcesImporting/importResources(at:request:)`` with the extracted URL.
/// 5. Success: record `.success`, then remove what was moved aside. Failure (extraction, the
///    importer, cancellation): put the container back exactly as it was (the root's times
///    too), record `.failure` with the error, rethrow. The extracted copy is removed either way.
///
/// - Throws: `CairnError` naming the archive, what the importer throws, or
///   `CancellationError` (recorded as a failure, never swallowed).
public final class MigrationImportSession<Importer: ResourcesImporting> {
    /// The app's importer.
    public let importer: Importer
    /// Where the data goes.
    public let container: MigrationDataContainer
    /// Options for the extraction (limits, free-space check); `existingFiles` and `resume` are
    /// ignored (the extraction directory is always new).
    public var extractionOptions = ExtractionOptions()
    /// Called with the request read from the header, before anything is written; throw to
    /// refuse the archive (for example an unknown ``ResourcesImportRequest/sourceVersion``).
    public var acceptRequest: ((ResourcesImportRequest) throws -> Void)?
    /// A request to hand the importer instead of the one read from the header (for tests).
    package var requestOverride: ResourcesImportRequest?
    /// The public keys whose signature an archive must carry (`Spec/0004-trusted-archives.md
    /// §7.2`); empty (the default): any archive, signed or not, and nothing is checked.
    ///
    /// When not empty, every import (a file, a URL, a stream) reads the archive with these keys,
    /// as `Extractor(at:trustedKeys:)` does: an archive that is not signed, or is signed by
    /// another key, is refused with `CairnError` `.untrusted` naming the key it carries (or
    /// that it is not signed) and the keys wanted; one whose signature does not verify with
    /// `.checksumMismatch`. Refused, nothing is extracted and the container is untouched (only
    /// the failure status is recorded). ``acceptRequest`` and the importer see only a header a
    /// trusted signature covers.
    public var trustedSigners: [PublicKey] = []
    /// Whether an archive signed by the same trusted key as the last import, but created before
    /// it, may be imported (`Spec/0004 §7.3`, the rollback guard); default false: such an archive,
    /// or one of that key without a creation time, is refused with `.untrusted` "… is older than
    /// the last import: created X, last imported Y". Applies only with ``trustedSigners``.
    public var allowOlder = false
    /// The identities that open an encrypted archive (`Spec/0004-trusted-archives.md §7.4`):
    /// the destination device's age X25519 identities (`AgeIdentity`), or the passphrase of an
    /// archive made with one. Empty (the default): only a plain archive is imported.
    ///
    /// Every import (a file, a URL, a stream) reads the archive with it, as
    /// `Extractor(at:trustedKeys:decryption:)` does: an encrypted archive without identities,
    /// one that no identity given opens, and a plain archive when identities are given (what
    /// stripping the encryption would leave, `Spec/0004 §6.2`) are refused with `CairnError`
    /// `.untrusted`; a sealed block that does not open with `.checksumMismatch`. Refused,
    /// nothing is extracted and the container is untouched (only the failure status is
    /// recorded). With ``trustedSigners`` too, the signature is checked inside the sealed
    /// blocks, as for a plain archive.
    public var decryption = ArchiveDecryption()

    /// A session importing into `container`.
    public init(importer: Importer, container: MigrationDataContainer) {
        self.importer = importer
        self.container = container
    }

    /// Imports the complete archive at `location`: a file, an `http(s)` URL or an S3 object
    /// (read at random over range requests, every chunk checked, as `Extractor` does).
    ///
    /// - Parameters:
    ///   - location: where the archive is.
    ///   - progress: gets 80 units for the extraction and 20 for the importer.
    /// - Returns: the request the importer was called with.
    /// - Throws: `.invalidArgument` for an archive that names no app; `.notFound`, `.truncated`,
    ///   `.corrupted`, `.checksumMismatch` for a missing, incomplete or damaged archive;
    ///   `.limitExceeded`; `.io`; `.network` and `.httpStatus` for a remote one; what
    ///   ``acceptRequest`` or the importer throws; `CancellationError`. With ``trustedSigners``:
    ///   `.untrusted` for an archive not signed by one of them, or older than the last import
    ///   (``allowOlder``); `.checksumMismatch` for a signature that does not verify. With or
    ///   without ``decryption``: `.untrusted` for an encrypted archive it does not open, or a
    ///   plain one when it is not empty; `.checksumMismatch` for a damaged sealed block.
    @discardableResult
    nonisolated(nonsending) public func importResources(fromArchiveAt location: ArchiveLocation, progress: Progress? = nil)
        async throws -> ResourcesImportRequest
    {
        let name = location.description
        return try await perform(archive: name, progress: progress) { destination, extraction, check in
            // With trusted keys the reader verified the root signature before it returns, so
            // the header and the signer below are the signed ones (`Spec/0004 §4.3`).
            let extractor = try await Extractor(at: location, trustedKeys: self.trustedSigners, decryption: self.decryption)
            defer { extractor.close() }
            try check(extractor.header, self.trustedSigners.isEmpty ? nil : try extractor.signingKeyID())
            extraction.addChild(extractor.progress, withPendingUnitCount: 1)
            try await extractor.extractAll(to: destination, options: self.effectiveOptions)
        }
    }

    /// Imports the archive at `archiveURL` (a `file:`, `http(s):` or `s3:` URL): forwards to
    /// `importResources(fromArchiveAt: ArchiveLocation(archiveURL), progress:)`.
    ///
    /// - Throws: as that method; `.invalidArgument` for another scheme.
    @discardableResult
    nonisolated(nonsending) public func importResources(fromArchiveAt archiveURL: URL, progress: Progress? = nil) async throws
        -> ResourcesImportRequest
    {
        try await importResources(fromArchiveAt: ArchiveLocation(archiveURL), progress: progress)
    }

    /// Imports an archive read once, front to back, from `input` (a pipe, a socket).
    ///
    /// With ``trustedSigners``, the request is built, and ``acceptRequest`` called, only once the
    /// signature after commit 0 verified (it covers the header); the rest is held back until the
    /// signatures that cover it verified, and nothing is imported before the root signature did.
    ///
    /// - Throws: as `importResources(fromArchiveAt:progress:)`; `.truncated` when the stream
    ///   ends early.
    @discardableResult
    nonisolated(nonsending) public func importResources(from input: FileHandle, name: String = "<input>", progress: Progress? = nil)
        async throws -> ResourcesImportRequest
    {
        try await perform(archive: name, progress: progress) { destination, extraction, check in
            let streamProgress = Progress(totalUnitCount: 0)
            extraction.addChild(streamProgress, withPendingUnitCount: 1)
            // An encrypted stream is opened (its envelope and key block read) on a thread of its
            // own, which then delivers the inner archive through a pipe; a plain one is `input`.
            let decryption = self.decryption
            let outer = SequentialArchiveBytes(
                descriptor: FileDescriptor(rawValue: input.fileDescriptor, path: name), finish: {}, cancel: {})
            let inner = try await DedicatedThread.run { () throws(CairnError) in try decryption.open(outer, name: name) }
            do {
                _ = try await Extractor.extractStream(
                    from: FileHandle(fileDescriptor: inner.descriptor.rawValue, closeOnDealloc: false), to: destination,
                    options: self.effectiveOptions, progress: streamProgress, trustedKeys: self.trustedSigners,
                    keying: inner.keying, checkingSignedHeader: check)
                try inner.finish()
            } catch {
                throw Extractor.ending(inner, after: error, path: name)
            }
        }
    }

    private var effectiveOptions: ExtractionOptions {
        var options = extractionOptions
        options.existingFiles = .refuse
        options.resume = false
        return options
    }

    /// The request an archive's header describes.
    ///
    /// - Throws: `.invalidArgument` naming the archive when the header names no app.
    public static func request(from header: ArchiveHeader, archive: String) throws(CairnError) -> ResourcesImportRequest {
        guard !header.appIdentifier.isEmpty else {
            throw CairnError(.invalidArgument, "not an app migration archive: its header names no app", path: archive)
        }
        let app = MigrationAppIdentifier(
            platform: MigrationPlatform(header.sourcePlatform), bundleIdentifier: header.appIdentifier,
            storeIdentifier: .init(header.metadata[MigrationAppIdentifier.storeMetadataKey] ?? ""))
        return ResourcesImportRequest(sourceAppIdentifier: app, sourceVersion: header.resourcesVersion)
    }

    /// Opens (creating it, empty, when missing) and locks the lock file beside the container
    /// with `flock(2)`; closing the descriptor releases it.
    ///
    /// - Throws: `.busy` when another import into the same container holds it; `.io`.
    private static func lockImports(_ path: String) throws(CairnError) -> Int32 {
        let directory = (path as NSString).deletingLastPathComponent
        if access(directory, F_OK) != 0 {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            } catch {
                throw DurableFile.failure("cannot create the directory", directory)
            }
        }
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw DurableFile.failure("cannot open the import lock", path) }
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            if errno == EINTR { continue }
            let value = errno
            close(fd)
            if value == EWOULDBLOCK {
                throw CairnError(.busy, "another import into this container is running", path: path)
            }
            throw DurableFile.failure("cannot lock", path, value)
        }
        return fd
    }

    /// Extracts into the URL, calling the check with the header and the key whose signature
    /// verified (nil without trusted signers) before anything is written.
    private typealias Extraction = nonisolated(nonsending) (URL, Progress, (ArchiveHeader, SigningKeyID?) throws -> Void) async throws
        -> Void

    nonisolated(nonsending) private func perform(archive: String, progress: Progress?, extract: Extraction) async throws
        -> ResourcesImportRequest
    {
        let importID = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let root = container.containerRootDirectory.path(percentEncoded: false).trimmingSlashes
        let parent = (root as NSString).deletingLastPathComponent
        let work = parent + "/.\((root as NSString).lastPathComponent).cairn-import-" + importID
        let resources = URL(filePath: work + "/resources", directoryHint: .isDirectory)
        // One import at a time per container: the lock is held until this returns.
        let lock = try Self.lockImports(parent + "/.\((root as NSString).lastPathComponent).cairn-import.lock")
        defer { close(lock) }
        // First finish what a killed import left, so the times kept are the restored root's.
        try ContainerGuard.recoverInterrupted(container)
        // The rollback guard's memory (`Spec/0004 §7.3`), carried into every status written; an
        // unreadable status file remembers nothing.
        let lastSigned = (try? StoredImportStatus.read(in: container))?.lastSignedImport
        var signed: SignedImportRecord?
        var rootInfo = stat()
        let rootTimes = lstat(root, &rootInfo) == 0 ? [rootInfo.st_atim, rootInfo.st_mtim] : nil
        let extraction = Progress(totalUnitCount: 1)
        if let progress {
            progress.totalUnitCount = 100
            progress.addChild(extraction, withPendingUnitCount: 80)
            progress.addChild(importer.resourcesImportProgress, withPendingUnitCount: 20)
        }
        var request: ResourcesImportRequest?
        var guarded: ContainerGuard?
        do {
            try Task.checkCancellation()
            try await extract(resources, extraction) { header, signer in
                let read = try Self.request(from: header, archive: archive)
                signed = try SignedImportRecord.admit(header, signer: signer, after: lastSigned, allowOlder: self.allowOlder)
                try self.acceptRequest?(read)
                request = self.requestOverride ?? read
                guard mkdir(work, 0o700) == 0 else { throw DurableFile.failure("cannot create the import directory", work) }
            }
            guard let request else { throw CairnError(.corrupted, "the archive has no header", path: archive) }
            try Task.checkCancellation()
            guarded = try ContainerGuard.moveAside(container, importID: importID)
            try await importer.importResources(at: resources, request: request)
            try StoredImportStatus(.success, importID: importID, request: request, lastSignedImport: signed ?? lastSigned)
                .write(in: container)
            guarded?.commit()
            try? FileManager.default.removeItem(atPath: work)
            return request
        } catch {
            let failure = (error as? CairnError)?.naming(archive) ?? error
            var restoreFailure: CairnError?
            if let guarded {
                do {
                    try guarded.restore()
                } catch let restoreError {
                    restoreFailure = restoreError
                }
            }
            try? FileManager.default.removeItem(atPath: work)
            try? StoredImportStatus(.failure(failure), importID: importID, request: request, lastSignedImport: lastSigned)
                .write(in: container)
            if let rootTimes {
                _ = rootTimes.withUnsafeBufferPointer { utimensat(AT_FDCWD, root, $0.baseAddress, AT_SYMLINK_NOFOLLOW) }
            }
            if var restoreFailure {
                restoreFailure.message += "; the import had failed: \(failure)"
                throw restoreFailure
            }
            throw failure
        }
    }
}
