/// The median of a set of measurements with its spread (smallest and largest).
struct Spread: Equatable {
    var median: Double
    var minimum: Double
    var maximum: Double
    /// How many measurements it summarises.
    var count: Int

    /// Summarises `values`; nil when there are none. The median of an even count is the mean of
    /// the two middle values.
    init?(_ values: [Double]) {
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        let middle = sorted.count / 2
        median = sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
        minimum = sorted[0]
        maximum = sorted[sorted.count - 1]
        count = sorted.count
    }

    /// Each figure transformed by `scale` (e.g. bytes to MiB).
    func scaled(_ factor: Double) -> Spread {
        var copy = self
        copy.median *= factor
        copy.minimum *= factor
        copy.maximum *= factor
        return copy
    }

    /// "2.35 (2.30–2.57)" with `format` for each figure; just the median for one measurement
    /// or when all are equal at that precision.
    func formatted(_ format: String = "%.2f") -> String {
        let m = String(format: format, median)
        let lo = String(format: format, minimum)
        let hi = String(format: format, maximum)
        return count < 2 || lo == hi ? m : "\(m) (\(lo)–\(hi))"
    }
}

/// A limit a Cairn/peer ratio should stay within, and the issue that sets it.
struct Target: Equatable {
    var limit: Double
    var source: String
}

/// The fewest rounds from which the report states whether a median is within its target.
let roundsForVerdict = 3

/// What the report says about a measured ratio against its target. With fewer than
/// ``roundsForVerdict`` runs, or fewer successful rounds than that, it states no verdict.
func verdict(ratio: Spread?, target: Target?, runs: Int) -> String {
    guard let target else { return "" }
    guard runs >= roundsForVerdict else { return "no verdict (fewer than \(roundsForVerdict) runs)" }
    guard let ratio, ratio.count >= roundsForVerdict else {
        return "no verdict (fewer than \(roundsForVerdict) successful rounds)"
    }
    return ratio.median <= target.limit ? "within target (median)" : "over target (median)"
}
