import Cairn
import Glibc

/// A directory tree read back with `lstat` (names as raw bytes, through `readdir`), as a value
/// that compares with `==` and describes its differences from another one.
///
/// Recorded per path (relative to the root; the root itself is the empty path): the kind, the
/// permission bits, the modification time in nanoseconds, the size, the SHA-256 of a file's
/// content, a symlink's target, and hard-link grouping: files sharing an inode inside the tree
/// carry the smallest of their paths, so two trees compare equal exactly when the same paths are
/// linked together.
public struct TreeSnapshot: Equatable, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        case file, directory, symlink, fifo, other
    }

    public struct Node: Equatable, Sendable, CustomStringConvertible {
        public var kind: Kind
        /// `st_mode & 0o7777`.
        public var permissions: UInt32
        /// `st_mtim` in nanoseconds; nil when not compared (see ``TreeSnapshot/init(at:directoryTimes:)``).
        public var modificationTime: Int64?
        /// Content length for files, 0 otherwise.
        public var size: UInt64
        /// Lowercase hexadecimal SHA-256 of a file's content.
        public var contentDigest: String?
        /// A symlink's target.
        public var linkTarget: [UInt8]?
        /// For a file sharing its inode with other files of the tree: the smallest of their paths.
        public var hardLinkGroup: [UInt8]?

        public var description: String {
            var parts = ["\(kind.rawValue)", "mode \(String(permissions, radix: 8))"]
            if let modificationTime { parts.append("mtime \(modificationTime)") }
            if kind == .file { parts.append("size \(size)") }
            if let contentDigest { parts.append("sha256 \(contentDigest.prefix(16))…") }
            if let linkTarget { parts.append("-> \(RawFileSystem.display(linkTarget))") }
            if let hardLinkGroup { parts.append("linked with \(RawFileSystem.display(hardLinkGroup))") }
            return parts.joined(separator: ", ")
        }
    }

    /// Every path below the root, and the root itself as `[]`.
    public var nodes: [[UInt8]: Node]

    /// Reads the tree at `root`.
    ///
    /// - Parameter directoryTimes: whether directory mtimes are recorded (every other kind's
    ///   always is).
    public init(at root: String, directoryTimes: Bool = true) throws {
        var nodes: [[UInt8]: Node] = [:]
        var inodes: [InodeKey: [[UInt8]]] = [:]
        let rootBytes = Array(root.utf8)
        let info = try RawFileSystem.status(rootBytes)
        nodes[[]] = try Self.node(info, name: rootBytes, in: AT_FDCWD, directoryTimes: directoryTimes)
        if nodes[[]]?.kind == .directory {
            let fd = try RawFileSystem.openDirectory(rootBytes)
            defer { close(fd) }
            try Self.walk(fd, prefix: [], into: &nodes, inodes: &inodes, directoryTimes: directoryTimes)
        }
        for (_, paths) in inodes where paths.count > 1 {
            let first = paths.min { $0.lexicographicallyPrecedes($1) }!
            for path in paths { nodes[path]?.hardLinkGroup = first }
        }
        self.nodes = nodes
    }

    private struct InodeKey: Hashable {
        var device: UInt64
        var inode: UInt64
    }

    private static func walk(
        _ directory: Int32, prefix: [UInt8], into nodes: inout [[UInt8]: Node], inodes: inout [InodeKey: [[UInt8]]],
        directoryTimes: Bool
    ) throws {
        for name in try RawFileSystem.names(in: directory) {
            let path = prefix.isEmpty ? name : prefix + [0x2F] + name
            let info = try RawFileSystem.status(name, in: directory)
            let node = try Self.node(info, name: name, in: directory, directoryTimes: directoryTimes)
            nodes[path] = node
            if node.kind == .file, info.st_nlink > 1 {
                inodes[InodeKey(device: UInt64(info.st_dev), inode: UInt64(info.st_ino)), default: []].append(path)
            }
            if node.kind == .directory {
                let fd = try RawFileSystem.openDirectory(name, in: directory)
                defer { close(fd) }
                try walk(fd, prefix: path, into: &nodes, inodes: &inodes, directoryTimes: directoryTimes)
            }
        }
    }

    private static func node(_ info: stat, name: [UInt8], in directory: Int32, directoryTimes: Bool) throws -> Node {
        let kind: Kind
        switch info.st_mode & S_IFMT {
        case S_IFREG: kind = .file
        case S_IFDIR: kind = .directory
        case S_IFLNK: kind = .symlink
        case S_IFIFO: kind = .fifo
        default: kind = .other
        }
        var node = Node(
            kind: kind, permissions: UInt32(info.st_mode & 0o7777),
            modificationTime: kind == .directory && !directoryTimes ? nil : info.st_mtim.nanoseconds,
            size: kind == .file ? UInt64(info.st_size) : 0)
        switch kind {
        case .file:
            let contents = try RawFileSystem.contents(ofFile: name, in: directory)
            node.contentDigest = try SHA256.hash(contents).hexString
        case .symlink:
            var buffer = [UInt8](repeating: 0, count: 8192)
            let n = RawFileSystem.withCString(name) { n in
                buffer.withUnsafeMutableBytes { readlinkat(directory, n, $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count) }
            }
            guard n >= 0 else { throw FileSystemTestError("readlinkat", path: name) }
            node.linkTarget = Array(buffer[0..<n])
        default:
            break
        }
        return node
    }

    /// Sorted paths.
    public var paths: [[UInt8]] { nodes.keys.sorted { $0.lexicographicallyPrecedes($1) } }

    /// One line per path that differs: only here, only there, or its fields on both sides.
    public func differences(from other: TreeSnapshot) -> [String] {
        var lines: [String] = []
        let all = Set(nodes.keys).union(other.nodes.keys).sorted { $0.lexicographicallyPrecedes($1) }
        for path in all {
            let name = path.isEmpty ? "<root>" : RawFileSystem.display(path)
            switch (nodes[path], other.nodes[path]) {
            case (let mine?, nil): lines.append("\(name): only in the first tree (\(mine))")
            case (nil, let theirs?): lines.append("\(name): only in the second tree (\(theirs))")
            case (let mine?, let theirs?) where mine != theirs:
                lines.append("\(name): \(mine)  ≠  \(theirs)")
            default: break
            }
        }
        return lines
    }

    /// A readable report of the differences, or "identical".
    public func diff(_ other: TreeSnapshot) -> String {
        let lines = differences(from: other)
        return lines.isEmpty ? "identical" : lines.joined(separator: "\n")
    }

    public var description: String {
        paths.map { "\($0.isEmpty ? "<root>" : RawFileSystem.display($0)): \(nodes[$0]!)" }.joined(separator: "\n")
    }
}
