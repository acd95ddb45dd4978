import Glibc

/// A private directory on the destination's file system where extraction writes, so that the
/// destination only ever sees complete results (`Spec/0003-command-line.md`, "Extraction
/// guarantees").
///
/// - If the destination does not exist, the staging directory is created beside it
///   (`<parent>/.<name>.cairn-staging-<pid>-<n>`) and ``commit()`` renames it to the destination.
/// - If the destination is an existing directory, the staging directory is created inside it
///   (`<destination>/.cairn-staging-<pid>-<n>`) and ``commit()`` renames each top-level item
///   into the destination with `RENAME_NOREPLACE`, after checking none of them exists; existing
///   items are never replaced or deleted.
///
/// - Important: Call ``commit()`` or ``discard()`` exactly once.
final class StagingDirectory {
    /// The staging directory, open.
    let descriptor: FileDescriptor
    private let destination: [UInt8]
    private let destinationExists: Bool
    /// The directory that holds the staging directory, open.
    private let container: FileDescriptor
    private let name: [UInt8]
    private var cachedParent: (path: [UInt8], descriptor: FileDescriptor)?

    /// Creates the staging directory for `destination` (a raw path).
    ///
    /// - Throws: `.alreadyExists` when the destination exists and is not a directory; `.io`.
    init(for destination: [UInt8]) throws(CairnError) {
        var trimmed = destination
        while trimmed.count > 1, trimmed.last == 0x2F { trimmed.removeLast() }
        self.destination = trimmed
        let display = PathBytes.display(trimmed)
        let existing = try? FileStatus.of(trimmed, followSymlinks: true)
        let suffix = Array("\(getpid())-\(UInt32.random(in: 0...UInt32.max))".utf8)
        if let existing {
            guard existing.kind == .directory else {
                throw CairnError(.alreadyExists, "destination exists and is not a directory", path: display)
            }
            destinationExists = true
            container = try FileSystem.openDirectory(trimmed, in: nil, display: display)
            name = Array(".cairn-staging-".utf8) + suffix
        } else {
            destinationExists = false
            let parent = PathValidator.parent(trimmed)
            let parentPath: [UInt8] = parent.isEmpty ? (trimmed.first == 0x2F ? [0x2F] : [0x2E]) : parent
            container = try FileSystem.openDirectory(parentPath, in: nil, display: PathBytes.display(parentPath))
            name = [0x2E] + PathBytes.lastComponent(trimmed) + Array(".cairn-staging-".utf8) + suffix
        }
        do {
            try FileSystem.makeDirectory(name, in: container, mode: 0o700, display: display)
            descriptor = try FileSystem.openDirectory(name, in: container, display: display)
        } catch {
            _ = try? container.close()
            throw error.withDisplay(display)
        }
    }

    /// Free bytes on the destination's file system.
    var availableBytes: UInt64? {
        var info = statvfs()
        guard fstatvfs(descriptor.rawValue, &info) == 0 else { return nil }
        return UInt64(info.f_bavail).multipliedReportingOverflow(by: UInt64(info.f_frsize)).partialValue
    }

    /// The open directory that will hold `path` (relative to the staging root), creating missing
    /// intermediate directories with mode 0755. Never follows a symlink.
    func parentDirectory(of path: [UInt8]) throws(CairnError) -> FileDescriptor {
        let parent = PathValidator.parent(path)
        if parent.isEmpty { return descriptor }
        if let cached = cachedParent, cached.path == parent { return cached.descriptor }
        if let cached = cachedParent { _ = try? cached.descriptor.close() }
        cachedParent = nil
        var current = descriptor
        var currentPath: [UInt8] = []
        for component in PathValidator.components(parent) {
            currentPath = PathBytes.join(currentPath, component)
            let display = PathBytes.display(currentPath)
            let next: FileDescriptor
            if let existing = try? FileSystem.openDirectory(component, in: current, display: display) {
                next = existing
            } else {
                try FileSystem.makeDirectory(component, in: current, mode: 0o755, display: display)
                next = try FileSystem.openDirectory(component, in: current, display: display)
            }
            if current.rawValue != descriptor.rawValue { _ = try? current.close() }
            current = next
        }
        cachedParent = (parent, current)
        return current
    }

    /// Moves the result into place (see the type's description), then removes the staging
    /// directory.
    ///
    /// - Throws: `.alreadyExists` naming the first top-level item that already exists at the
    ///   destination; nothing is moved in that case.
    func commit() throws(CairnError) {
        closeCachedParent()
        let display = PathBytes.display(destination)
        if !destinationExists {
            try FileSystem.setPermissions(name, in: container, mode: 0o755 & ~Self.umask, display: display)
            do {
                try FileSystem.renameNoReplace(name, in: container, to: PathBytes.lastComponent(destination), in: container, display: display)
            } catch {
                discard()
                throw error
            }
            _ = try? descriptor.close()
            _ = try? container.close()
            return
        }
        let names: [[UInt8]]
        do throws(CairnError) {
            names = try DirectoryReader.names(in: descriptor)
            for item in names where (try? FileStatus.of(item, relativeTo: container)) != nil {
                throw CairnError(
                    .alreadyExists, "already exists in the destination; nothing was extracted",
                    path: PathBytes.display(PathBytes.join(destination, item)))
            }
        } catch {
            discard()
            throw error
        }
        var moved: [[UInt8]] = []
        for item in names {
            do {
                try FileSystem.renameNoReplace(
                    item, in: descriptor, to: item, in: container, display: PathBytes.display(PathBytes.join(destination, item)))
                moved.append(item)
            } catch {
                for back in moved.reversed() {
                    try? FileSystem.renameNoReplace(back, in: container, to: back, in: descriptor, display: "")
                }
                discard()
                throw error
            }
        }
        discard()
    }

    /// Removes the staging directory and everything in it.
    func discard() {
        closeCachedParent()
        _ = try? descriptor.close()
        FileSystem.removeTree(name, in: container)
        _ = try? container.close()
    }

    private func closeCachedParent() {
        if let cached = cachedParent { _ = try? cached.descriptor.close() }
        cachedParent = nil
    }

    private static var umask: UInt32 {
        let current = Glibc.umask(0o022)
        _ = Glibc.umask(current)
        return UInt32(current)
    }
}
