import Cairn
import CairnMigration
import Foundation

/// Every directory an import protects in a container, read as ``TreeSnapshot``s, without the
/// import status (`<root>/.cairn-migration`, which an import writes by design).
///
/// Two snapshots are equal exactly when the container's data is byte-identical, with the same
/// types, modes, times and links, including the root directory's own mode and times.
public struct ContainerSnapshot: Equatable, Sendable, CustomStringConvertible {
    /// By protected directory path: its tree, or nil when it does not exist.
    public var trees: [String: TreeSnapshot?]

    /// Reads every protected directory of `container`.
    ///
    /// - Throws: `CairnError` `.io` naming the directory when a tree cannot be read (the cause
    ///   names the failing call).
    public init(of container: MigrationDataContainer) throws(CairnError) {
        var trees: [String: TreeSnapshot?] = [:]
        let state = Array(MigrationDataContainer.stateDirectoryName.utf8)
        for url in container.protectedDirectories {
            let path = url.path(percentEncoded: false).trimmingSlashes
            guard FileManager.default.fileExists(atPath: path) else {
                trees[path] = .some(nil)
                continue
            }
            var tree: TreeSnapshot
            do {
                tree = try TreeSnapshot(at: path)
            } catch {
                throw CairnError(.io, "cannot read the tree", path: path, cause: "\(error)")
            }
            if path == container.containerRootDirectory.standardizedFileURL.path(percentEncoded: false).trimmingSlashes {
                tree.nodes = tree.nodes.filter { key, _ in !(key == state || key.starts(with: state + [0x2F])) }
            }
            trees[path] = .some(tree)
        }
        self.trees = trees
    }

    /// One line per difference, prefixed with its directory; empty when identical.
    public func differences(from other: ContainerSnapshot) -> [String] {
        var lines: [String] = []
        for path in Set(trees.keys).union(other.trees.keys).sorted() {
            switch (trees[path] ?? nil, other.trees[path] ?? nil) {
            case (nil, nil): break
            case (.some, nil): lines.append("\(path): only in the first container")
            case (nil, .some): lines.append("\(path): only in the second container")
            case (let mine?, let theirs?): lines += mine.differences(from: theirs).map { "\(path): \($0)" }
            }
        }
        return lines
    }

    /// The differences as text, or "identical".
    public func diff(_ other: ContainerSnapshot) -> String {
        let lines = differences(from: other)
        return lines.isEmpty ? "identical" : lines.joined(separator: "\n")
    }

    /// Every tree, one path per line.
    public var description: String {
        trees.keys.sorted().map { "\($0):\n\((trees[$0] ?? nil)?.description ?? "absent")" }.joined(separator: "\n")
    }
}
