import Foundation
import Glibc

/// The "incompressible chunks" case: files of seeded random bytes (1–16 MiB each, 16 to a
/// directory) adding up to `totalBytes`, so every chunk is incompressible and
/// `cairn create --compression lz4` can be compared with `--compression none` on it. The same
/// size and seed always give the same tree.
struct RandomTree {
    var totalBytes: Int
    var seed: UInt64

    static let fileSizes = 1...16
    static let filesPerDirectory = 16

    /// Writes the tree into `path`, which must not exist yet.
    ///
    /// - Throws: ``BenchError`` naming the path that could not be created or written.
    func generate(at path: String) throws {
        guard mkdir(path, 0o755) == 0 else { throw BenchError("cannot create \(path): \(String(cString: strerror(errno)))") }
        var sizes = BenchRandom(seed: seed ^ 0xDA7A_0000)
        var random = RandomFiller(seed: seed)
        var written = 0
        var index = 0
        var directory = ""
        while written < totalBytes {
            if index % Self.filesPerDirectory == 0 {
                directory = "\(path)/d\(SmallFiles.padded(index / Self.filesPerDirectory, 3))"
                guard mkdir(directory, 0o755) == 0 else {
                    throw BenchError("cannot create \(directory): \(String(cString: strerror(errno)))")
                }
            }
            let mebibytes = Self.fileSizes.lowerBound + Int(sizes.next() % UInt64(Self.fileSizes.count))
            let size = min(mebibytes << 20, totalBytes - written)
            try random.writeFile("\(directory)/r\(SmallFiles.padded(index, 5)).bin", bytes: size)
            written += size
            index += 1
        }
    }
}

/// Writes seeded random bytes to files, through one reused 1 MiB buffer.
struct RandomFiller {
    private var rng: BenchRandom
    private var buffer = [UInt64](repeating: 0, count: 1 << 17)

    init(seed: UInt64) { rng = BenchRandom(seed: seed) }

    /// Fills `count` bytes (at most 1 MiB) of `out` with random bytes from this filler's stream.
    mutating func fill(_ out: UnsafeMutableRawBufferPointer) {
        let words = (out.count + 7) / 8
        for i in 0..<min(words, buffer.count) { buffer[i] = rng.next() }
        buffer.withUnsafeBytes { out.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<out.count])) }
    }

    /// Creates `path` (which must not exist) with `bytes` random bytes.
    ///
    /// - Throws: ``BenchError`` naming the file.
    mutating func writeFile(_ path: String, bytes: Int) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw BenchError("cannot create \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let block = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 64)
        defer { block.deallocate() }
        var left = bytes
        while left > 0 {
            let n = min(left, block.count)
            let slice = UnsafeMutableRawBufferPointer(rebasing: block[0..<n])
            fill(slice)
            try writeAll(fd, UnsafeRawBufferPointer(slice), path: path)
            left -= n
        }
    }
}
