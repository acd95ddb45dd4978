import Foundation
import Synchronization

/// Where an app keeps its data on Linux: the directories an import replaces and restores as one.
///
/// The app names its directories; what it leaves out follows the XDG base directories:
/// ``containerRootDirectory`` is `$XDG_DATA_HOME/<bundle identifier>` (`~/.local/share/<id>`
/// when `XDG_DATA_HOME` is unset or not absolute), ``documentsDirectory`` is `<root>/Documents`
/// and ``applicationSupportDirectory`` is `<root>/Application Support`. Group containers
/// (directories shared with other apps) are protected by an import too: AppMigrationKit leaves
/// them to the app, Cairn moves them aside and restores them with the rest.
///
/// The import status lives inside the root, in ``statusFileURL``
/// (`<root>/.cairn-migration/import-status.json`).
public struct MigrationDataContainer: Sendable, Equatable {
    /// The app's bundle identifier, for example `"org.example.notes"`.
    public var bundleIdentifier: String
    /// The container's root directory.
    public var containerRootDirectory: URL
    /// The user's documents, by default inside the root.
    public var documentsDirectory: URL
    /// Files the app manages, by default inside the root.
    public var applicationSupportDirectory: URL
    /// Directories the app shares with others, protected by an import like the root.
    public var groupContainerDirectories: [URL]

    /// The name of the directory inside the root that holds the import status.
    public static let stateDirectoryName = ".cairn-migration"

    /// A container; a directory left nil takes its XDG default.
    ///
    /// - Parameters:
    ///   - bundleIdentifier: the app's identifier, the name of its XDG directories.
    ///   - containerRootDirectory: the root; default `$XDG_DATA_HOME/<bundleIdentifier>`.
    ///   - documentsDirectory: default `<root>/Documents`.
    ///   - applicationSupportDirectory: default `<root>/Application Support`.
    ///   - groupContainerDirectories: directories shared with other apps, imported too.
    ///   - environment: where `XDG_DATA_HOME` and `HOME` are looked up.
    public init(
        bundleIdentifier: String, containerRootDirectory: URL? = nil, documentsDirectory: URL? = nil,
        applicationSupportDirectory: URL? = nil, groupContainerDirectories: [URL] = [],
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) {
        self.bundleIdentifier = bundleIdentifier
        let root = containerRootDirectory ?? Self.dataHome(environment).appending(path: bundleIdentifier, directoryHint: .isDirectory)
        self.containerRootDirectory = root
        self.documentsDirectory = documentsDirectory ?? root.appending(path: "Documents", directoryHint: .isDirectory)
        self.applicationSupportDirectory =
            applicationSupportDirectory ?? root.appending(path: "Application Support", directoryHint: .isDirectory)
        self.groupContainerDirectories = groupContainerDirectories
    }

    /// `$XDG_DATA_HOME` when set and absolute, else `$HOME/.local/share`.
    static func dataHome(_ environment: [String: String]) -> URL {
        if let value = environment["XDG_DATA_HOME"], value.hasPrefix("/") {
            return URL(filePath: value, directoryHint: .isDirectory)
        }
        let home = environment["HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? NSHomeDirectory()
        return URL(filePath: home, directoryHint: .isDirectory).appending(path: ".local/share", directoryHint: .isDirectory)
    }

    /// The JSON file that holds the last import's status.
    public var statusFileURL: URL {
        containerRootDirectory.appending(path: Self.stateDirectoryName, directoryHint: .isDirectory)
            .appending(path: "import-status.json", directoryHint: .notDirectory)
    }

    /// The directories an import moves aside and restores as a whole: the root, every named
    /// directory outside it, and the group containers; none inside another, in a stable order.
    package var protectedDirectories: [URL] {
        let all = [containerRootDirectory, documentsDirectory, applicationSupportDirectory] + groupContainerDirectories
        var result: [URL] = []
        var paths: [String] = []
        for url in all {
            let path = url.standardizedFileURL.path(percentEncoded: false).trimmingSlashes
            if paths.contains(path) { continue }
            if paths.contains(where: { path.hasPrefix($0 + "/") }) { continue }
            let covered = paths.indices.filter { paths[$0].hasPrefix(path + "/") }
            for index in covered.reversed() {
                paths.remove(at: index)
                result.remove(at: index)
            }
            paths.append(path)
            result.append(URL(filePath: path, directoryHint: .isDirectory))
        }
        return result
    }

    private static let currentContainer = Mutex<MigrationDataContainer?>(nil)

    /// The container ``MigrationStatus/importStatus`` and ``MigrationStatus/clearImportStatus()``
    /// use, for this process only; set it once at launch. Nil until the app sets it: nothing in
    /// CairnMigration sets it (an import session works on its own ``MigrationImportSession/container``),
    /// and while it is nil those two answer nil and do nothing. ``MigrationStatus/importStatus(in:)``
    /// and ``MigrationStatus/clearImportStatus(in:)`` take the container instead.
    public static var current: MigrationDataContainer? {
        get { currentContainer.withLock { $0 } }
        set { currentContainer.withLock { $0 = newValue } }
    }
}
