import Cairn
import Glibc

/// Creates the corpus's directories, files and symlink under a root, through one reused 1 MiB
/// buffer and plain `write(2)` calls, with fixed modes and nanosecond mtimes.
///
/// Content generators append into the current file; appends past the file's declared size are
/// dropped, so a generator simply loops `while writer.remaining > 0`. The first I/O error is
/// kept and rethrown by ``endFile()`` (so the inner loops do not need `try`).
final class CorpusWriter {
    /// Bytes buffered before a `write(2)`; a multiple of the 4 KiB database page.
    static let capacity = 1 << 20

    let root: String
    private let buffer: UnsafeMutableRawPointer
    private var used = 0
    private var fd: Int32 = -1
    private var currentPath = ""
    private var currentMode: mode_t = 0o644
    private var currentTime: Int64 = 0
    private var failure: CairnError?
    /// Bytes the current file still takes.
    private(set) var remaining = 0

    /// Directories created, relative to the root, with their mtimes (set at the end).
    private var directories: [String: Int64] = [:]
    private(set) var fileCount = 0
    private(set) var totalBytes: UInt64 = 0
    /// Relative paths already used, so no generator writes a name twice.
    private var usedPaths: Set<String> = []

    init(root: String) {
        self.root = root
        buffer = UnsafeMutableRawPointer.allocate(byteCount: CorpusWriter.capacity, alignment: 16)
    }

    deinit {
        if fd >= 0 { close(fd) }
        buffer.deallocate()
    }

    var directoryCount: Int { directories.count }

    func isUsed(_ relativePath: String) -> Bool { usedPaths.contains(relativePath) }

    // MARK: - Directories and links

    /// Creates `relativePath` and its missing parents with mode 0755 (`mkdir(2)`, `chmod(2)`).
    func makeDirectory(_ relativePath: String, modificationTime: Int64) throws(CairnError) {
        guard !relativePath.isEmpty, directories[relativePath] == nil else { return }
        if let slash = relativePath.lastIndex(of: "/") {
            try makeDirectory(String(relativePath[..<slash]), modificationTime: modificationTime)
        }
        let full = root + "/" + relativePath
        guard mkdir(full, 0o755) == 0, chmod(full, 0o755) == 0 else {
            throw Errno.current.error("cannot create directory", path: full)
        }
        directories[relativePath] = modificationTime
    }

    /// Creates the symlink `relativePath` → `target` (`symlink(2)`, `utimensat(2)` without
    /// following it).
    func makeSymlink(_ relativePath: String, target: String, modificationTime: Int64) throws(CairnError) {
        try makeParent(of: relativePath, modificationTime: modificationTime)
        let full = root + "/" + relativePath
        guard symlink(target, full) == 0 else { throw Errno.current.error("cannot create symlink", path: full) }
        var times = (Self.time(modificationTime), Self.time(modificationTime))
        let rc = withUnsafePointer(to: &times) { pointer in
            pointer.withMemoryRebound(to: timespec.self, capacity: 2) {
                utimensat(AT_FDCWD, full, $0, AT_SYMLINK_NOFOLLOW)
            }
        }
        guard rc == 0 else { throw Errno.current.error("cannot set modification time", path: full) }
        usedPaths.insert(relativePath)
    }

    /// Sets every directory's mtime, deepest first (creating entries changed them), then the
    /// root's.
    func finishDirectories(rootModificationTime: Int64) throws(CairnError) {
        for (path, time) in directories.sorted(by: { $0.key.utf8.count > $1.key.utf8.count }) {
            try setTime(root + "/" + path, time)
        }
        try setTime(root, rootModificationTime)
    }

    private func makeParent(of relativePath: String, modificationTime: Int64) throws(CairnError) {
        if let slash = relativePath.lastIndex(of: "/") {
            try makeDirectory(String(relativePath[..<slash]), modificationTime: modificationTime)
        }
    }

    private func setTime(_ path: String, _ nanoseconds: Int64) throws(CairnError) {
        var times = (Self.time(nanoseconds), Self.time(nanoseconds))
        let rc = withUnsafePointer(to: &times) { pointer in
            pointer.withMemoryRebound(to: timespec.self, capacity: 2) { utimensat(AT_FDCWD, path, $0, 0) }
        }
        guard rc == 0 else { throw Errno.current.error("cannot set modification time", path: path) }
    }

    static func time(_ nanoseconds: Int64) -> timespec {
        var seconds = nanoseconds / 1_000_000_000
        var rest = nanoseconds % 1_000_000_000
        if rest < 0 {
            seconds -= 1
            rest += 1_000_000_000
        }
        return timespec(tv_sec: Int(seconds), tv_nsec: Int(rest))
    }

    // MARK: - Files

    /// Starts the file `relativePath` of exactly `size` bytes (`open(2)` with `O_EXCL`).
    func beginFile(_ relativePath: String, size: Int, mode: mode_t = 0o644, modificationTime: Int64) throws(CairnError) {
        precondition(fd < 0, "the previous file was not ended")
        try makeParent(of: relativePath, modificationTime: modificationTime)
        let full = root + "/" + relativePath
        let descriptor = open(full, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode)
        guard descriptor >= 0 else { throw Errno.current.error("cannot create file", path: full) }
        fd = descriptor
        currentPath = full
        currentMode = mode
        currentTime = modificationTime
        remaining = size
        used = 0
        usedPaths.insert(relativePath)
        fileCount += 1
        totalBytes += UInt64(size)
    }

    /// Flushes, sets mode and mtime (`fchmod(2)`, `futimens(2)`) and closes the file.
    func endFile() throws(CairnError) {
        flush()
        precondition(failure != nil || remaining == 0, "a generator stopped before the declared size")
        defer {
            close(fd)
            fd = -1
        }
        if let failure { throw failure }
        var times = (Self.time(currentTime), Self.time(currentTime))
        let rc = withUnsafePointer(to: &times) { pointer in
            pointer.withMemoryRebound(to: timespec.self, capacity: 2) { futimens(fd, $0) }
        }
        guard fchmod(fd, currentMode) == 0, rc == 0 else {
            throw Errno.current.error("cannot set mode or modification time", path: currentPath)
        }
    }

    /// Writes a whole file from `bytes`.
    func writeFile(
        _ relativePath: String, bytes: UnsafeRawBufferPointer, mode: mode_t = 0o644, modificationTime: Int64
    ) throws(CairnError) {
        try beginFile(relativePath, size: bytes.count, mode: mode, modificationTime: modificationTime)
        append(bytes)
        try endFile()
    }

    private func flush() {
        guard used > 0 else { return }
        defer { used = 0 }
        guard failure == nil else { return }
        var offset = 0
        while offset < used {
            let n = write(fd, buffer + offset, used - offset)
            if n < 0 {
                if errno == EINTR { continue }
                failure = Errno.current.error("cannot write", path: currentPath)
                return
            }
            offset += n
        }
    }

    // MARK: - Appending content

    /// Appends up to ``remaining`` bytes of `bytes`.
    @inline(__always)
    func append(_ bytes: UnsafeRawBufferPointer) {
        var source = bytes.baseAddress
        var count = min(bytes.count, remaining)
        while count > 0, let from = source {
            if used == CorpusWriter.capacity { flush() }
            let n = min(count, CorpusWriter.capacity - used)
            (buffer + used).copyMemory(from: from, byteCount: n)
            used += n
            remaining -= n
            count -= n
            source = from + n
        }
    }

    /// Appends a short byte string (at most 16 bytes, with 16 bytes readable at its start, as
    /// the vocabulary guarantees) with two 8-byte copies instead of a `memmove` call.
    @inline(__always)
    func append(word: UnsafeRawBufferPointer) {
        let n = word.count
        guard n <= remaining, used + 16 <= CorpusWriter.capacity, let source = word.baseAddress else {
            return append(word)
        }
        (buffer + used).storeBytes(of: source.loadUnaligned(as: UInt64.self), as: UInt64.self)
        (buffer + used + 8).storeBytes(of: source.loadUnaligned(fromByteOffset: 8, as: UInt64.self), as: UInt64.self)
        used += n
        remaining -= n
    }

    @inline(__always)
    func append(_ text: StaticString) {
        text.withUTF8Buffer { append(UnsafeRawBufferPointer($0)) }
    }

    @inline(__always)
    func append(byte: UInt8) {
        guard remaining > 0 else { return }
        if used == CorpusWriter.capacity { flush() }
        buffer.storeBytes(of: byte, toByteOffset: used, as: UInt8.self)
        used += 1
        remaining -= 1
    }

    /// Appends `count` copies of `byte`.
    func append(repeating byte: UInt8, count: Int) {
        var left = min(count, remaining)
        while left > 0 {
            if used == CorpusWriter.capacity { flush() }
            let n = min(left, CorpusWriter.capacity - used)
            (buffer + used).initializeMemory(as: UInt8.self, repeating: byte, count: n)
            used += n
            remaining -= n
            left -= n
        }
    }

    /// Appends a decimal number, zero-padded to `width` digits.
    func append(decimal value: UInt64, width: Int = 1) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes of scratch
        withUnsafeMutableBytes(of: &digits) { scratch in
            var v = value
            var i = scratch.count
            repeat {
                i -= 1
                scratch[i] = UInt8(ascii: "0") + UInt8(v % 10)
                v /= 10
            } while v > 0 && i > 0
            while scratch.count - i < width && i > 0 {
                i -= 1
                scratch[i] = UInt8(ascii: "0")
            }
            append(UnsafeRawBufferPointer(rebasing: scratch[i...]))
        }
    }

    /// Appends `count` lowercase hexadecimal digits.
    func append(hexDigits count: Int, using rng: inout SplitMix64) {
        var bits = rng.next()
        for i in 0..<count {
            if i > 0 && i % 16 == 0 { bits = rng.next() }
            let nibble = UInt8(truncatingIfNeeded: bits & 0xF)
            bits >>= 4
            append(byte: nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10)
        }
    }

    /// Appends `count` random bytes (incompressible).
    func append(randomBytes count: Int, using rng: inout SplitMix64) {
        var left = min(count, remaining)
        while left > 0 {
            if used == CorpusWriter.capacity { flush() }
            let n = min(left, CorpusWriter.capacity - used)
            let words = n / 8
            let base = buffer + used
            for w in 0..<words {
                base.storeBytes(of: rng.next(), toByteOffset: w * 8, as: UInt64.self)
            }
            if n % 8 != 0 {
                var last = rng.next()
                withUnsafeBytes(of: &last) { base.advanced(by: words * 8).copyMemory(from: $0.baseAddress!, byteCount: n % 8) }
            }
            used += n
            remaining -= n
            left -= n
        }
    }
}
