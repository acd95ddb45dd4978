import Cairn
import CairnMigration
import Foundation

/// The sample notes app: its identity, its container and small file helpers.
enum NotesApp {
    /// The data version the current exporter writes.
    static let currentVersion = "3"
    /// The data versions the current importer reads.
    static let supportedVersions: Set<String> = ["1", "2", "3"]

    /// The app, as stored in an export's header.
    static let identifier = MigrationAppIdentifier(
        platform: .linux, bundleIdentifier: "org.example.cairn-notes", storeIdentifier: MigrationAppIdentifier.StoreIdentifier("flathub"))

    /// The container: `root` when given, else the XDG default (`$XDG_DATA_HOME/org.example.cairn-notes`).
    static func container(root: URL?) -> MigrationDataContainer {
        MigrationDataContainer(bundleIdentifier: identifier.bundleIdentifier, containerRootDirectory: root)
    }

    /// Writes `count` seeded notes and the settings.
    static func seed(_ container: MigrationDataContainer, count: Int = 3, seed: UInt64 = 1) throws {
        let files = FileManager.default
        try files.createDirectory(at: container.documentsDirectory, withIntermediateDirectories: true)
        try files.createDirectory(at: container.applicationSupportDirectory, withIntermediateDirectories: true)
        var state = seed
        for index in 0..<count {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            let body = (0..<(8 + Int(state >> 59))).map { "line \($0) of note \(index), seed \(state >> 40)\n" }.joined()
            try Data(body.utf8).write(to: container.documentsDirectory.appending(path: "note-\(index).txt"))
        }
        try writeSettings(["theme": "dark", "sort": "modified"], to: container.applicationSupportDirectory.appending(path: "settings.json"))
    }

    static func readSettings(_ url: URL) throws -> [String: String] {
        do {
            return try JSONDecoder().decode([String: String].self, from: Data(contentsOf: url))
        } catch {
            throw CairnError(.corrupted, "the settings do not decode", path: url.path(percentEncoded: false), cause: "\(error)")
        }
    }

    static func writeSettings(_ values: [String: String], to url: URL) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        try encoder.encode(values).write(to: url)
    }

    /// Bytes of the regular files under `url` (0 when it does not exist), by Cairn's own
    /// estimate (``Archiver/sizeEstimate(of:excluding:)``: no symlink followed).
    static func treeSize(_ url: URL) -> Int {
        (try? Archiver.sizeEstimate(of: [url])).map { Int(clamping: $0) } ?? 0
    }

    /// `bytes` as a one-element async sequence, for ``ResourcesArchiver/append(contentsOf:pathInArchive:permissions:)``.
    static func chunks(_ bytes: [UInt8]) -> AsyncStream<[UInt8]> {
        AsyncStream { continuation in
            continuation.yield(bytes)
            continuation.finish()
        }
    }
}
