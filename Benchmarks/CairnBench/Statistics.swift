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

/// A limit a measured figure should stay within, and the issue that sets it.
struct Target: Equatable {
    /// Which side of the limit meets the target.
    enum Comparison: String, Equatable {
        /// The figure must be at most the limit (a ratio of times or sizes, a peak RSS).
        case atMost = "≤"
        /// The figure must be at least the limit (a ratio of speeds).
        case atLeast = "≥"
    }

    var limit: Double
    var source: String
    var comparison = Comparison.atMost
    /// The fewest successful rounds from which the target's verdict counts (issue 9 asks for
    /// the median of at least 5 interleaved runs; issue 3 for 3).
    var minimumRounds = 3

    /// Whether `value` (a median) meets the target. This is the only place the comparison is made.
    func isMet(by value: Double) -> Bool {
        comparison == .atMost ? value <= limit : value >= limit
    }

    /// "≤ 0.45", "≥ 0.90", "≤ 64 MiB" with `format` for the limit and an optional unit.
    func formatted(_ format: String = "%.2f", unit: String = "") -> String {
        "\(comparison.rawValue) " + String(format: format, limit) + (unit.isEmpty ? "" : " \(unit)")
    }
}

/// What the report says about a measured figure against its target.
enum Verdict: Equatable {
    /// The median of at least the target's minimum rounds meets the target.
    case pass
    /// The median of at least the target's minimum rounds misses the target.
    case fail
    /// The median of fewer rounds than the target needs: shown, but it does not count.
    case indicative(met: Bool, rounds: Int, needed: Int)
    /// Nothing to judge: the case or operation was not run or never succeeded.
    case notMeasured(String)

    /// Judges the per-round values summarised by `spread` against `target`.
    init(_ spread: Spread?, target: Target) {
        guard let spread, spread.count > 0 else {
            self = .notMeasured("no successful round")
            return
        }
        let met = target.isMet(by: spread.median)
        if spread.count >= target.minimumRounds {
            self = met ? .pass : .fail
        } else {
            self = .indicative(met: met, rounds: spread.count, needed: target.minimumRounds)
        }
    }

    /// "PASS", "FAIL", "pass (indicative: 3 rounds, needs 5)", "not measured: …".
    var text: String {
        switch self {
        case .pass: "PASS"
        case .fail: "FAIL"
        case .indicative(let met, let rounds, let needed):
            "\(met ? "pass" : "fail") (indicative: \(counted(rounds, "round")), needs \(needed))"
        case .notMeasured(let reason): "not measured: \(reason)"
        }
    }

    /// A short machine-readable status for the JSON: pass, fail, indicative-pass,
    /// indicative-fail or not-measured.
    var status: String {
        switch self {
        case .pass: "pass"
        case .fail: "fail"
        case .indicative(let met, _, _): met ? "indicative-pass" : "indicative-fail"
        case .notMeasured: "not-measured"
        }
    }
}
