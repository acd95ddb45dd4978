import Cairn
import Foundation
import Glibc

/// Small files written so that they survive a crash or a reboot, and read with a bound.
enum DurableFile {
    /// The largest status file read back.
    static let maximumBytes = 64 << 10

    /// Writes `bytes` to `path`: a temporary name in the same directory, `fsync(2)`,
    /// `rename(2)` over `path`, then `fsync` of the directory. Creates the directory (mode
    /// 0700) and its missing parents.
    ///
    /// - Throws: `CairnError` `.io` naming the path and the `errno`.
    static func write(_ bytes: [UInt8], to path: String) throws(CairnError) {
        let directory = (path as NSString).deletingLastPathComponent
        if mkdir(directory, 0o700) != 0, errno != EEXIST {
            do {
                try FileManager.default.createDirectory(
                    atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw failure("cannot create the directory", directory)
            }
        }
        try FileSystem.writeDurably(bytes, to: path, mode: 0o644)
    }

    /// `fsync(2)` of a directory, so that a rename or unlink in it is durable.
    static func syncDirectory(_ directory: String) throws(CairnError) {
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw failure("cannot open the directory", directory) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw failure("cannot fsync the directory", directory) }
    }

    /// The contents of `path`, or nil when it does not exist.
    ///
    /// - Throws: `.limitExceeded` for a file over ``maximumBytes``; `.io`.
    static func read(_ path: String) throws(CairnError) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw failure("cannot open", path)
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n >= 0 else { throw failure("cannot read", path) }
            if n == 0 { return bytes }
            guard bytes.count + n <= maximumBytes else {
                throw CairnError(.limitExceeded, "the file is larger than \(maximumBytes) bytes", path: path)
            }
            bytes += buffer[0..<n]
        }
    }

    static func failure(_ what: String, _ path: String, _ value: Int32 = errno) -> CairnError {
        Errno(rawValue: value).error(.io, what, path: path)
    }
}
