/// Hashes and compresses a batch of chunks on every core, keeping their order.
///
/// A batch is a list of ranges into one immutable buffer. Phase one computes every chunk's
/// SHA-256 in parallel; the caller then decides which are new (the dedup index lives in the
/// serial ``ArchiveWriter``); phase two compresses only the new chunks in parallel. Results
/// come back in input order, so the archive bytes do not depend on scheduling.
package struct ChunkBatchProcessor: Sendable {
    package var compression: CompressionMethod
    package var concurrency: Int
    /// Batches smaller than this are processed on the calling task (spawning costs more).
    package var parallelThreshold = 256 * 1024

    package init(compression: CompressionMethod, concurrency: Int) {
        self.compression = compression
        self.concurrency = max(1, concurrency)
    }

    /// SHA-256 of each range of `buffer`, in order.
    package func hash(_ buffer: [UInt8], ranges: [Range<Int>]) async throws -> [Digest] {
        try await map(buffer, ranges: ranges) { raw, _ in try SHA256.hash(raw) }
    }

    /// Stored form (codec, bytes) of each range of `buffer`, in order.
    package func compress(_ buffer: [UInt8], ranges: [Range<Int>]) async throws -> [StoredChunk] {
        let method = compression
        return try await map(buffer, ranges: ranges, makeState: { ChunkCompressor(method: method) }) { raw, compressor in
            var out: [UInt8] = []
            let codec = compressor.compress(raw, appendingTo: &out)
            return StoredChunk(codec: codec, bytes: out)
        }
    }

    private func map<T: Sendable>(
        _ buffer: [UInt8], ranges: [Range<Int>], transform: @escaping @Sendable (UnsafeRawBufferPointer, Void) throws -> T
    ) async throws -> [T] {
        try await map(buffer, ranges: ranges, makeState: {}, transform: transform)
    }

    /// Applies `transform` to each range, splitting the ranges into contiguous groups, one task
    /// per group; each task makes its own state (a compressor, for example).
    private func map<T: Sendable, State>(
        _ buffer: [UInt8], ranges: [Range<Int>], makeState: @escaping @Sendable () -> State,
        transform: @escaping @Sendable (UnsafeRawBufferPointer, State) throws -> T
    ) async throws -> [T] {
        let total = ranges.reduce(0) { $0 + $1.count }
        let groups = min(concurrency, ranges.count)
        if groups <= 1 || total < parallelThreshold {
            let state = makeState()
            return try buffer.withUnsafeBytes { raw in
                try ranges.map { try transform(UnsafeRawBufferPointer(rebasing: raw[$0]), state) }
            }
        }
        return try await withThrowingTaskGroup(of: (Int, [T]).self) { group in
            let per = (ranges.count + groups - 1) / groups
            for g in 0..<groups {
                let lower = g * per
                let upper = min(ranges.count, lower + per)
                if lower >= upper { continue }
                let slice = Array(ranges[lower..<upper])
                group.addTask {
                    let state = makeState()
                    let values = try buffer.withUnsafeBytes { raw in
                        try slice.map { try transform(UnsafeRawBufferPointer(rebasing: raw[$0]), state) }
                    }
                    return (g, values)
                }
            }
            var parts = [[T]](repeating: [], count: groups)
            for try await (g, values) in group { parts[g] = values }
            return parts.flatMap { $0 }
        }
    }
}

/// A chunk's stored form.
package struct StoredChunk: Sendable {
    package var codec: ChunkCodec
    package var bytes: [UInt8]
}
