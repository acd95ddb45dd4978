import Glibc

/// A number of bytes, written the way people think of buffer sizes.
public struct ByteCount: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The count in bytes.
    public var bytes: Int

    public init(bytes: Int) { self.bytes = bytes }

    public static func bytes(_ count: Int) -> ByteCount { ByteCount(bytes: count) }
    public static func kibibytes(_ count: Int) -> ByteCount { ByteCount(bytes: count * 1024) }
    public static func mebibytes(_ count: Int) -> ByteCount { ByteCount(bytes: count * 1024 * 1024) }

    public static func < (lhs: ByteCount, rhs: ByteCount) -> Bool { lhs.bytes < rhs.bytes }

    public var description: String {
        if bytes % (1024 * 1024) == 0 { return "\(bytes / (1024 * 1024)) MiB" }
        if bytes % 1024 == 0 { return "\(bytes / 1024) KiB" }
        return "\(bytes) B"
    }
}

/// How many bytes an ``Archiver`` may hold in flight: read from a source but not yet handed to
/// the sink.
///
/// With `.watermark(low:high:)`, reading suspends when taking the next batch would pass `high`,
/// and resumes once the writer has brought the bytes in flight down to `low`. Memory therefore
/// stays bounded whatever the file sizes and however slow the sink; a slow sink slows the
/// producer (``Archiver/appendItem(at:)`` suspends) instead of growing buffers.
public struct BackpressurePolicy: Hashable, Sendable, CustomStringConvertible {
    /// Resume reading at or below this many bytes in flight.
    public var low: ByteCount
    /// Never start a batch that would take the bytes in flight past this.
    public var high: ByteCount

    /// Suspends above `high`, resumes at `low`.
    public static func watermark(low: ByteCount, high: ByteCount) -> BackpressurePolicy {
        BackpressurePolicy(low: low, high: high)
    }

    /// The default: ``forWorkers(_:)`` of the processors this process may run on
    /// (`sysconf(_SC_NPROCESSORS_ONLN)`); on two cores `.watermark(low: .mebibytes(3),
    /// high: .mebibytes(6))`. Peak memory stays near twice the high watermark (read buffers
    /// plus their compressed forms) above the fixed costs.
    public static var `default`: BackpressurePolicy {
        forWorkers(Int(truncatingIfNeeded: sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    }

    /// Enough 1 MiB batches in flight to keep `workers` processing tasks busy: two per worker
    /// (one being hashed and compressed, one read ahead or waiting for the writer) and two for
    /// the reader and the writer, so `high` is 2 MiB × (`workers` + 1) and `low` half of it.
    /// Fewer starve the workers; more only add to the peak RSS (issue 9's limit: 64 MiB while
    /// archiving a 4 GiB file).
    ///
    /// - Parameter workers: processing tasks; below 1 counts as 1.
    public static func forWorkers(_ workers: Int) -> BackpressurePolicy {
        let high = ByteCount.mebibytes(2 * (Swift.min(Swift.max(workers, 1), 1024) + 1))
        return watermark(low: .bytes(high.bytes / 2), high: high)
    }

    public var description: String { "watermark(low: \(low), high: \(high))" }

    func validate() throws(CairnError) {
        guard low.bytes >= 0, high.bytes > 0, low <= high else {
            throw CairnError(.invalidArgument, "backpressure watermarks must satisfy 0 <= low <= high, high > 0 (got \(self))")
        }
    }
}
