import Foundation
import Glibc

/// A directory tree described in code and materialised on disk with the `*at` system calls on
/// raw byte names: files (content, mode, nanosecond mtime), directories (empty ones too),
/// symlinks, hard links and FIFOs.
///
/// ```swift
/// var tree = TreeBuilder()
/// tree.directory("docs", mode: 0o750)
/// tree.file("docs/a.txt", Array("hello".utf8), mode: 0o640, mtime: 1_600_000_000_123_456_789)
/// tree.symlink("latest", target: "docs/a.txt")
/// tree.hardLink("docs/b.txt", to: "docs/a.txt")
/// try tree.materialize(at: directory.appending("tree"))
/// ```
///
/// Parent directories that are not described are created with mode 0755 and ``defaultTime``.
/// Directory modes and times are applied last, deepest first, after their contents exist, so
/// the times on disk are the described ones.
public struct TreeBuilder: Sendable {
    /// What one path is.
    public enum Node: Sendable, Equatable {
        case file(contents: [UInt8], mode: UInt32, mtime: Int64)
        case directory(mode: UInt32, mtime: Int64)
        case symlink(target: [UInt8], mtime: Int64)
        /// A hard link to the earlier described file at `target`.
        case hardLink(target: [UInt8])
        case fifo(mode: UInt32)
    }

    /// 2021-01-02T03:04:05.123456789Z: a time with every nanosecond digit in use.
    public static let defaultTime: Int64 = 1_609_556_645_123_456_789

    /// Paths (raw bytes, `/`-separated, relative to the root) and what they are, in creation order.
    public private(set) var items: [(path: [UInt8], node: Node)] = []
    /// Mode of the root directory itself.
    public var rootMode: UInt32 = 0o755
    /// Modification time of the root directory itself, so two materialisations are identical.
    public var rootModificationTime: Int64 = TreeBuilder.defaultTime

    public init() {}

    /// Adds any node at a raw path.
    public mutating func add(_ path: [UInt8], _ node: Node) {
        items.append((path, node))
    }

    public mutating func file(_ path: String, _ contents: [UInt8], mode: UInt32 = 0o644, mtime: Int64 = defaultTime) {
        add(Array(path.utf8), .file(contents: contents, mode: mode, mtime: mtime))
    }

    public mutating func file(bytes path: [UInt8], _ contents: [UInt8], mode: UInt32 = 0o644, mtime: Int64 = defaultTime) {
        add(path, .file(contents: contents, mode: mode, mtime: mtime))
    }

    public mutating func directory(_ path: String, mode: UInt32 = 0o755, mtime: Int64 = defaultTime) {
        add(Array(path.utf8), .directory(mode: mode, mtime: mtime))
    }

    public mutating func symlink(_ path: String, target: String, mtime: Int64 = defaultTime) {
        add(Array(path.utf8), .symlink(target: Array(target.utf8), mtime: mtime))
    }

    public mutating func hardLink(_ path: String, to target: String) {
        add(Array(path.utf8), .hardLink(target: Array(target.utf8)))
    }

    public mutating func fifo(_ path: String, mode: UInt32 = 0o644) {
        add(Array(path.utf8), .fifo(mode: mode))
    }

    /// Sum of the sizes of the described regular files, hard links not counted again.
    public var fileBytes: UInt64 {
        items.reduce(0) { total, item in
            if case .file(let contents, _, _) = item.node { return total + UInt64(contents.count) }
            return total
        }
    }

    /// Creates the tree at `root` (created with its parents if missing; it should be empty).
    public func materialize(at root: String) throws {
        let rootBytes = Array(root.utf8)
        if !RawFileSystem.exists(rootBytes) {
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        }
        let rootFD = try RawFileSystem.openDirectory(rootBytes)
        defer { close(rootFD) }
        // (path, mode, mtime) of every directory, applied at the end.
        var directories: [[UInt8]: (mode: UInt32, mtime: Int64)] = [:]

        for (path, node) in items {
            let components = path.split(separator: 0x2F, omittingEmptySubsequences: false).map { Array($0) }
            precondition(!components.isEmpty && !components.contains([]), "bad path in tree: \(RawFileSystem.display(path))")
            let name = components[components.count - 1]
            let parent = try openParent(components.dropLast(), root: rootFD, directories: &directories)
            defer { if parent != rootFD { close(parent) } }
            switch node {
            case .file(let contents, let mode, let mtime):
                let fd = RawFileSystem.withCString(name) {
                    openat(parent, $0, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
                }
                guard fd >= 0 else { throw FileSystemTestError("openat", path: path) }
                defer { close(fd) }
                try RawFileSystem.writeAll(fd, contents, path: path)
                guard fchmod(fd, mode_t(mode)) == 0 else { throw FileSystemTestError("fchmod", path: path) }
                var times = [timespec(nanoseconds: mtime), timespec(nanoseconds: mtime)]
                guard futimens(fd, &times) == 0 else { throw FileSystemTestError("futimens", path: path) }
            case .directory(let mode, let mtime):
                if !RawFileSystem.exists(name, in: parent) {
                    let rc = RawFileSystem.withCString(name) { mkdirat(parent, $0, 0o700) }
                    guard rc == 0 else { throw FileSystemTestError("mkdirat", path: path) }
                }
                directories[path] = (mode, mtime)
            case .symlink(let target, let mtime):
                let rc = RawFileSystem.withCString(target) { t in RawFileSystem.withCString(name) { symlinkat(t, parent, $0) } }
                guard rc == 0 else { throw FileSystemTestError("symlinkat", path: path) }
                try RawFileSystem.setModificationTime(name, in: parent, nanoseconds: mtime)
            case .hardLink(let target):
                let rc = RawFileSystem.withCString(target) { t in
                    RawFileSystem.withCString(name) { linkat(rootFD, t, parent, $0, 0) }
                }
                guard rc == 0 else { throw FileSystemTestError("linkat", path: path) }
            case .fifo(let mode):
                let rc = RawFileSystem.withCString(name) { mkfifoat(parent, $0, mode_t(mode)) }
                guard rc == 0 else { throw FileSystemTestError("mkfifoat", path: path) }
                _ = RawFileSystem.withCString(name) { fchmodat(parent, $0, mode_t(mode), 0) }
            }
        }
        // Deepest first, so setting a child's time does not disturb its parent afterwards.
        for (path, attributes) in directories.sorted(by: { $0.key.count > $1.key.count }) {
            let rc = RawFileSystem.withCString(path) { fchmodat(rootFD, $0, mode_t(attributes.mode), 0) }
            guard rc == 0 else { throw FileSystemTestError("fchmodat", path: path) }
            try RawFileSystem.setModificationTime(path, in: rootFD, nanoseconds: attributes.mtime)
        }
        guard fchmod(rootFD, mode_t(rootMode)) == 0 else { throw FileSystemTestError("fchmod", path: rootBytes) }
        var times = [timespec(nanoseconds: rootModificationTime), timespec(nanoseconds: rootModificationTime)]
        guard futimens(rootFD, &times) == 0 else { throw FileSystemTestError("futimens", path: rootBytes) }
    }

    /// Opens (creating as needed) the directory made of `components` below `root`; undescribed
    /// parents are remembered with mode 0755 and ``defaultTime``.
    private func openParent(
        _ components: ArraySlice<[UInt8]>, root: Int32, directories: inout [[UInt8]: (mode: UInt32, mtime: Int64)]
    ) throws -> Int32 {
        var current = root
        var path: [UInt8] = []
        for component in components {
            path = path.isEmpty ? component : path + [0x2F] + component
            if !RawFileSystem.exists(component, in: current) {
                let rc = RawFileSystem.withCString(component) { mkdirat(current, $0, 0o700) }
                guard rc == 0 else { throw FileSystemTestError("mkdirat", path: path) }
                if directories[path] == nil { directories[path] = (0o755, TreeBuilder.defaultTime) }
            }
            let next = try RawFileSystem.openDirectory(component, in: current)
            if current != root { close(current) }
            current = next
        }
        return current
    }
}
