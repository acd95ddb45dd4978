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

    /// The default: `.watermark(low: .mebibytes(4), high: .mebibytes(8))`: up to eight 1 MiB
    /// batches in flight keep two cores busy; peak memory stays near twice the high watermark
    /// (read buffers plus their compressed forms) above the fixed costs.
    public static let `default` = watermark(low: .mebibytes(4), high: .mebibytes(8))

    public var description: String { "watermark(low: \(low), high: \(high))" }

    func validate() throws(CairnError) {
        guard low.bytes >= 0, high.bytes > 0, low <= high else {
            throw CairnError(.invalidArgument, "backpressure watermarks must satisfy 0 <= low <= high, high > 0 (got \(self))")
        }
    }
}
