import Foundation
import Glibc

/// Result files that never replace an earlier result.
enum ResultFiles {
    /// Creates empty `stem.ext` for every extension in `directory` with `O_EXCL` (so no existing
    /// file is touched), trying `stem`, `stem-2`, `stem-3`, ... until all of one stem's names are
    /// free; returns the full path of that stem (without extension).
    ///
    /// - Throws: ``BenchError`` naming the file when creation fails for a reason other than
    ///   the name being taken, or after 1,000 taken stems.
    static func reserve(in directory: String, stem: String, extensions: [String]) throws -> String {
        for attempt in 1...1000 {
            let candidate = "\(directory)/\(stem)" + (attempt == 1 ? "" : "-\(attempt)")
            var created: [String] = []
            var taken = false
            for ext in extensions {
                let path = "\(candidate).\(ext)"
                let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
                if fd < 0 {
                    guard errno == EEXIST else { throw BenchError("cannot create \(path): \(String(cString: strerror(errno)))") }
                    taken = true
                    break
                }
                close(fd)
                created.append(path)
            }
            if !taken { return candidate }
            for path in created { unlink(path) }
        }
        throw BenchError("no free result name for \(stem) in \(directory) after 1000 attempts")
    }

    /// Writes `data` into the file `path` that ``reserve(in:stem:extensions:)`` created.
    ///
    /// - Throws: ``BenchError`` naming the file.
    static func fill(_ path: String, with data: Data) throws {
        let fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC)
        guard fd >= 0 else { throw BenchError("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        try data.withUnsafeBytes { try writeAll(fd, $0, path: path) }
    }
}

/// Writes all of `bytes` to `fd` (write(2), retried on EINTR and short writes).
///
/// - Throws: ``BenchError`` naming `path`.
func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, path: String) throws {
    var offset = 0
    while offset < bytes.count {
        let n = write(fd, bytes.baseAddress.map { $0 + offset }, bytes.count - offset)
        if n < 0, errno == EINTR { continue }
        guard n > 0 else { throw BenchError("cannot write \(path): \(String(cString: strerror(errno)))") }
        offset += n
    }
}
