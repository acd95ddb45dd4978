import Cairn
import Glibc

/// The tree comparer: a directory tree read back with `lstat` (names as raw bytes, through
/// `readdir`), as a value that compares with `==` and describes its differences from another one.
///
/// Recorded per path (relative to the root; the root itself is the empty path): the kind, the
/// permission bits, the modification time in nanoseconds, the size, the SHA-256 of a file's
/// content, a symlink's target, and hard-link grouping: files sharing an inode inside the tree
/// carry the smallest of their paths, so two trees compare equal exactly when the same paths are
/// linked together. A symlink is never followed.
public struct TreeSnapshot: Equatable, Sendable, CustomStringConvertible {
    /// What a path is, from `st_mode & S_IFMT`.
    public enum Kind: String, Sendable {
        /// A regular file.
        case file
        /// A directory.
        case directory
        /// A symbolic link.
        case symlink
        /// A FIFO.
        case fifo
        /// A socket, a device node or a type this comparer does not name.
        case other
    }

    /// What is recorded of one path.
    public struct Node: Equatable, Sendable, CustomStringConvertible {
        /// The kind.
        public var kind: Kind
        /// `st_mode & 0o7777`.
        public var permissions: UInt32
        /// `st_mtim` in nanoseconds since the epoch; nil when not compared (directories read
        /// with `directoryTimes: false`).
        public var modificationTime: Int64?
        /// Content length in bytes for files, 0 otherwise.
        public var size: UInt64
        /// Lowercase hexadecimal SHA-256 of a file's content.
        public var contentDigest: String?
        /// A symlink's target, raw bytes.
        public var linkTarget: [UInt8]?
        /// For a file sharing its inode with other files of the tree: the smallest of their paths.
        public var hardLinkGroup: [UInt8]?

        /// The fields on one line, for failure messages.
        public var description: String {
            var parts = ["\(kind.rawValue)", "mode \(String(permissions, radix: 8))"]
            if let modificationTime { parts.append("mtime \(modificationTime)") }
            if kind == .file { parts.append("size \(size)") }
            if let contentDigest { parts.append("sha256 \(contentDigest.prefix(16))…") }
            if let linkTarget { parts.append("-> \(PathBytes.display(linkTarget))") }
            if let hardLinkGroup { parts.append("linked with \(PathBytes.display(hardLinkGroup))") }
            return parts.joined(separator: ", ")
        }
    }

    /// Every path below the root, relative to it as raw bytes, and the root itself as `[]`.
    public var nodes: [[UInt8]: Node]

    /// Reads the tree at `root` (a file, a symlink or a directory; a directory is walked).
    ///
    /// - Parameters:
    ///   - root: the path, absolute or relative to the working directory.
    ///   - directoryTimes: whether directory mtimes are recorded (every other kind's always is).
    /// - Throws: `CairnError` `.io` naming the path that could not be read (`fstatat`,
    ///   `openat`, `readdir`, `read` or `readlinkat` failed).
    public init(at root: String, directoryTimes: Bool = true) throws(CairnError) {
        var reader = Reader(directoryTimes: directoryTimes)
        let rootBytes = Array(root.utf8)
        let status = try FileStatus.of(rootBytes)
        try reader.record([], name: rootBytes, in: nil, status: status)
        if status.kind == .directory {
            let directory = try FileSystem.openDirectory(rootBytes, in: nil, display: root)
            try directory.closeAfter { () throws(CairnError) in try reader.walk(directory, prefix: []) }
        }
        for (_, paths) in reader.inodes where paths.count > 1 {
            guard let first = paths.min(by: { $0.lexicographicallyPrecedes($1) }) else { continue }
            for path in paths { reader.nodes[path]?.hardLinkGroup = first }
        }
        nodes = reader.nodes
    }

    /// Sorted paths.
    public var paths: [[UInt8]] { nodes.keys.sorted { $0.lexicographicallyPrecedes($1) } }

    /// One line per path that differs: only here, only there, or its fields on both sides.
    public func differences(from other: TreeSnapshot) -> [String] {
        var lines: [String] = []
        let all = Set(nodes.keys).union(other.nodes.keys).sorted { $0.lexicographicallyPrecedes($1) }
        for path in all {
            let name = path.isEmpty ? "<root>" : PathBytes.display(path)
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

    /// Every path with its fields, one per line, in byte order.
    public var description: String {
        paths.compactMap { path in
            nodes[path].map { "\(path.isEmpty ? "<root>" : PathBytes.display(path)): \($0)" }
        }.joined(separator: "\n")
    }
}

extension TreeSnapshot {
    /// The walk's state: the nodes so far and the paths of every multiply-linked file by inode.
    private struct Reader {
        struct InodeKey: Hashable {
            var device: UInt64
            var inode: UInt64
        }

        let directoryTimes: Bool
        var nodes: [[UInt8]: Node] = [:]
        var inodes: [InodeKey: [[UInt8]]] = [:]

        init(directoryTimes: Bool) { self.directoryTimes = directoryTimes }

        /// Records every name below the open `directory`, depth first.
        mutating func walk(_ directory: FileDescriptor, prefix: [UInt8]) throws(CairnError) {
            for name in try DirectoryReader.names(in: directory) {
                let path = prefix.isEmpty ? name : prefix + [0x2F] + name
                let status = try FileStatus.of(name, relativeTo: directory)
                try record(path, name: name, in: directory, status: status)
                if status.kind == .regular, status.linkCount > 1 {
                    inodes[InodeKey(device: status.device, inode: status.inode), default: []].append(path)
                }
                if status.kind == .directory {
                    let child = try FileSystem.openDirectory(name, in: directory, display: PathBytes.display(path))
                    try child.closeAfter { () throws(CairnError) in try walk(child, prefix: path) }
                }
            }
        }

        /// Records `path` (`name` in `directory`, or the working directory when nil).
        mutating func record(_ path: [UInt8], name: [UInt8], in directory: FileDescriptor?, status: FileStatus)
            throws(CairnError)
        {
            let kind: Kind =
                switch status.kind {
                case .regular: .file
                case .directory: .directory
                case .symlink: .symlink
                case .fifo: .fifo
                default: .other
                }
            let time = status.modificationTime
            var node = Node(
                kind: kind, permissions: status.permissions,
                modificationTime: kind == .directory && !directoryTimes
                    ? nil : time.seconds &* 1_000_000_000 &+ Int64(time.nanoseconds),
                size: kind == .file ? status.size : 0)
            let display = PathBytes.display(path.isEmpty ? name : path)
            switch kind {
            case .file: node.contentDigest = try Self.contentDigest(of: name, in: directory)
            case .symlink: node.linkTarget = try FileSystem.readSymlink(name, in: directory, display: display)
            default: break
            }
            nodes[path] = node
        }

        /// The SHA-256 of the regular file `name`, read in 1 MiB pieces (never following a symlink,
        /// never waiting on a FIFO put in its place).
        static func contentDigest(of name: [UInt8], in directory: FileDescriptor?) throws(CairnError) -> String {
            let file = try FileDescriptor.open(name, flags: O_RDONLY | O_NOFOLLOW | O_NONBLOCK, relativeTo: directory)
            return try file.closeAfter { () throws(CairnError) in
                let hasher = SHA256()
                let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
                defer { buffer.deallocate() }
                while true {
                    let count = try file.read(into: buffer)
                    if count == 0 { break }
                    hasher.update(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
                }
                return try hasher.finalize().hexString
            }
        }
    }
}
