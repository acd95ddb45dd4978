/// A point in time as the kernel holds it: whole seconds since 1970-01-01T00:00:00Z (negative
/// before) and nanoseconds within that second (`struct timespec`, POSIX.1-2008).
///
/// Format 2.0 stores both exactly (`Spec/0001-container-format.md §6.1`), so every time a Linux
/// file system can hold round-trips; format 1.x stored nanoseconds in one `i64`, which covers
/// 1677-09-21 to 2262-04-11 only.
public struct Timestamp: Sendable, Hashable, Comparable, ExpressibleByIntegerLiteral, CustomStringConvertible {
    /// Seconds since the epoch, floor-rounded (so `-0.5 s` is `seconds = -1, nanoseconds = 500_000_000`).
    public var seconds: Int64
    /// Nanoseconds within the second, `0 ..< 1_000_000_000`.
    public var nanoseconds: UInt32

    /// - Precondition: none; `nanoseconds` of a billion or more carry into `seconds` (saturating).
    public init(seconds: Int64, nanoseconds: UInt32 = 0) {
        let carry = Int64(nanoseconds / 1_000_000_000)
        self.seconds = seconds.addingReportingOverflow(carry).overflow ? Int64.max : seconds + carry
        self.nanoseconds = nanoseconds % 1_000_000_000
    }

    /// A time given in nanoseconds since the epoch (the 1.x encoding), floor division.
    public init(nanosecondsSinceEpoch ns: Int64) {
        var s = ns / 1_000_000_000
        var rest = ns % 1_000_000_000
        if rest < 0 {
            s -= 1
            rest += 1_000_000_000
        }
        seconds = s
        nanoseconds = UInt32(truncatingIfNeeded: rest)
    }

    /// An integer literal is nanoseconds since the epoch, as in format 1.x.
    public init(integerLiteral value: Int64) { self.init(nanosecondsSinceEpoch: value) }

    /// Nanoseconds since the epoch, or nil when the time is outside what an `Int64` of
    /// nanoseconds holds (before 1677-09-21 or after 2262-04-11).
    public var nanosecondsSinceEpoch: Int64? {
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return nil }
        let (sum, overflow2) = product.addingReportingOverflow(Int64(nanoseconds))
        return overflow2 ? nil : sum
    }

    public static func < (a: Timestamp, b: Timestamp) -> Bool {
        (a.seconds, a.nanoseconds) < (b.seconds, b.nanoseconds)
    }

    /// The time in seconds as a decimal, e.g. `1700000000.000000123`; before 1970 the value is
    /// `seconds + nanoseconds / 10⁹` too: `-1.250000000` is 1.25 s before the epoch.
    public var description: String {
        func padded(_ value: UInt32) -> String {
            let text = String(value)
            return String(repeating: "0", count: 9 - text.count) + text
        }
        guard seconds < 0, nanoseconds > 0 else { return "\(seconds).\(padded(nanoseconds))" }
        // (seconds + 1) is ≤ 0 here, so its magnitude fits an Int64 even for Int64.min.
        return "-\(-(seconds + 1)).\(padded(1_000_000_000 - nanoseconds))"
    }
}
