/// How large each part of a multipart upload is (`Spec/0003-command-line.md §3.3`, item 2), from
/// the part number alone, so that a resumed upload cuts the same parts as the run it continues.
///
/// With a part limit `L` (10,000 on S3) and a base size `b` (the first parts' size, bytes):
/// parts 1 to ``steadyParts`` (⌊4L/5⌋: 8,000) are `b` bytes; after them the size doubles every
/// ``partsPerDoubling`` parts (⌊L/100⌋, at least 1: 100), never above ``largestPartSize``.
/// ``baseSize(estimate:)`` picks `b` so that an archive of the estimated size fills at most
/// ⌊7L/10⌋ parts (7,000): one up to 8/7 of its estimate still needs no larger part, and one of
/// unknown size starts with ``smallestPartSize``. The growth makes any archive S3 can store fit
/// (``capacity(base:)`` is 5.7 TiB with 8 MiB parts; S3's largest object is 5 TiB), while an
/// archive that keeps to its estimate is cut into parts of one size.
///
/// A part is cut at the first commit record at or past its size, so parts are a little larger
/// than these sizes; the last part holds what remains, whatever its size.
package struct PartSizeRule: Sendable, Equatable {
    /// The base size without an estimate, and the smallest base, bytes (8 MiB on S3, which
    /// requires 5 MiB of every part but the last).
    package var smallestPartSize: UInt64
    /// The largest part, bytes (5 GiB on S3).
    package var largestPartSize: UInt64
    /// The most parts one upload may have (10,000 on S3).
    package var partLimit: Int

    /// S3's limits, with 8 MiB first parts.
    package static let s3 = PartSizeRule(smallestPartSize: 8 << 20, largestPartSize: 5 << 30, partLimit: 10_000)

    package init(smallestPartSize: UInt64, largestPartSize: UInt64, partLimit: Int) {
        self.smallestPartSize = smallestPartSize
        self.largestPartSize = max(largestPartSize, smallestPartSize)
        self.partLimit = max(1, partLimit)
    }

    /// Parts of the base size before growth starts: ⌊4 × ``partLimit`` / 5⌋, at least 1.
    package var steadyParts: Int { max(1, partLimit / 5 * 4 + partLimit % 5 * 4 / 5) }

    /// Parts per doubling after ``steadyParts``: ⌊``partLimit`` / 100⌋, at least 1.
    package var partsPerDoubling: Int { max(1, partLimit / 100) }

    /// The parts an estimate is spread over: ⌊7 × ``partLimit`` / 10⌋, at least 1.
    package var estimateParts: Int { max(1, partLimit / 10 * 7 + partLimit % 10 * 7 / 10) }

    /// The size of part `number` (1-based) when the first parts are `base` bytes: `base` up to
    /// ``steadyParts``, then doubled every ``partsPerDoubling`` parts, at most ``largestPartSize``.
    package func size(ofPart number: Int, base: UInt64) -> UInt64 {
        guard number > steadyParts else { return min(base, largestPartSize) }
        let doublings = (number - steadyParts + partsPerDoubling - 1) / partsPerDoubling
        guard doublings < 63 else { return largestPartSize }
        let size = base.multipliedReportingOverflow(by: 1 << UInt64(doublings))
        return size.overflow ? largestPartSize : min(size.partialValue, largestPartSize)
    }

    /// The base size for an archive of about `estimate` bytes: ⌈estimate / ``estimateParts``⌉
    /// rounded up to a MiB, at least ``smallestPartSize``, at most ``largestPartSize``;
    /// ``smallestPartSize`` without an estimate.
    package func baseSize(estimate: UInt64?) -> UInt64 {
        guard let estimate, estimate > 0 else { return smallestPartSize }
        let perPart = estimate / UInt64(estimateParts) + (estimate % UInt64(estimateParts) == 0 ? 0 : 1)
        let mebibyte: UInt64 = 1 << 20
        let rounded = perPart > UInt64.max - mebibyte ? largestPartSize : (perPart + mebibyte - 1) & ~(mebibyte - 1)
        return min(max(smallestPartSize, rounded), largestPartSize)
    }

    /// The bytes ``partLimit`` parts of these sizes hold (the last part, which may be larger, not
    /// counted beyond its size): what an upload can reach before it fails with `.limitExceeded`.
    package func capacity(base: UInt64) -> UInt64 {
        var total: UInt64 = 0
        for number in 1...partLimit {
            let (sum, overflow) = total.addingReportingOverflow(size(ofPart: number, base: base))
            if overflow { return .max }
            total = sum
        }
        return total
    }
}
