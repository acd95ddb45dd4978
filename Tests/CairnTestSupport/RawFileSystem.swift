import Cairn
import Glibc

/// A failed system call in the test support, naming the call, the path and `errno`.
public struct FileSystemTestError: Error, CustomStringConvertible, Sendable {
    public var operation: String
    public var path: String
    public var errnoValue: Int32

    public init(_ operation: String, path: [UInt8], errno value: Int32 = errno) {
        self.operation = operation
        self.path = RawFileSystem.display(path)
        self.errnoValue = value
    }

    public var description: String {
        "\(operation)(\(path)): \(String(cString: strerror(errnoValue))) (errno \(errnoValue))"
    }
}

/// Thin wrappers over the `*at` system calls on raw byte names, so that names that are not
/// UTF-8 survive (Foundation substitutes U+FFFD for them on Linux, see TOOLCHAIN.md).
package enum RawFileSystem {
    /// Calls `body` with `bytes` as a NUL-terminated C string.
    package static func withCString<R>(_ bytes: [UInt8], _ body: (UnsafePointer<CChar>) throws -> R) rethrows -> R {
        var terminated = bytes
        terminated.append(0)
        return try terminated.withUnsafeBufferPointer { buffer in
            try buffer.withMemoryRebound(to: CChar.self) { try body($0.baseAddress!) }
        }
    }

    /// A path for messages: UTF-8 as is, other bytes as `\xHH`.
    package static func display(_ bytes: [UInt8]) -> String {
        var out = ""
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte >= 0x20, byte < 0x7F, byte != 0x5C {
                out.unicodeScalars.append(Unicode.Scalar(byte))
                index += 1
                continue
            }
            // Try a whole UTF-8 sequence.
            var length = 0
            if byte >= 0xC2, byte <= 0xDF { length = 2 } else if byte >= 0xE0, byte <= 0xEF { length = 3 } else if byte >= 0xF0, byte <= 0xF4 { length = 4 }
            if length > 0, index + length <= bytes.count,
                let text = String(validating: bytes[index..<(index + length)], as: UTF8.self)
            {
                out += text
                index += length
                continue
            }
            let hex = String(byte, radix: 16)
            out += "\\x" + (hex.count == 1 ? "0" + hex : hex)
            index += 1
        }
        return out
    }

    /// `open(2)` of a directory relative to `directory` (or absolute), never following a final symlink.
    package static func openDirectory(_ path: [UInt8], in directory: Int32 = AT_FDCWD) throws -> Int32 {
        let fd = withCString(path) { openat(directory, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0 else { throw FileSystemTestError("openat", path: path) }
        return fd
    }

    /// `fstatat(2)` without following a final symlink.
    package static func status(_ name: [UInt8], in directory: Int32 = AT_FDCWD) throws -> stat {
        var info = stat()
        let rc = withCString(name) { fstatat(directory, $0, &info, AT_SYMLINK_NOFOLLOW) }
        guard rc == 0 else { throw FileSystemTestError("fstatat", path: name) }
        return info
    }

    /// Whether anything (even a dangling symlink) exists at `path`.
    package static func exists(_ path: [UInt8], in directory: Int32 = AT_FDCWD) -> Bool {
        (try? status(path, in: directory)) != nil
    }

    /// The names in an open directory (without `.` and `..`), sorted by bytes.
    package static func names(in directory: Int32) throws -> [[UInt8]] {
        // Cairn's own listing reads each name in place: a copy of the 256-byte `d_name` field
        // reads past a short entry at the end of readdir's buffer, which crashed a test run.
        try DirectoryReader.names(in: FileDescriptor(rawValue: directory, path: "<directory>"))
    }

    /// The names in the directory at `path`, sorted; empty when it cannot be read.
    package static func names(atPath path: [UInt8]) throws -> [[UInt8]] {
        let fd = try openDirectory(path)
        defer { close(fd) }
        return try names(in: fd)
    }

    /// `utimensat(2)` on `name` (not following a symlink), access and modification time both
    /// set to `nanoseconds` since the epoch.
    package static func setModificationTime(_ name: [UInt8], in directory: Int32, nanoseconds: Int64) throws {
        var times = [timespec(nanoseconds: nanoseconds), timespec(nanoseconds: nanoseconds)]
        let rc = withCString(name) { utimensat(directory, $0, &times, AT_SYMLINK_NOFOLLOW) }
        guard rc == 0 else { throw FileSystemTestError("utimensat", path: name) }
    }

    /// Removes `name` in `directory` and, for a directory, everything below it. Makes
    /// directories writable first, so trees with mode 000 or 0555 parts can be removed.
    package static func removeTree(_ name: [UInt8], in directory: Int32 = AT_FDCWD) {
        guard let info = try? status(name, in: directory) else { return }
        if info.st_mode & S_IFMT == S_IFDIR {
            _ = withCString(name) { fchmodat(directory, $0, 0o700, 0) }
            if let fd = try? openDirectory(name, in: directory) {
                for child in (try? names(in: fd)) ?? [] { removeTree(child, in: fd) }
                close(fd)
            }
            _ = withCString(name) { unlinkat(directory, $0, AT_REMOVEDIR) }
        } else {
            _ = withCString(name) { unlinkat(directory, $0, 0) }
        }
    }

    /// Reads the whole regular file at `path`.
    package static func contents(ofFile name: [UInt8], in directory: Int32 = AT_FDCWD) throws -> [UInt8] {
        let fd = withCString(name) { openat(directory, $0, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK) }
        guard fd >= 0 else { throw FileSystemTestError("openat", path: name) }
        defer { close(fd) }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n >= 0 else { throw FileSystemTestError("read", path: name) }
            if n == 0 { return out }
            out.append(contentsOf: buffer[0..<n])
        }
    }

    /// Writes `bytes` to a new file at `path` (replacing it), mode 0644.
    package static func writeFile(_ path: [UInt8], _ bytes: [UInt8]) throws {
        let fd = withCString(path) { open($0, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644) }
        guard fd >= 0 else { throw FileSystemTestError("open", path: path) }
        defer { close(fd) }
        try writeAll(fd, bytes, path: path)
    }

    package static func writeAll(_ fd: Int32, _ bytes: [UInt8], path: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { raw in write(fd, raw.baseAddress! + offset, raw.count - offset) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw FileSystemTestError("write", path: path) }
            offset += n
        }
    }
}

extension timespec {
    /// Floor division, so times before 1970 come out right.
    init(nanoseconds: Int64) {
        var seconds = nanoseconds / 1_000_000_000
        var rest = nanoseconds % 1_000_000_000
        if rest < 0 {
            seconds -= 1
            rest += 1_000_000_000
        }
        self.init(tv_sec: Int(seconds), tv_nsec: Int(rest))
    }
}
