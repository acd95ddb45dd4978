import Cairn
import Foundation

/// The outcome of the last import into an app's container, for the app's next launch.
///
/// The import session records it in the container (``MigrationDataContainer/statusFileURL``,
/// a small JSON file written with `fsync` and `rename`), so it survives the importing process
/// and a reboot. A failed import into a container whose root did not exist leaves the root
/// holding only that file. At launch, check ``importStatus(in:)`` with the app's container;
/// after telling the user, call ``clearImportStatus(in:)``. The forms without a container,
/// ``importStatus`` and ``clearImportStatus()``, read ``MigrationDataContainer/current``, a
/// per-process global that nothing sets for the app (the import session does not): until the
/// app sets it, they answer nil and do nothing, whatever the container holds.
///
/// A failure read back from the file holds a `CairnError` with the recorded code, message,
/// path and offset, or `CancellationError` for a cancelled import; an importer's own error
/// comes back as a `CairnError` `.io` whose message starts "the importer failed" and whose
/// `cause` is the error's type.
public enum MigrationStatus: Sendable {
    /// Everything was imported.
    case success
    /// The import failed and the container was put back as it was; the error says why.
    case failure(any Error)

    /// The status in ``MigrationDataContainer/current``, or nil when no import completed there.
    /// An unreadable status file reads as a failure.
    ///
    /// - Important: Nil while ``MigrationDataContainer/current`` is nil, which it is until the
    ///   app sets it in this process (the import session does not), even when a status is
    ///   recorded. ``importStatus(in:)`` takes the container and needs no global.
    public static var importStatus: MigrationStatus? {
        guard let container = MigrationDataContainer.current else { return nil }
        return importStatus(in: container)
    }

    /// The status recorded in `container`, or nil when there is none. A status file that cannot
    /// be read or decoded reads as `.failure` with a `CairnError` naming it.
    public static func importStatus(in container: MigrationDataContainer) -> MigrationStatus? {
        do {
            return try StoredImportStatus.read(in: container)?.status
        } catch {
            return .failure(error)
        }
    }

    /// Removes the status from ``MigrationDataContainer/current``; does nothing while it is nil
    /// (see ``importStatus``), and ignores errors. ``clearImportStatus(in:)`` takes the container
    /// and throws.
    public static func clearImportStatus() {
        guard let container = MigrationDataContainer.current else { return }
        try? clearImportStatus(in: container)
    }

    /// Removes the status recorded in `container` (durably: the directory is synced). What the
    /// rollback guard remembers of the last signed import (``MigrationImportSession/allowOlder``)
    /// is kept: the file then records no outcome, and ``importStatus(in:)`` answers nil.
    ///
    /// - Throws: `CairnError` `.io` naming the file.
    public static func clearImportStatus(in container: MigrationDataContainer) throws(CairnError) {
        let path = container.statusFileURL.path(percentEncoded: false)
        if let stored = try? StoredImportStatus.read(in: container), let kept = stored.lastSignedImport {
            guard stored.status != nil else { return }
            return try StoredImportStatus(nil, importID: stored.importID, request: nil, lastSignedImport: kept).write(in: container)
        }
        if unlink(path) != 0 {
            if errno == ENOENT { return }
            throw DurableFile.failure("cannot remove the import status", path)
        }
        try DurableFile.syncDirectory((path as NSString).deletingLastPathComponent)
    }

    /// Whether this is ``success``.
    public var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }
}
