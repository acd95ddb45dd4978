/// The downloads of a seeded fetch's plan of copies and downloads (``DeltaPlan``,
/// `Spec/0001-container-format.md §13.6.2`), read ahead over several connections (§13.8): the
/// ranges the writer will download, in archive order, are read a window at a time through the
/// remote's ``HTTPArchiveSource``, which runs up to its `connections` requests at once and
/// merges only neighbours that touch (gap 0: the same bytes are downloaded as one request at a
/// time would, in fewer or more requests).
///
/// Not for a rebuild (``ArchiveRebuilder``): one that diverges stops asking for its planned
/// ranges (a signed archive's does at its first signature record), and what was read ahead of
/// it would be downloaded for nothing.
///
/// Used by the writer's thread alone. Memory: the window, ``windowBytes`` (16 MiB), or one
/// planned range when that is longer (a record of up to 16 MiB + 12 bytes), and for a moment
/// its copy when the source cut it among the connections.
final class PlannedDownloads {
    /// The planned ranges, ascending, not overlapping.
    private let planned: [Range<UInt64>]
    private let source: HTTPArchiveSource
    /// Ranges read ahead and not yet taken, by their offset.
    private var ahead: [UInt64: [UInt8]] = [:]
    /// Whether anything was read through the source (the report counts its connections).
    private(set) var used = false

    /// The bytes read ahead at most (unless one planned range is longer).
    static let windowBytes: UInt64 = 16 << 20

    /// - Parameters:
    ///   - ranges: the downloads in the order they are asked for, each at most
    ///     ``HTTPArchiveSource/maximumRange`` bytes unless a single record is longer
    ///     (``pieces(of:)`` cuts a plan's downloads so).
    ///   - source: the remote archive, opened with the fetch's validator and connections.
    init(_ ranges: [Range<UInt64>], source: HTTPArchiveSource) {
        planned = ranges.filter { !$0.isEmpty }
        self.source = source
    }

    /// `ranges` cut into pieces of at most ``HTTPArchiveSource/maximumRange`` bytes.
    static func pieces(of ranges: [Range<UInt64>]) -> [Range<UInt64>] {
        ranges.flatMap { RangeCoalescer.coalesce([$0], gap: 0, maximum: HTTPArchiveSource.maximumRange) }
    }

    /// The bytes of `range` when it is one of the planned ranges: taken from what was read
    /// ahead, or read with the planned ranges after it, up to ``windowBytes``, over the source's
    /// connections. Nil when `range` is not a planned range (the caller asks for it alone).
    ///
    /// - Throws: what ``HTTPArchiveSource/read(ranges:gap:)`` throws: `.sourceChanged` for an
    ///   answer that is not the asked part of the same archive, `.network` and `.httpStatus`
    ///   (after the source's retries), naming the URL and offset.
    func bytes(of range: Range<UInt64>) throws(CairnError) -> [UInt8]? {
        if let bytes = ahead.removeValue(forKey: range.lowerBound), bytes.count == range.count { return bytes }
        var low = 0
        var high = planned.count
        while low < high {
            let middle = (low + high) / 2
            if planned[middle].lowerBound < range.lowerBound { low = middle + 1 } else { high = middle }
        }
        guard low < planned.count, planned[low] == range else { return nil }
        var batch: [Range<UInt64>] = []
        var total: UInt64 = 0
        for next in planned[low...] {
            guard batch.isEmpty || total + UInt64(next.count) <= Self.windowBytes else { break }
            batch.append(next)
            total += UInt64(next.count)
        }
        let fetched = try source.read(ranges: batch, gap: 0)
        used = true
        ahead = [:]
        for (asked, bytes) in zip(batch, fetched) { ahead[asked.lowerBound] = bytes }
        return ahead.removeValue(forKey: range.lowerBound)
    }
}
