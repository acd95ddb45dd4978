import Cairn
import CairnMigration
import Foundation

/// The sample app's exporter: the notes in `Documents` and the settings in
/// `Application Support/settings.json`, in the layout of data version ``resourcesVersion``.
///
/// Layouts: "1" stores `notes/<name>.txt` and `settings.ini` (`key=value` lines, converted in
/// memory, never through a temporary file); "2" stores `Documents/` and `settings.json`; "3"
/// (current) stores `Documents/` and `Application Support/`.
struct NotesExporter: ResourcesExporting, Sendable {
    /// The container the notes are read from.
    var container: MigrationDataContainer
    /// The layout version to write: "1", "2" or "3".
    var resourcesVersion: String = NotesApp.currentVersion

    var resourcesSizeEstimate: Int {
        NotesApp.treeSize(container.documentsDirectory) + NotesApp.treeSize(container.applicationSupportDirectory)
    }

    var resourcesCompressible: Bool { true }

    nonisolated(nonsending) func exportResources(to archiver: ResourcesArchiver, request: ResourcesExportRequest) async throws {
        let documents = container.documentsDirectory
        let settings = container.applicationSupportDirectory.appending(path: "settings.json")
        switch resourcesVersion {
        case "1":
            try await archiver.appendItem(at: documents, pathInArchive: "notes")
            let values = try NotesApp.readSettings(settings)
            let ini = values.keys.sorted().map { "\($0)=\(values[$0] ?? "")\n" }.joined()
            try await archiver.append(contentsOf: NotesApp.chunks(Array(ini.utf8)), pathInArchive: "settings.ini")
        case "2":
            try await archiver.appendItem(at: documents, pathInArchive: "Documents")
            try await archiver.appendItem(at: settings, pathInArchive: "settings.json")
        case "3":
            try await archiver.appendItem(at: documents, pathInArchive: "Documents")
            try await archiver.appendItem(at: container.applicationSupportDirectory, pathInArchive: "Application Support")
        default:
            throw CairnError(.unsupportedVersion, "the sample exporter writes data versions 1 to 3, not \(resourcesVersion)")
        }
    }
}
