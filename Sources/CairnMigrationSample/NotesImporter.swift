import Cairn
import CairnMigration
import Foundation

/// The sample app's importer: reads any of the layouts "1", "2", "3" (see ``NotesExporter``)
/// and moves the notes and settings into the container.
///
/// - Throws: `.unsupportedVersion` for another source version; `.corrupted` for settings that
///   do not parse; `.io` when a move fails.
struct NotesImporter: ResourcesImporting, Sendable {
    var container: MigrationDataContainer
    let resourcesImportProgress = Progress(totalUnitCount: 1)

    /// Refuses unknown versions from the header, before anything is extracted.
    static func accept(_ request: ResourcesImportRequest) throws {
        guard NotesApp.supportedVersions.contains(request.sourceVersion) else {
            throw CairnError(
                .unsupportedVersion, "this notes app imports data versions 1 to 3, not \(request.sourceVersion)")
        }
    }

    nonisolated(nonsending) func importResources(at importedDataURL: URL, request: ResourcesImportRequest) async throws {
        try Self.accept(request)
        let files = FileManager.default
        let documents = container.documentsDirectory
        let support = container.applicationSupportDirectory
        try files.createDirectory(at: documents, withIntermediateDirectories: true)
        try files.createDirectory(at: support, withIntermediateDirectories: true)
        let notesFolder = request.sourceVersion == "1" ? "notes" : "Documents"
        let notes = importedDataURL.appending(path: notesFolder)
        for name in try files.contentsOfDirectory(atPath: notes.path(percentEncoded: false)).sorted() {
            try files.moveItem(at: notes.appending(path: name), to: documents.appending(path: name))
        }
        switch request.sourceVersion {
        case "1":
            let ini = String(decoding: try Data(contentsOf: importedDataURL.appending(path: "settings.ini")), as: UTF8.self)
            var values: [String: String] = [:]
            for line in ini.split(separator: "\n") {
                guard let equals = line.firstIndex(of: "=") else {
                    throw CairnError(.corrupted, "a settings line has no '='", path: "settings.ini")
                }
                values[String(line[..<equals])] = String(line[line.index(after: equals)...])
            }
            try NotesApp.writeSettings(values, to: support.appending(path: "settings.json"))
        case "2":
            try files.moveItem(at: importedDataURL.appending(path: "settings.json"), to: support.appending(path: "settings.json"))
        default:
            let source = importedDataURL.appending(path: "Application Support")
            for name in try files.contentsOfDirectory(atPath: source.path(percentEncoded: false)).sorted() {
                try files.moveItem(at: source.appending(path: name), to: support.appending(path: name))
            }
        }
        resourcesImportProgress.completedUnitCount = 1
    }
}
