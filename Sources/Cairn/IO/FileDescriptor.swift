internal import CLinux
import Glibc

/// A thin, swift-system-shaped wrapper over a POSIX file descriptor.
///
/// Every call retries on `EINTR` and turns a failure into ``CairnError`` with code `.io`, the
/// path it was opened with, and `strerror(errno)` as the cause.
///
/// - Important: The descriptor is not closed by `deinit`; call ``close()`` or use
///   ``closeAfter(_:)``. Teardown never depends on object lifetime.
package struct FileDescriptor: ByteInput, Sendable {
    /// The raw descriptor.
    package let rawValue: Int32
    /// The path the descriptor was opened with, for error messages.
    package let path: String

    package init(rawValue: Int32, path: String) {
        self.rawValue = rawValue
        self.path = path
    }

    package static let standardInput = FileDescriptor(rawValue: 0, path: "<stdin>")
    package static let standardOutput = FileDescriptor(rawValue: 1, path: "<stdout>")

    /// Opens `path` with `open(2)`; `O_CLOEXEC` is always added.
    package static func open(
        _ path: [UInt8], flags: Int32, mode: mode_t = 0o644, relativeTo directory: FileDescriptor? = nil
    ) throws(CairnError) -> FileDescriptor {
        let display = PathBytes.display(path)
        let fd: Int32 = path.withNullTerminated { cPath in
            retryOnInterrupt {
                Glibc.openat(directory?.rawValue ?? AT_FDCWD, cPath, flags | O_CLOEXEC, mode)
            }
        }
        guard fd >= 0 else { throw Errno.current.error("cannot open", path: display) }
        return FileDescriptor(rawValue: fd, path: display)
    }

    /// Opens a `String` path (UTF-8) with `open(2)`.
    package static func open(_ path: String, flags: Int32, mode: mode_t = 0o644) throws(CairnError)
        -> FileDescriptor
    {
        try open(Array(path.utf8), flags: flags, mode: mode)
    }

    /// `read(2)` into `buffer`, retrying on `EINTR`. Returns the number of bytes read; 0 at end
    /// of file.
    package func read(into buffer: UnsafeMutableRawBufferPointer) throws(CairnError) -> Int {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return 0 }
        let n = retryOnInterrupt { Glibc.read(rawValue, base, buffer.count) }
        guard n >= 0 else { throw Errno.current.error("read failed", path: path) }
        return n
    }

    /// Reads until `buffer` is full or end of file. Returns the number of bytes read.
    package func readFully(into buffer: UnsafeMutableRawBufferPointer) throws(CairnError) -> Int {
        var total = 0
        while total < buffer.count {
            let n = try read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[total...]))
            if n == 0 { break }
            total += n
        }
        return total
    }

    /// `pread(2)` until `buffer` is full or end of file, retrying on `EINTR`. Returns the bytes
    /// read.
    package func read(fromAbsoluteOffset offset: UInt64, into buffer: UnsafeMutableRawBufferPointer)
        throws(CairnError) -> Int
    {
        var total = 0
        while total < buffer.count {
            guard let base = buffer.baseAddress else { return 0 }
            let position = off_t(truncatingIfNeeded: offset &+ UInt64(total))
            let n = retryOnInterrupt {
                Glibc.pread(rawValue, base + total, buffer.count - total, position)
            }
            guard n >= 0 else {
                throw Errno.current.error("read failed", path: path, offset: offset)
            }
            if n == 0 { break }
            total += n
        }
        return total
    }

    /// Writes all of `buffer` at `offset` with `pwrite(2)` (the file offset does not move),
    /// retrying on `EINTR` and short writes; safe from several threads at once on one descriptor.
    ///
    /// - Throws: `.io` naming the file and `offset` (a full disk is `ENOSPC`).
    package func writeAll(_ buffer: UnsafeRawBufferPointer, atAbsoluteOffset offset: UInt64) throws(CairnError) {
        var done = 0
        while done < buffer.count {
            guard let base = buffer.baseAddress else { return }
            let position = off_t(truncatingIfNeeded: offset &+ UInt64(done))
            let n = retryOnInterrupt { Glibc.pwrite(rawValue, base + done, buffer.count - done, position) }
            guard n > 0 else { throw Errno.current.error("write failed", path: path, offset: offset &+ UInt64(done)) }
            done += n
        }
    }

    /// Writes all of `buffer` with `write(2)`, retrying on `EINTR` and short writes.
    package func writeAll(_ buffer: UnsafeRawBufferPointer) throws(CairnError) {
        var done = 0
        while done < buffer.count {
            guard let base = buffer.baseAddress else { return }
            let n = retryOnInterrupt { Glibc.write(rawValue, base + done, buffer.count - done) }
            guard n > 0 else { throw Errno.current.error("write failed", path: path) }
            done += n
        }
    }

    /// Writes all of `bytes`.
    package func writeAll(_ bytes: [UInt8]) throws(CairnError) {
        try bytes.withBytes { (buffer) throws(CairnError) in try writeAll(buffer) }
    }

    /// `fsync(2)`.
    package func sync() throws(CairnError) {
        guard retryOnInterrupt({ Glibc.fsync(rawValue) }) == 0 else {
            throw Errno.current.error("fsync failed", path: path)
        }
    }

    /// Starts writing back the dirty pages of `count` bytes at `offset` without waiting for
    /// them (`sync_file_range(2)` with `SYNC_FILE_RANGE_WRITE`), so that a later ``sync()``
    /// has less left to wait for. A hint: failures are ignored, and ``sync()`` reports any.
    package func startWriteback(at offset: UInt64, count: Int) {
        guard let start = Int64(exactly: offset) else { return }
        _ = cairn_start_writeback(rawValue, start, Int64(count))
    }

    /// The file offset (`lseek(2)` with `SEEK_CUR`); nil for a pipe or socket.
    package var currentOffset: UInt64? {
        let at = lseek(rawValue, 0, SEEK_CUR)
        return at < 0 ? nil : UInt64(at)
    }

    /// `fstat(2)`.
    package func status() throws(CairnError) -> FileStatus {
        var st = stat()
        guard Glibc.fstat(rawValue, &st) == 0 else {
            throw Errno.current.error("cannot stat", path: path)
        }
        return FileStatus(st)
    }

    /// `lseek(2)` to an absolute offset.
    package func seek(to offset: UInt64) throws(CairnError) {
        guard Glibc.lseek(rawValue, off_t(truncatingIfNeeded: offset), SEEK_SET) >= 0 else {
            throw Errno.current.error("seek failed", path: path, offset: offset)
        }
    }

    /// A second descriptor for the same open file (`open("/proc/self/fd/N")`, so it has its own
    /// offset), positioned at 0: a sequential reader that does not disturb this one.
    package func duplicatedAtStart() throws(CairnError) -> FileDescriptor {
        let fd = try FileDescriptor.open("/proc/self/fd/\(rawValue)", flags: O_RDONLY)
        return FileDescriptor(rawValue: fd.rawValue, path: path)
    }

    /// `ftruncate(2)`.
    package func truncate(to length: UInt64) throws(CairnError) {
        guard Glibc.ftruncate(rawValue, off_t(truncatingIfNeeded: length)) == 0 else {
            throw Errno.current.error("truncate failed", path: path, offset: length)
        }
    }

    /// `close(2)`. Errors from close are reported (they can signal a failed deferred write).
    package func close() throws(CairnError) {
        guard Glibc.close(rawValue) == 0 else {
            throw Errno.current.error("close failed", path: path)
        }
    }

    /// Runs `body`, then closes the descriptor whatever happened.
    package func closeAfter<R>(_ body: () throws(CairnError) -> R) throws(CairnError) -> R {
        let result: R
        do {
            result = try body()
        } catch {
            _ = Glibc.close(rawValue)
            throw error
        }
        try close()
        return result
    }
}

/// Calls `body` until it does not fail with `EINTR`.
@inline(__always)
package func retryOnInterrupt<T: BinaryInteger>(_ body: () -> T) -> T {
    while true {
        let result = body()
        if result < 0 && errno == EINTR { continue }
        return result
    }
}
