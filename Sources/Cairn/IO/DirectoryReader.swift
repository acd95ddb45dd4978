import Glibc

/// Lists a directory with `readdir(3)`, keeping names as raw bytes.
package enum DirectoryReader {
    /// One name in a directory, with what `readdir(3)` already says about its type.
    package struct Entry: Sendable {
        /// The name, raw bytes, one component.
        package var name: [UInt8]
        /// Whether `d_type` says a regular file (`DT_REG`). False for every other type and for
        /// `DT_UNKNOWN` (file systems that do not fill `d_type` in): then only `fstatat(2)`
        /// tells. A hint as of the listing: the name may have been replaced since.
        package var isRegularFile: Bool
    }

    /// The names in the directory open at `directory` (not including `.` and `..`), sorted by
    /// byte value so archives are deterministic.
    ///
    /// - Throws: `CairnError` `.io` when the directory cannot be read.
    /// - Complexity: O(n log n) in the number of names.
    package static func names(in directory: FileDescriptor) throws(CairnError) -> [[UInt8]] {
        try entries(in: directory).map(\.name)
    }

    /// ``names(in:)`` with each name's `d_type` hint (``Entry/isRegularFile``), so a walk can
    /// open a regular file without an `fstatat(2)` first.
    ///
    /// - Throws: `CairnError` `.io` when the directory cannot be read.
    /// - Complexity: O(n log n) in the number of names.
    package static func entries(in directory: FileDescriptor) throws(CairnError) -> [Entry] {
        let copy = dup(directory.rawValue)
        guard copy >= 0 else { throw Errno.current.error("cannot read directory", path: directory.path) }
        guard let stream = fdopendir(copy) else {
            let error = Errno.current.error("cannot read directory", path: directory.path)
            Glibc.close(copy)
            throw error
        }
        defer { closedir(stream) }
        rewinddir(stream)
        let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name) ?? 0
        var entries: [Entry] = []
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                if errno != 0 { throw Errno.current.error("cannot read directory", path: directory.path) }
                break
            }
            // The name in place (NUL-terminated within `d_name`), not a copy of the 256-byte field.
            let start = UnsafeRawPointer(entry) + nameOffset
            let length = strnlen(start.assumingMemoryBound(to: CChar.self), MemoryLayout<dirent>.size - nameOffset)
            if length <= 2, start.load(as: UInt8.self) == 0x2E, length == 1 || (start + 1).load(as: UInt8.self) == 0x2E {
                continue  // "." and ".."
            }
            entries.append(
                Entry(name: Array(UnsafeRawBufferPointer(start: start, count: length)), isRegularFile: entry.pointee.d_type == UInt8(DT_REG)))
        }
        entries.sort { precedes($0.name, $1.name) }
        return entries
    }

    /// Byte order (`memcmp`, then the shorter first): the order of ``names(in:)``, the same as
    /// `lexicographicallyPrecedes` on the bytes, without its element-by-element loop.
    static func precedes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.withUnsafeBytes { x in
            b.withUnsafeBytes { y in
                let common = min(x.count, y.count)
                if common > 0, let p = x.baseAddress, let q = y.baseAddress {
                    let order = memcmp(p, q, common)
                    if order != 0 { return order < 0 }
                }
                return x.count < y.count
            }
        }
    }
}
