/// Turns the byte ranges a reader wants into the single-range requests a remote source sends
/// (``HTTPArchiveSource/read(ranges:)``): sorted, overlapping and near neighbours merged, none
/// longer than a cap.
package enum RangeCoalescer {
    /// The requests that cover `ranges`.
    ///
    /// - Parameters:
    ///   - gap: neighbours at most this many bytes apart are merged (the gap is fetched and
    ///     dropped: one request costs more than a few KiB of bytes).
    ///   - maximum: the longest request, in bytes (> 0); a longer wanted range is split into
    ///     consecutive requests.
    /// - Returns: disjoint, non-empty ranges in ascending order whose union holds every range given.
    /// - Complexity: O(n log n) for n ranges.
    package static func coalesce(_ ranges: [Range<UInt64>], gap: UInt64, maximum: UInt64) -> [Range<UInt64>] {
        let cap = max(1, maximum)
        let sorted = ranges.filter { !$0.isEmpty }.sorted { $0.lowerBound < $1.lowerBound }
        var merged: [Range<UInt64>] = []
        for range in sorted {
            if let last = merged.last, range.lowerBound <= last.upperBound || range.lowerBound - last.upperBound <= gap {
                let upper = max(last.upperBound, range.upperBound)
                // Merge unless the request would outgrow the cap; an overlap must merge (then split).
                if upper - last.lowerBound <= cap || range.lowerBound < last.upperBound {
                    merged[merged.count - 1] = last.lowerBound..<upper
                    continue
                }
            }
            merged.append(range)
        }
        var requests: [Range<UInt64>] = []
        requests.reserveCapacity(merged.count)
        for range in merged {
            var start = range.lowerBound
            while start < range.upperBound {
                let end = range.upperBound - start > cap ? start + cap : range.upperBound
                requests.append(start..<end)
                start = end
            }
        }
        return requests
    }
}
