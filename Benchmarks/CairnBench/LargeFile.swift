import Foundation
import Glibc

/// The "large file" case: one file, `data.bin`, of `mebibytes` MiB (4096 for issue 9's
/// target) in 1 MiB blocks of mixed content, chosen per block from a seeded stream: half
/// text-like lines (``TextGenerator``), three tenths random bytes, one fifth fixed-size binary
/// records with counters and a few random fields. No two blocks are equal, so deduplication
/// does not shrink the work. The same size and seed always give the same bytes.
struct LargeFile {
    var mebibytes: Int
    var seed: UInt64

    static let fileName = "data.bin"
    static let blockBytes = 1 << 20

    var totalBytes: UInt64 { UInt64(mebibytes) << 20 }

    /// Free bytes the case needs on the work directory's file system: the file itself unless it
    /// is already there, one archive (at most the file's size plus 1/64 for records and frame
    /// overheads), one extracted copy, and 1 GiB to spare.
    static func bytesNeeded(fileBytes: UInt64, alreadyGenerated: Bool) -> UInt64 {
        (alreadyGenerated ? 0 : fileBytes) + fileBytes + fileBytes / 64 + fileBytes + (1 << 30)
    }

    /// Throws unless the file system holding `directory` has ``bytesNeeded(fileBytes:alreadyGenerated:)``
    /// free (`statvfs(3)`, blocks available to unprivileged users).
    ///
    /// - Throws: ``BenchError`` saying how much is needed and how much is free.
    static func checkFreeSpace(in directory: String, fileBytes: UInt64, alreadyGenerated: Bool) throws {
        var info = statvfs()
        guard statvfs(directory, &info) == 0 else {
            throw BenchError("cannot check the free space of \(directory): \(String(cString: strerror(errno)))")
        }
        let free = UInt64(info.f_bavail) * UInt64(info.f_frsize)
        let needed = bytesNeeded(fileBytes: fileBytes, alreadyGenerated: alreadyGenerated)
        guard free >= needed else {
            throw BenchError(
                "refusing the large-file case: it needs \(formatGiB(needed)) free in \(directory) (the file"
                    + (alreadyGenerated ? "'s" : ", its") + " archive and an extracted copy, and 1 GiB to spare), and "
                    + "\(formatGiB(free)) is free; free some space, pass --work DIR on a larger file system, or a smaller --large-file-mib")
        }
    }

    /// Writes `directory` (which must not exist) holding ``fileName``.
    ///
    /// - Throws: ``BenchError`` naming the path that could not be created or written.
    func generate(at directory: String) throws {
        guard mkdir(directory, 0o755) == 0 else {
            throw BenchError("cannot create \(directory): \(String(cString: strerror(errno)))")
        }
        let path = "\(directory)/\(Self.fileName)"
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw BenchError("cannot create \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var choose = BenchRandom(seed: seed ^ 0x1A_26E0)
        var text = TextGenerator(seed: seed)
        var random = RandomFiller(seed: seed ^ 0x0BAD_5EED)
        var fields = BenchRandom(seed: seed ^ 0x12EC_0DD5)
        var lines: [UInt8] = []
        lines.reserveCapacity(Self.blockBytes + 4096)
        let block = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.blockBytes, alignment: 64)
        defer { block.deallocate() }
        var counter: UInt64 = 0
        for _ in 0..<mebibytes {
            switch choose.next() % 10 {
            case 0..<5:
                // Text: carry over what the last block's final line left.
                text.append(to: &lines, atLeast: Self.blockBytes)
                lines.withUnsafeBytes { block.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<Self.blockBytes])) }
                lines.removeFirst(Self.blockBytes)
            case 5..<8:
                random.fill(block)
            default:
                // 64-byte records: a counter, a timestamp, a type, two random fields, padding.
                let words = block.bindMemory(to: UInt64.self)
                for r in stride(from: 0, to: words.count, by: 8) {
                    counter += 1
                    words[r] = counter
                    words[r + 1] = 1_700_000_000_000 + counter * 250
                    words[r + 2] = counter % 7
                    words[r + 3] = fields.next()
                    words[r + 4] = fields.next() & 0xFFFF
                    words[r + 5] = 0
                    words[r + 6] = 0x5245_434F_5244_0000
                    words[r + 7] = 0
                }
            }
            try writeAll(fd, UnsafeRawBufferPointer(block), path: path)
        }
    }
}

func formatGiB(_ bytes: UInt64) -> String {
    String(format: "%.1f GiB", Double(bytes) / 1_073_741_824)
}
