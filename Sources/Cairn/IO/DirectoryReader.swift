import Glibc

/// Lists a directory with `readdir(3)`, keeping names as raw bytes.
package enum DirectoryReader {
    /// The names in the directory open at `directory` (not including `.` and `..`), sorted by
    /// byte value so archives are deterministic.
    ///
    /// - Throws: `CairnError` `.io` when the directory cannot be read.
    /// - Complexity: O(n log n) in the number of names.
    package static func names(in directory: FileDescriptor) throws(CairnError) -> [[UInt8]] {
        let copy = dup(directory.rawValue)
        guard copy >= 0 else { throw Errno.current.error("cannot read directory", path: directory.path) }
        guard let stream = fdopendir(copy) else {
            let error = Errno.current.error("cannot read directory", path: directory.path)
            Glibc.close(copy)
            throw error
        }
        defer { closedir(stream) }
        rewinddir(stream)
        var names: [[UInt8]] = []
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                if errno != 0 { throw Errno.current.error("cannot read directory", path: directory.path) }
                break
            }
            let name: [UInt8] = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                let length = raw.firstIndex(of: 0) ?? raw.count
                return Array(raw[0..<length])
            }
            if name == [0x2E] || name == [0x2E, 0x2E] { continue }
            names.append(name)
        }
        names.sort { $0.lexicographicallyPrecedes($1) }
        return names
    }
}
