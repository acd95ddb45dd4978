/// The ranges of a parallel fetch (`Spec/0001-container-format.md §13.8`): the pieces of the
/// archive still to download, handed out lowest offset first so that the verified prefix
/// advances, those in flight, and those received whole. A synchronous value whose owner keeps it
/// in a lock; the range arithmetic (merging, subtracting, the holes left) is here and nowhere
/// else, for the schedule and the state file alike.
struct RangeSchedule: Sendable {
    /// The archive's length.
    let total: UInt64
    /// Received whole: sorted, merged.
    private(set) var received: [Range<UInt64>]
    /// Still to download, ascending.
    private var pending: [Range<UInt64>]
    /// Handed out and not yet received or given back.
    private var inFlight: [Range<UInt64>] = []
    /// What ended the download: no piece is handed out after it.
    private(set) var failure: CairnError?

    /// The smallest piece (64 KiB): below it a request's round trip costs more than its bytes.
    static let minimumPiece: UInt64 = 64 << 10

    /// - Parameters:
    ///   - total: the archive's length.
    ///   - start: the end of the verified prefix: nothing before it is downloaded.
    ///   - received: ranges received whole by earlier runs (the state file's).
    ///   - pieceSize: the most bytes one request asks for.
    ///   - taken: a range downloaded outside the schedule (a fetch's first request).
    init(total: UInt64, start: UInt64, received: [Range<UInt64>], pieceSize: UInt64, taken: Range<UInt64>? = nil) {
        self.total = total
        self.received = received.reduce(into: []) { Self.merge($1, into: &$0) }
        let size = max(1, pieceSize)
        pending = Self.wanted(total: total, start: start, received: self.received, taken: taken).flatMap { hole in
            stride(from: hole.lowerBound, to: hole.upperBound, by: Int(clamping: size)).map { $0..<min(hole.upperBound, $0 + size) }
        }
        if let taken { inFlight = [taken] }
    }

    /// The schedule of a download over `connections` (`Spec/0001 §13.8`): the bytes still
    /// wanted (the holes after `start`, less `taken`) cut into pieces of
    /// ``pieceSize(remaining:connections:maximum:)`` of their sum, so that every connection
    /// gets work whether they are the rest of a fresh fetch or the one hole a killed run had in
    /// flight.
    static func sharing(
        total: UInt64, start: UInt64, received: [Range<UInt64>], connections: Int, maximum: UInt64, taken: Range<UInt64>? = nil
    ) -> RangeSchedule {
        let merged = received.reduce(into: []) { Self.merge($1, into: &$0) }
        let remaining = wanted(total: total, start: start, received: merged, taken: taken).reduce(0) { $0 + UInt64($1.count) }
        let size = pieceSize(remaining: remaining, connections: connections, maximum: maximum)
        return RangeSchedule(total: total, start: start, received: merged, pieceSize: size, taken: taken)
    }

    /// The bytes to download: the parts of `start ..< total` that the sorted, merged `received`
    /// does not cover, less `taken`.
    private static func wanted(total: UInt64, start: UInt64, received: [Range<UInt64>], taken: Range<UInt64>?) -> [Range<UInt64>] {
        let holes = Self.holes(in: received, within: min(start, total)..<total)
        guard let taken else { return holes }
        return holes.flatMap { Self.subtract(taken, from: [$0]) }
    }

    /// The size of the pieces (`Spec/0001 §13.8`): the `remaining` bytes to download shared
    /// among the connections, so that each gets work, rounded up to 64 KiB, and at most
    /// `maximum` (8 MiB by default: S3's guidance is 8–16 MB ranges).
    static func pieceSize(remaining: UInt64, connections: Int, maximum: UInt64) -> UInt64 {
        let count = UInt64(max(1, connections))
        let share = remaining / count + (remaining % count == 0 ? 0 : 1)
        let rounded = (share + minimumPiece - 1) / minimumPiece * minimumPiece
        return max(minimumPiece, min(max(minimumPiece, maximum), rounded))
    }

    /// The next piece to download, lowest offset first; nil when none is left or the download failed.
    mutating func next() -> Range<UInt64>? {
        guard failure == nil, !pending.isEmpty else { return nil }
        let piece = pending.removeFirst()
        inFlight.append(piece)
        return piece
    }

    /// The bytes `range` (of a piece in flight) arrived and were written.
    mutating func receive(_ range: Range<UInt64>) {
        Self.merge(range, into: &received)
    }

    /// `piece` ended: all of it arrived, or what did not (`remainder`) is to be downloaded again.
    mutating func end(_ piece: Range<UInt64>, remainder: Range<UInt64>? = nil) {
        inFlight.removeAll { $0 == piece }
        guard let remainder, !remainder.isEmpty else { return }
        let index = pending.firstIndex { $0.lowerBound > remainder.lowerBound } ?? pending.endIndex
        pending.insert(remainder, at: index)
    }

    /// Ends the download with `error` (the first failure is kept).
    mutating func fail(_ error: CairnError) {
        if failure == nil { failure = error }
    }

    /// Whether nothing is pending or in flight.
    var isIdle: Bool { pending.isEmpty && inFlight.isEmpty }

    /// The end of the received bytes from `position` on (`position` itself when the byte there
    /// has not arrived).
    func receivedEnd(from position: UInt64) -> UInt64 { Self.contiguousEnd(of: received, from: position) }

    // MARK: Range arithmetic

    /// Adds `range` to the sorted, merged `ranges`, merging it with those it touches.
    static func merge(_ range: Range<UInt64>, into ranges: inout [Range<UInt64>]) {
        guard !range.isEmpty else { return }
        var merged = range
        var kept: [Range<UInt64>] = []
        kept.reserveCapacity(ranges.count + 1)
        for existing in ranges {
            if existing.upperBound < merged.lowerBound || existing.lowerBound > merged.upperBound {
                kept.append(existing)
            } else {
                merged = min(existing.lowerBound, merged.lowerBound)..<max(existing.upperBound, merged.upperBound)
            }
        }
        let index = kept.firstIndex { $0.lowerBound > merged.lowerBound } ?? kept.endIndex
        kept.insert(merged, at: index)
        ranges = kept
    }

    /// `ranges` without the bytes of `cut`.
    static func subtract(_ cut: Range<UInt64>, from ranges: [Range<UInt64>]) -> [Range<UInt64>] {
        ranges.flatMap { range -> [Range<UInt64>] in
            guard range.overlaps(cut) else { return [range] }
            var left: [Range<UInt64>] = []
            if range.lowerBound < cut.lowerBound { left.append(range.lowerBound..<cut.lowerBound) }
            if cut.upperBound < range.upperBound { left.append(cut.upperBound..<range.upperBound) }
            return left
        }
    }

    /// The parts of `within` that the sorted, merged `ranges` do not cover.
    static func holes(in ranges: [Range<UInt64>], within: Range<UInt64>) -> [Range<UInt64>] {
        var holes: [Range<UInt64>] = []
        var position = within.lowerBound
        for range in ranges where range.upperBound > position && range.lowerBound < within.upperBound {
            if range.lowerBound > position { holes.append(position..<range.lowerBound) }
            position = max(position, range.upperBound)
        }
        if position < within.upperBound { holes.append(position..<within.upperBound) }
        return holes
    }

    /// The end of the bytes the sorted, merged `ranges` cover from `position` on, without a gap.
    static func contiguousEnd(of ranges: [Range<UInt64>], from position: UInt64) -> UInt64 {
        ranges.first { $0.lowerBound <= position && position < $0.upperBound }?.upperBound ?? position
    }
}
