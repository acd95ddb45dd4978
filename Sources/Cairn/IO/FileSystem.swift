import Glibc
internal import CLinux

/// The `*at(2)` system calls the extractor and archiver use, on raw-byte names.
///
/// Every function names the syscall it wraps and throws ``CairnError`` naming `display`.
package enum FileSystem {
    /// `mkdirat(2)`.
    package static func makeDirectory(
        _ name: [UInt8], in directory: FileDescriptor, mode: mode_t, display: String
    ) throws(CairnError) {
        let rc = name.withNullTerminated { mkdirat(directory.rawValue, $0, mode) }
        guard rc == 0 else { throw Errno.current.error("cannot create directory", path: display) }
    }

    /// ``makeDirectory(_:in:mode:display:)`` unless a directory `name` is there, made before or
    /// by another thread meanwhile (extraction's writer lanes may make the same parent at once).
    ///
    /// - Throws: `.io` or `.alreadyExists` when `name` cannot be made and is not a directory.
    package static func makeDirectoryUnlessPresent(
        _ name: [UInt8], in directory: FileDescriptor, mode: mode_t, display: String
    ) throws(CairnError) {
        if (try? FileStatus.of(name, relativeTo: directory))?.kind == .directory { return }
        do throws(CairnError) {
            try makeDirectory(name, in: directory, mode: mode, display: display)
        } catch {
            guard (try? FileStatus.of(name, relativeTo: directory))?.kind == .directory else { throw error }
        }
    }

    /// Opens the directory `name` inside `directory` with `O_NOFOLLOW`, so a symlink is never
    /// followed (`openat(2)`).
    package static func openDirectory(
        _ name: [UInt8], in directory: FileDescriptor?, display: String
    ) throws(CairnError) -> FileDescriptor {
        do {
            let fd = try FileDescriptor.open(
                name, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW, relativeTo: directory)
            return FileDescriptor(rawValue: fd.rawValue, path: display)
        } catch {
            throw error.withDisplay(display)
        }
    }

    /// `symlinkat(2)`.
    package static func makeSymlink(
        _ name: [UInt8], target: [UInt8], in directory: FileDescriptor, display: String
    ) throws(CairnError) {
        let rc = target.withNullTerminated { t in
            name.withNullTerminated { n in symlinkat(t, directory.rawValue, n) }
        }
        guard rc == 0 else { throw Errno.current.error("cannot create symlink", path: display) }
    }

    /// `readlinkat(2)`; the target as raw bytes.
    package static func readSymlink(_ name: [UInt8], in directory: FileDescriptor?, display: String)
        throws(CairnError) -> [UInt8]
    {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = name.withNullTerminated { n in
            buffer.withUnsafeMutableBufferPointer { raw in
                guard let base = raw.baseAddress else { return -1 }
                return readlinkat(directory?.rawValue ?? AT_FDCWD, n, base, raw.count)
            }
        }
        guard n >= 0 else { throw Errno.current.error("cannot read symlink", path: display) }
        return buffer[0..<n].map { UInt8(bitPattern: $0) }
    }

    /// `linkat(2)` without following symlinks.
    package static func makeHardLink(
        from source: [UInt8], in sourceDirectory: FileDescriptor, to name: [UInt8],
        in directory: FileDescriptor, display: String
    ) throws(CairnError) {
        let rc = source.withNullTerminated { s in
            name.withNullTerminated { n in linkat(sourceDirectory.rawValue, s, directory.rawValue, n, 0) }
        }
        guard rc == 0 else { throw Errno.current.error("cannot create hard link", path: display) }
    }

    /// `linkat(2)` of an open file (an unnamed `O_TMPFILE` one too) through `/proc/self/fd`, which
    /// needs no privilege (`AT_EMPTY_PATH` would need `CAP_DAC_READ_SEARCH`).
    package static func makeHardLink(
        toOpenFile file: FileDescriptor, named name: [UInt8], in directory: FileDescriptor, display: String
    ) throws(CairnError) {
        let rc = Array("/proc/self/fd/\(file.rawValue)".utf8).withNullTerminated { source in
            name.withNullTerminated { n in linkat(AT_FDCWD, source, directory.rawValue, n, AT_SYMLINK_FOLLOW) }
        }
        guard rc == 0 else { throw Errno.current.error("cannot create hard link", path: display) }
    }

    /// `utimensat(2)` with `AT_SYMLINK_NOFOLLOW`: sets access and modification time to `time`.
    package static func setModificationTime(
        _ name: [UInt8], in directory: FileDescriptor, time: Timestamp, display: String
    ) throws(CairnError) {
        let ts = time.timespec
        var times = (ts, ts)
        let rc = withUnsafePointer(to: &times) { pointer in
            pointer.withMemoryRebound(to: timespec.self, capacity: 2) { tsp in
                name.withNullTerminated { n in utimensat(directory.rawValue, n, tsp, AT_SYMLINK_NOFOLLOW) }
            }
        }
        guard rc == 0 else { throw Errno.current.error("cannot set modification time", path: display) }
    }

    /// `futimens(2)`.
    package static func setModificationTime(of fd: FileDescriptor, time: Timestamp) throws(CairnError) {
        let ts = time.timespec
        var times = (ts, ts)
        let rc = withUnsafePointer(to: &times) { pointer in
            pointer.withMemoryRebound(to: timespec.self, capacity: 2) { futimens(fd.rawValue, $0) }
        }
        guard rc == 0 else { throw Errno.current.error("cannot set modification time", path: fd.path) }
    }

    /// `fchmodat(2)` (never follows symlinks because it is only called on files and directories).
    package static func setPermissions(
        _ name: [UInt8], in directory: FileDescriptor, mode: UInt32, display: String
    ) throws(CairnError) {
        let rc = name.withNullTerminated { n in fchmodat(directory.rawValue, n, mode_t(mode & 0o7777), 0) }
        guard rc == 0 else { throw Errno.current.error("cannot set permissions", path: display) }
    }

    /// The permission bits extraction applies: the archived ones without set-user-ID and
    /// set-group-ID. Extraction does not restore owners (the extracting user owns every file),
    /// so keeping those bits would let an archive plant set-user-ID programs owned by whoever
    /// extracts it (root, say). The sticky bit and the rwx bits are kept.
    package static func extractedPermissions(_ mode: UInt32) -> UInt32 {
        mode & 0o1777
    }

    /// ``setPermissions(_:in:mode:display:)`` with ``extractedPermissions(_:)`` applied.
    package static func setExtractedPermissions(
        _ name: [UInt8], in directory: FileDescriptor, mode: UInt32, display: String
    ) throws(CairnError) {
        try setPermissions(name, in: directory, mode: extractedPermissions(mode), display: display)
    }

    /// `fchmod(2)` with ``extractedPermissions(_:)`` applied, on a file extraction holds open
    /// (no path to look up again).
    package static func setExtractedPermissions(of fd: FileDescriptor, mode: UInt32) throws(CairnError) {
        guard fchmod(fd.rawValue, mode_t(extractedPermissions(mode) & 0o7777)) == 0 else {
            throw Errno.current.error("cannot set permissions", path: fd.path)
        }
    }

    /// `renameat2(2)` with `RENAME_NOREPLACE`: never replaces an existing name.
    package static func renameNoReplace(
        _ from: [UInt8], in fromDirectory: FileDescriptor?, to: [UInt8], in toDirectory: FileDescriptor?,
        display: String
    ) throws(CairnError) {
        let rc = from.withNullTerminated { f in
            to.withNullTerminated { t in
                cairn_renameat2(fromDirectory?.rawValue ?? AT_FDCWD, f, toDirectory?.rawValue ?? AT_FDCWD, t, cairn_rename_noreplace())
            }
        }
        guard rc == 0 else { throw Errno.current.error("cannot rename into place", path: display) }
    }

    /// `renameat(2)`: replaces `to` atomically (used only for Cairn's own temporary files).
    package static func rename(_ from: [UInt8], to: [UInt8], display: String) throws(CairnError) {
        let rc = from.withNullTerminated { f in to.withNullTerminated { t in Glibc.rename(f, t) } }
        guard rc == 0 else { throw Errno.current.error("cannot rename into place", path: display) }
    }

    /// `renameat(2)`: moves `from` (in `fromDirectory`) to `to` (in `toDirectory`), atomically
    /// replacing an existing file or symlink there. The kernel refuses to replace a directory with
    /// a non-directory or the reverse (`EISDIR`, `ENOTDIR`), and a non-empty directory
    /// (`ENOTEMPTY`). Neither name is followed if it is a symlink.
    ///
    /// - Throws: `.io` (or `.notFound`) naming `display`.
    package static func renameReplacing(
        _ from: [UInt8], in fromDirectory: FileDescriptor, to: [UInt8], in toDirectory: FileDescriptor,
        display: String
    ) throws(CairnError) {
        let rc = from.withNullTerminated { f in
            to.withNullTerminated { t in renameat(fromDirectory.rawValue, f, toDirectory.rawValue, t) }
        }
        guard rc == 0 else { throw Errno.current.error("cannot rename into place", path: display) }
    }

    /// Removes `name` inside `directory` and everything below it, never following symlinks
    /// (`unlinkat(2)`). Used only on Cairn's own staging directories and temporary files.
    ///
    /// A directory the tree itself made read-only (an archive may hold a directory of mode
    /// 0o555, or 0o000) first gets its owner's `rwx` bits back (`fchmodat(2)` with
    /// `AT_SYMLINK_NOFOLLOW`), so that a user who is not root can list and empty it; without that,
    /// the tree would be left behind. Only directories below `name` (and `name` itself) are
    /// changed, never `directory`, never through a symlink. Best effort: what cannot be removed
    /// stays, and nothing is thrown.
    ///
    /// - Complexity: O(n) system calls in the number of items, recursion as deep as the tree.
    package static func removeTree(_ name: [UInt8], in directory: FileDescriptor?) {
        let at = directory?.rawValue ?? AT_FDCWD
        var st = stat()
        let rc = name.withNullTerminated { fstatat(at, $0, &st, AT_SYMLINK_NOFOLLOW) }
        guard rc == 0 else { return }
        guard st.st_mode & S_IFMT == S_IFDIR else {
            _ = name.withNullTerminated { unlinkat(at, $0, 0) }
            return
        }
        if st.st_mode & 0o700 != 0o700 {
            _ = name.withNullTerminated { fchmodat(at, $0, (st.st_mode & 0o7777) | 0o700, AT_SYMLINK_NOFOLLOW) }
        }
        if let child = try? openDirectory(name, in: directory, display: "") {
            if let names = try? DirectoryReader.names(in: child) {
                for entry in names { removeTree(entry, in: child) }
            }
            Glibc.close(child.rawValue)
        }
        _ = name.withNullTerminated { unlinkat(at, $0, AT_REMOVEDIR) }
    }
}

extension CairnError {
    /// This error with `path` replaced by `display`.
    package func withDisplay(_ display: String) -> CairnError {
        var copy = self
        copy.path = display
        return copy
    }
}

extension FileSystem {
    /// Writes a small file so that it survives a crash or a reboot: `bytes` go to a temporary
    /// name beside `path` (`O_NOFOLLOW`, mode `mode`), `fsync(2)`, `rename(2)` over `path`, then
    /// `fsync` of the directory. A failure (a full disk) leaves no temporary file and `path` as
    /// it was. Used for every small state file: a fetch's, an upload's, a migration's status.
    ///
    /// With `syncing` false nothing is synced: the file is still replaced whole (never seen half
    /// written), and survives the process being killed but not the machine stopping; for
    /// progress records that may lag (a fetch's verified offset, rewritten at every commit).
    ///
    /// - Throws: `.io` naming the file and the `errno`.
    package static func writeDurably(_ bytes: [UInt8], to path: String, mode: mode_t, syncing: Bool = true) throws(CairnError) {
        let temporary = path + ".\(getpid()).tmp"
        let descriptor = try FileDescriptor.open(temporary, flags: O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, mode: mode)
        do throws(CairnError) {
            try descriptor.closeAfter { () throws(CairnError) in
                try descriptor.writeAll(bytes)
                if syncing { try descriptor.sync() }
            }
            try FileSystem.rename(Array(temporary.utf8), to: Array(path.utf8), display: path)
        } catch {
            unlink(temporary)
            throw error
        }
        guard syncing else { return }
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        if let parent = try? FileDescriptor.open(directory, flags: O_RDONLY | O_DIRECTORY) {
            try parent.closeAfter { () throws(CairnError) in try parent.sync() }
        }
    }
}
