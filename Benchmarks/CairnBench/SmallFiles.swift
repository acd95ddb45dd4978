import Foundation
import Glibc

/// The "many small files" case: `count` text files of 200–3000 bytes (uniform, mean 1.6 KB;
/// 100,000 files make about 160 MB), 1,000 to a directory (`d000/f000000.txt`, ...), text from
/// ``TextGenerator``. The same count and seed always give the same tree, byte for byte, with
/// fixed mtimes (whole seconds going back from 2023-11-14), files 0644 and directories 0755.
struct SmallFiles {
    var count: Int
    var seed: UInt64

    static let filesPerDirectory = 1000
    static let sizes = 200...3000
    /// 2023-11-14T22:13:20Z; file `i` gets this minus `i` seconds.
    static let epochSeconds = 1_700_000_000

    /// Writes the tree into `path`, which must not exist yet.
    ///
    /// - Throws: ``BenchError`` naming the path that could not be created or written.
    func generate(at path: String) throws {
        guard mkdir(path, 0o755) == 0 else { throw BenchError("cannot create \(path): \(String(cString: strerror(errno)))") }
        var text = TextGenerator(seed: seed)
        var sizes = BenchRandom(seed: seed ^ 0x5A11_F11E)
        var buffer: [UInt8] = []
        buffer.reserveCapacity(Self.sizes.upperBound + 1024)
        var directory = ""
        for index in 0..<count {
            if index % Self.filesPerDirectory == 0 {
                if !directory.isEmpty { try Self.setTime(directory, seconds: Self.epochSeconds) }
                directory = "\(path)/d\(Self.padded(index / Self.filesPerDirectory, 3))"
                guard mkdir(directory, 0o755) == 0 else {
                    throw BenchError("cannot create \(directory): \(String(cString: strerror(errno)))")
                }
            }
            let size = Self.sizes.lowerBound + Int(sizes.next() % UInt64(Self.sizes.count))
            buffer.removeAll(keepingCapacity: true)
            text.append(to: &buffer, atLeast: size)
            let file = "\(directory)/f\(Self.padded(index, 6)).txt"
            try Self.write(file, buffer[0..<size])
            try Self.setTime(file, seconds: Self.epochSeconds - index)
        }
        if !directory.isEmpty { try Self.setTime(directory, seconds: Self.epochSeconds) }
        try Self.setTime(path, seconds: Self.epochSeconds)
    }

    static func padded(_ value: Int, _ width: Int) -> String {
        let text = String(value)
        return String(repeating: "0", count: max(0, width - text.count)) + text
    }

    private static func write(_ path: String, _ bytes: ArraySlice<UInt8>) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw BenchError("cannot create \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        try bytes.withUnsafeBytes { try writeAll(fd, $0, path: path) }
    }

    private static func setTime(_ path: String, seconds: Int) throws {
        var times = [timespec(tv_sec: seconds, tv_nsec: 0), timespec(tv_sec: seconds, tv_nsec: 0)]
        guard utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW) == 0 else {
            throw BenchError("cannot set the time of \(path): \(String(cString: strerror(errno)))")
        }
    }
}
