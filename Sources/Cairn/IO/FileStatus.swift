import Glibc

/// The fields of `struct stat` that Cairn uses, with nanosecond times.
package struct FileStatus: Sendable, Equatable {
    /// The file type, from `st_mode & S_IFMT`.
    package enum Kind: Sendable, Equatable, CustomStringConvertible {
        case regular, directory, symlink, fifo, socket, characterDevice, blockDevice, unknown

        /// The type in words, for messages: `"regular file"`, `"block device"`, `"FIFO"`, ...
        package var description: String {
            switch self {
            case .regular: "regular file"
            case .directory: "directory"
            case .symlink: "symbolic link"
            case .fifo: "FIFO"
            case .socket: "socket"
            case .characterDevice: "character device"
            case .blockDevice: "block device"
            case .unknown: "file of unknown type"
            }
        }

        /// The plural of ``description``: `"block devices"`, `"FIFOs"`, `"files of unknown type"`.
        package var pluralDescription: String {
            self == .unknown ? "files of unknown type" : description + "s"
        }
    }

    package var kind: Kind
    /// Permission bits, `st_mode & 0o7777`.
    package var permissions: UInt32
    package var size: UInt64
    package var device: UInt64
    /// For a device node, the device it stands for (`st_rdev`); 0 otherwise.
    package var specialDevice: UInt64
    package var inode: UInt64
    package var linkCount: UInt64
    package var userID: UInt32
    package var groupID: UInt32
    /// Modification time, as the kernel holds it.
    package var modificationTime: Timestamp
    /// Status-change time, as the kernel holds it.
    package var changeTime: Timestamp

    package init(_ st: stat) {
        switch st.st_mode & S_IFMT {
        case S_IFREG: kind = .regular
        case S_IFDIR: kind = .directory
        case S_IFLNK: kind = .symlink
        case S_IFIFO: kind = .fifo
        case S_IFSOCK: kind = .socket
        case S_IFCHR: kind = .characterDevice
        case S_IFBLK: kind = .blockDevice
        default: kind = .unknown
        }
        permissions = UInt32(st.st_mode & 0o7777)
        size = UInt64(clamping: st.st_size)
        device = UInt64(st.st_dev)
        specialDevice = UInt64(st.st_rdev)
        inode = UInt64(st.st_ino)
        linkCount = UInt64(st.st_nlink)
        userID = st.st_uid
        groupID = st.st_gid
        modificationTime = Timestamp(st.st_mtim)
        changeTime = Timestamp(st.st_ctim)
    }

    /// `fstatat(2)` without following a final symlink (`lstat` semantics).
    package static func of(
        _ path: [UInt8], relativeTo directory: FileDescriptor? = nil, followSymlinks: Bool = false
    ) throws(CairnError) -> FileStatus {
        var st = stat()
        let rc = path.withNullTerminated { cPath in
            fstatat(directory?.rawValue ?? AT_FDCWD, cPath, &st, followSymlinks ? 0 : AT_SYMLINK_NOFOLLOW)
        }
        guard rc == 0 else { throw Errno.current.error("cannot stat", path: PathBytes.display(path)) }
        return FileStatus(st)
    }
}

extension Timestamp {
    /// The time a `struct timespec` holds (nanoseconds outside `0 ..< 10⁹`, which the kernel
    /// never returns, are clamped).
    package init(_ ts: timespec) {
        self.init(seconds: Int64(ts.tv_sec), nanoseconds: UInt32(clamping: min(max(ts.tv_nsec, 0), 999_999_999)))
    }

    /// The time as a `struct timespec`.
    package var timespec: Glibc.timespec { Glibc.timespec(tv_sec: Int(seconds), tv_nsec: Int(nanoseconds)) }
}
