import Glibc
import Synchronization

/// Archive bytes a remote extraction fetched once and may need again, kept in an unnamed file in
/// the staging directory (`O_TMPFILE`, gone when closed) instead of being fetched a second time:
/// the requests of the checks before writing (`Spec/0001 §13.7`: entry records, pack records and
/// what lay between them), whose pack and chunk records the chunk prefetcher then decodes
/// (``ChunkPrefetcher/Source/prefetching(_:)``).
///
/// What is read back is checked again as when it was fetched (record CRC, SHA-256, content
/// digest): the file is a cache, not a trusted copy. Keeping is best effort: bytes that cannot be
/// written (a full disk) are simply fetched again. Memory holds only the index (a few words per
/// request); the bytes are on disk, as many as were kept.
///
/// - Important: Call ``close()`` when the extraction ends.
final class KeptRecords: Sendable {
    private let file: FileDescriptor
    /// Kept ranges sorted by start, each with where its bytes start in the file, and the file's end.
    private let index = Mutex<(ranges: [(range: Range<UInt64>, at: UInt64)], end: UInt64)>(([], 0))

    /// Opens an unnamed file in `staging`'s directory; nil when the file system cannot make one.
    init?(in staging: StagingDirectory) {
        guard
            let fd = try? FileDescriptor.open(
                [0x2E], flags: O_RDWR | StreamExtractor.temporaryFileFlag, mode: 0o600, relativeTo: staging.descriptor)
        else { return nil }
        file = FileDescriptor(rawValue: fd.rawValue, path: "kept records")
    }

    /// Keeps `bytes`, the archive's bytes of `range`; does nothing when they cannot be written.
    func keep(_ bytes: [UInt8], of range: Range<UInt64>) {
        guard bytes.count == range.count else { return }
        index.withLock { state in
            guard Self.holder(of: range, in: state.ranges) == nil else { return }
            let written = bytes.withUnsafeBytes { raw -> Bool in
                var done = 0
                while done < raw.count {
                    guard let base = raw.baseAddress else { return false }
                    let position = off_t(truncatingIfNeeded: state.end &+ UInt64(done))
                    let n = Glibc.pwrite(file.rawValue, base + done, raw.count - done, position)
                    if n < 0, errno == EINTR { continue }
                    guard n > 0 else { return false }
                    done += n
                }
                return true
            }
            guard written else { return }
            let position = state.ranges.partitioningIndex(where: { $0.range.lowerBound > range.lowerBound })
            state.ranges.insert((range, state.end), at: position)
            state.end += UInt64(bytes.count)
        }
    }

    /// The kept range that holds all of `range`, with where its bytes start in the file.
    private static func holder(of range: Range<UInt64>, in ranges: [(range: Range<UInt64>, at: UInt64)]) -> UInt64? {
        let after = ranges.partitioningIndex(where: { $0.range.lowerBound > range.lowerBound })
        guard after > 0, case let kept = ranges[after - 1], range.upperBound <= kept.range.upperBound else { return nil }
        return kept.at + (range.lowerBound - kept.range.lowerBound)
    }

    /// Whether a kept range holds any byte of `range`.
    func holdsAny(of range: Range<UInt64>) -> Bool {
        guard !range.isEmpty else { return false }
        return index.withLock { state in
            // The last kept range starting before `range` ends, and any one starting inside it.
            let after = state.ranges.partitioningIndex(where: { $0.range.lowerBound >= range.upperBound })
            return after > 0 && state.ranges[after - 1].range.upperBound > range.lowerBound
        }
    }

    /// The bytes of `range` when a kept range holds all of them, else nil.
    func bytes(of range: Range<UInt64>) -> [UInt8]? {
        guard let start = index.withLock({ Self.holder(of: range, in: $0.ranges) }) else { return nil }
        var bytes = [UInt8](repeating: 0, count: range.count)
        let got = try? bytes.withMutableBytes { (raw) throws(CairnError) in try file.read(fromAbsoluteOffset: start, into: raw) }
        return got == range.count ? bytes : nil
    }

    /// Closes the file (its blocks are freed).
    func close() {
        _ = try? file.close()
    }
}

extension Array {
    /// The index of the first element for which `belongsAfter` is true, in an array where every
    /// element for which it is false comes first (binary search).
    fileprivate func partitioningIndex(where belongsAfter: (Element) -> Bool) -> Int {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            if belongsAfter(self[middle]) { high = middle } else { low = middle + 1 }
        }
        return low
    }
}
