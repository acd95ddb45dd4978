import Glibc
import Synchronization

/// The chunks of holes (`Spec/0002-chunking.md §8`): `length` zero bytes, whose id is that of
/// that many zeros under the archive's id rule (``ChunkIDFunction``), computed once per rule and
/// length and cached for the process.
package enum ZeroChunks {
    private struct CacheKey: Hashable {
        var ids: ChunkIDFunction
        var length: Int
    }

    /// Cached ids by rule and length. Holes are cut into chunks of the policy's maximum length
    /// and one shorter tail each, so few lengths recur; the cache stops growing at
    /// ``cacheLimit`` entries (later ones are computed each time).
    private static let cache = Mutex<[CacheKey: Digest]>([:])
    private static let cacheLimit = 4096

    /// The length of the zero chunk that starts at `position` inside `hole` (`Spec/0002-chunking.md
    /// §8`): holes are cut every `maximum` bytes from their start, the last piece shorter. The
    /// one rule for the archiver and for `diff`'s digest of a local file.
    package static func pieceLength(at position: UInt64, in hole: Range<UInt64>, maximum: UInt64) -> UInt64 {
        min(maximum - (position - hole.lowerBound) % maximum, hole.upperBound - position)
    }

    /// The id of a chunk of `length` zero bytes under `ids`.
    ///
    /// - Parameters:
    ///   - length: bytes, `0...ChunkingPolicy.maximumChunkLength` (8 MiB); longer lengths are
    ///     not chunks and are clamped.
    ///   - ids: the archive's chunk id rule.
    /// - Throws: `.io` only if libcrypto fails.
    package static func id(length: Int, ids: ChunkIDFunction) throws(CairnError) -> Digest {
        let length = min(max(length, 0), ChunkingPolicy.maximumChunkLength)
        let key = CacheKey(ids: ids, length: length)
        if let known = cache.withLock({ $0[key] }) { return known }
        let id = try withZeros(length) { (zeros) throws(CairnError) in try ids.id(of: zeros) }
        cache.withLock { map in
            if map.count < cacheLimit { map[key] = id }
        }
        return id
    }

    /// Calls `body` with `count` zero bytes (`calloc`: the kernel's zero pages, so reading them
    /// does not grow the resident set), clamped to `0...ChunkingPolicy.maximumChunkLength`.
    package static func withZeros<R, E: Error>(_ count: Int, _ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        let count = min(max(count, 0), ChunkingPolicy.maximumChunkLength)
        guard count > 0 else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        guard let memory = calloc(count, 1) else {
            let zeros = [UInt8](repeating: 0, count: count)
            return try zeros.withUnsafeBytes { raw in Result { () throws(E) in try body(raw) } }.get()
        }
        defer { free(memory) }
        return try body(UnsafeRawBufferPointer(start: memory, count: count))
    }
}
