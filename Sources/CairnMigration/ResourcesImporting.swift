import Foundation

/// An app's importer: it receives the verified, extracted data of an export and moves it into
/// the app's container.
///
/// The import session calls ``importResources(at:request:)`` once, after the whole archive
/// verified, with the container's previous contents already moved aside. The importer finds the
/// ``MigrationDataContainer/containerRootDirectory`` empty and nothing else: the
/// ``MigrationDataContainer/documentsDirectory``, the
/// ``MigrationDataContainer/applicationSupportDirectory`` and the group directories do not
/// exist (their parent directories do). So it can move a whole extracted directory into place
/// (`FileManager.moveItem(at:to:)`, one `rename(2)`), or create a directory and fill it. If it
/// throws, the session puts the container back exactly as it was and records the failure in
/// ``MigrationStatus``.
public protocol ResourcesImporting {
    /// The importer's progress; the session adds it to the caller's progress.
    var resourcesImportProgress: Progress { get }

    /// Imports the data extracted at `importedDataURL` (a directory laid out as the exporter
    /// appended it; the session removes it afterwards, so move or copy what you keep).
    ///
    /// - Parameters:
    ///   - importedDataURL: the extracted data.
    ///   - request: the source app and its data version, from the archive header.
    /// - Throws: any error, to fail the import (the container is restored).
    nonisolated(nonsending) func importResources(at importedDataURL: URL, request: ResourcesImportRequest) async throws
}
