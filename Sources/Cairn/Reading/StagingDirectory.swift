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
    // Journal handling is below; see `journal()` and `appendJournal(_:)`.
    /// The staging directory, open.
    let descriptor: FileDescriptor
    private let destination: [UInt8]
    private let destinationExists: Bool
    /// The directory that holds the staging directory, open.
    private let container: FileDescriptor
    private let name: [UInt8]
    private var cachedParent: (path: [UInt8], descriptor: FileDescriptor)?

    /// The journal file inside the staging directory: one line per completed step, so an
    /// interrupted extraction can resume (`Spec/0003-command-line.md §4`).
    static let journalName = Array(".cairn-journal".utf8)

    /// Whether this staging directory was left by an interrupted extraction and reopened.
    let isResumed: Bool

    /// Where the staging directory for `destination` (a raw path) lives: the one place that
    /// rule is decided, for messages such as "continue with --resume" too.
    package static func location(for destination: [UInt8]) -> [UInt8] {
        var trimmed = destination
        while trimmed.count > 1, trimmed.last == 0x2F { trimmed.removeLast() }
        if let existing = try? FileStatus.of(trimmed, followSymlinks: true), existing.kind == .directory {
            return PathBytes.join(trimmed, Array(".cairn-staging".utf8))
        }
        let parent = PathValidator.parent(trimmed)
        return PathBytes.join(parent, [0x2E] + PathBytes.lastComponent(trimmed) + Array(".cairn-staging".utf8))
    }

    /// Creates (or, with `resume`, reopens) the staging directory for `destination` (a raw path).
    ///
    /// The name is fixed (`.<name>.cairn-staging` beside a missing destination,
    /// `<destination>/.cairn-staging` inside an existing one), so an interrupted extraction can be
    /// found again; two extractions into the same destination cannot run at once.
    ///
    /// - Throws: `.alreadyExists` when the destination exists and is not a directory, or when an
    ///   interrupted extraction's staging directory is there and `resume` is false; `.io`.
    init(for destination: [UInt8], resume: Bool = false) throws(CairnError) {
        var trimmed = destination
        while trimmed.count > 1, trimmed.last == 0x2F { trimmed.removeLast() }
        self.destination = trimmed
        let display = PathBytes.display(trimmed)
        let existing = try? FileStatus.of(trimmed, followSymlinks: true)
        if let existing {
            guard existing.kind == .directory else {
                throw CairnError(.alreadyExists, "destination exists and is not a directory", path: display)
            }
            destinationExists = true
            // The destination is the caller's choice: a symlink to a directory is followed, as
            // tar -C does. Nothing below it is ever followed.
            let fd = try FileDescriptor.open(trimmed, flags: O_RDONLY | O_DIRECTORY)
            container = FileDescriptor(rawValue: fd.rawValue, path: display)
            name = Array(".cairn-staging".utf8)
        } else {
            destinationExists = false
            let parent = PathValidator.parent(trimmed)
            let parentPath: [UInt8] = parent.isEmpty ? (trimmed.first == 0x2F ? [0x2F] : [0x2E]) : parent
            container = try FileSystem.openDirectory(parentPath, in: nil, display: PathBytes.display(parentPath))
            name = [0x2E] + PathBytes.lastComponent(trimmed) + Array(".cairn-staging".utf8)
        }
        let stagingDisplay = PathBytes.display(PathBytes.join(destinationExists ? trimmed : PathValidator.parent(trimmed), name))
        let leftOver = (try? FileStatus.of(name, relativeTo: container))?.kind == .directory
        do throws(CairnError) {
            if leftOver {
                guard resume else {
                    throw CairnError(
                        .alreadyExists,
                        "an interrupted extraction is staged here; continue it with --resume (or remove the directory)",
                        path: stagingDisplay)
                }
                descriptor = try FileSystem.openDirectory(name, in: container, display: stagingDisplay)
                guard (try? FileStatus.of(Self.journalName, relativeTo: descriptor)) != nil else {
                    _ = try? descriptor.close()
                    throw CairnError(.notResumable, "this directory has no Cairn journal; not resuming into it", path: stagingDisplay)
                }
                isResumed = true
            } else {
                try FileSystem.makeDirectory(name, in: container, mode: 0o700, display: display)
                descriptor = try FileSystem.openDirectory(name, in: container, display: display)
                isResumed = false
            }
            // One extraction per destination at a time: a second one must not take a running
            // extraction's staging directory for an interrupted one (flock(2), released at exit).
            guard flock(descriptor.rawValue, LOCK_EX | LOCK_NB) == 0 else {
                _ = try? descriptor.close()
                throw CairnError(
                    .alreadyExists, "another cairn process is extracting into this destination", path: stagingDisplay)
            }
        } catch {
            _ = try? container.close()
            throw error
        }
    }

    /// The journal's lines (empty for a new staging directory).
    func journal() -> [String] {
        guard let fd = try? FileDescriptor.open(Self.journalName, flags: O_RDONLY, relativeTo: descriptor) else { return [] }
        defer { _ = try? fd.close() }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while let n = try? chunk.withMutableBytes({ (raw) throws(CairnError) in try fd.read(into: raw) }), n > 0 {
            bytes.append(contentsOf: chunk[0..<n])
            if bytes.count > 64 << 20 { break }
        }
        // A line cut by a crash has no newline: ignore it.
        guard let lastNewline = bytes.lastIndex(of: 0x0A) else { return [] }
        return String(decoding: bytes[..<lastNewline], as: UTF8.self).split(separator: "\n").map(String.init)
    }

    /// Appends one line to the journal (one `write(2)` with `O_APPEND`).
    func appendJournal(_ line: String) throws(CairnError) {
        if journalDescriptor == nil {
            journalDescriptor = try FileDescriptor.open(
                Self.journalName, flags: O_WRONLY | O_CREAT | O_APPEND, mode: 0o600, relativeTo: descriptor)
        }
        try journalDescriptor?.writeAll(Array((line + "\n").utf8))
    }

    private var journalDescriptor: FileDescriptor?

    /// Removes `path` (relative to the staging root) if it exists: a file an interrupted run left
    /// half written.
    func removeLeftover(_ path: [UInt8]) throws(CairnError) {
        let parent = try parentDirectory(of: path)
        let name = PathBytes.lastComponent(path)
        if let status = try? FileStatus.of(name, relativeTo: parent), status.kind != .directory {
            _ = name.withNullTerminated { unlinkat(parent.rawValue, $0, 0) }
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
        if let journal = journalDescriptor { _ = try? journal.close() }
        journalDescriptor = nil
        _ = Self.journalName.withNullTerminated { unlinkat(descriptor.rawValue, $0, 0) }
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

    /// Closes the staging directory but keeps it and its journal, for `--resume`.
    func release() {
        closeCachedParent()
        if let journal = journalDescriptor { _ = try? journal.close() }
        journalDescriptor = nil
        _ = try? descriptor.close()
        _ = try? container.close()
    }

    /// Removes the staging directory and everything in it.
    func discard() {
        closeCachedParent()
        if let journal = journalDescriptor { _ = try? journal.close() }
        journalDescriptor = nil
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
