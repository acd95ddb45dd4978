import Glibc

/// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
/// OOPSLA 2014): a tiny seeded generator whose output is fixed for a seed on every platform and
/// Swift version, which is what makes the sample corpus reproducible byte for byte.
///
/// The helpers below are written out instead of using `Int.random(in:using:)`, whose algorithm
/// the standard library may change.
struct SplitMix64 {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    /// The next 64 random bits.
    @inline(__always)
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z &>> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z &>> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z &>> 31)
    }

    /// A number in `0..<bound` (`bound` > 0); the modulo bias is irrelevant here.
    @inline(__always)
    mutating func below(_ bound: Int) -> Int {
        Int(truncatingIfNeeded: next() % UInt64(bound))
    }

    /// A number in `range`.
    mutating func int(in range: ClosedRange<Int>) -> Int {
        range.lowerBound + below(range.upperBound - range.lowerBound + 1)
    }

    /// A number in `[0, 1)` with 53 random bits.
    mutating func unit() -> Double {
        Double(next() >> 11) * 0x1p-53
    }

    /// True with probability `p`.
    mutating func chance(_ p: Double) -> Bool { unit() < p }

    /// A size drawn log-uniformly between `low` and `high` bytes (small sizes are as likely per
    /// doubling as large ones, as in real file systems).
    mutating func logUniform(_ low: Int, _ high: Int) -> Int {
        let lo = log2(Double(low))
        let hi = log2(Double(high))
        return max(low, min(high, Int(exp2(lo + (hi - lo) * unit()))))
    }

    /// An independent generator derived from this one (for a category whose output must not
    /// depend on how much another category consumed).
    mutating func split() -> SplitMix64 { SplitMix64(seed: next()) }
}
