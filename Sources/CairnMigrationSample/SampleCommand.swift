import Cairn
import CairnMigration
import Foundation
import Glibc

/// `cairn-migration-sample`: the notes app's migration, from the command line.
///
/// ```
/// cairn-migration-sample seed   ROOT
/// cairn-migration-sample export ROOT ARCHIVE|- [--version N]
/// cairn-migration-sample import ARCHIVE|- ROOT
/// cairn-migration-sample status ROOT [--clear]
/// ```
/// Exit status 0 on success, 1 on failure (the error on stderr), 2 for a usage error.
@main
struct SampleCommand {
    static func main() async {
        var arguments = Array(CommandLine.arguments.dropFirst())
        var version = NotesApp.currentVersion
        if let index = arguments.firstIndex(of: "--version"), index + 1 < arguments.count {
            version = arguments[index + 1]
            arguments.removeSubrange(index...(index + 1))
        }
        let clear = arguments.contains("--clear")
        arguments.removeAll { $0 == "--clear" }
        do {
            switch (arguments.first, arguments.count) {
            case ("seed", 2):
                try NotesApp.seed(NotesApp.container(root: URL(filePath: arguments[1])))
            case ("export", 3):
                let container = NotesApp.container(root: URL(filePath: arguments[1]))
                let session = MigrationExportSession(
                    exporter: NotesExporter(container: container, resourcesVersion: version), appIdentifier: NotesApp.identifier)
                let properties: ExportProperties
                if arguments[2] == "-" {
                    properties = try await session.exportResources(to: StandardOutputSink())
                } else {
                    properties = try await session.exportResources(to: URL(filePath: arguments[2]))
                }
                FileHandle.standardError.write(Data("exported \(properties.entryCount) entries, \(properties.archiveBytes) bytes, data version \(version)\n".utf8))
            case ("import", 3):
                let container = NotesApp.container(root: URL(filePath: arguments[2]))
                let session = MigrationImportSession(importer: NotesImporter(container: container), container: container)
                session.acceptRequest = NotesImporter.accept
                let request =
                    arguments[1] == "-"
                    ? try await session.importResources(from: FileHandle.standardInput)
                    : try await session.importResources(fromArchiveAt: URL(filePath: arguments[1]))
                FileHandle.standardError.write(Data("imported data version \(request.sourceVersion) from \(request.sourceAppIdentifier)\n".utf8))
            case ("status", 2):
                let container = NotesApp.container(root: URL(filePath: arguments[1]))
                MigrationDataContainer.current = container
                switch MigrationStatus.importStatus {
                case nil: print("no import")
                case .success?: print("imported")
                case .failure(let error)?: print("import failed: \(error)")
                }
                if clear { MigrationStatus.clearImportStatus() }
            default:
                FileHandle.standardError.write(Data("usage: cairn-migration-sample seed ROOT | export ROOT ARCHIVE|- [--version N] | import ARCHIVE|- ROOT | status ROOT [--clear]\n".utf8))
                exit(2)
            }
        } catch {
            FileHandle.standardError.write(Data("cairn-migration-sample: \(error)\n".utf8))
            exit(1)
        }
    }
}
