import Cairn
import Glibc

/// The creation time a signed export writes into its header, and the rules for reading it
/// (`Spec/0004-trusted-archives.md §7.1`): the metadata key `cairn.created`, its value the
/// nanoseconds since 1970-01-01T00:00:00Z (UTC, leap seconds not counted, as `CLOCK_REALTIME`)
/// in decimal ASCII digits, without sign, leading zeros or spaces (`"0"` for zero), at most
/// `UInt64.max`.
enum ExportCreationTime {
    /// The reserved header metadata key (`Spec/0001 §5` rule 3).
    static let metadataKey = "cairn.created"

    /// Now, by `clock_gettime(CLOCK_REALTIME)`, in nanoseconds since 1970 (0 for a clock before 1970).
    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        guard time.tv_sec >= 0 else { return 0 }
        let (seconds, overflow) = UInt64(time.tv_sec).multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? UInt64.max : seconds &+ UInt64(clamping: time.tv_nsec)
    }

    /// The value `header` holds, or nil when it holds none.
    ///
    /// - Throws: `.corrupted` when the value is not in the form above, naming the key and value.
    static func read(from header: ArchiveHeader) throws(CairnError) -> UInt64? {
        guard let value = header.metadata[metadataKey] else { return nil }
        guard let time = parse(value) else {
            let shown = value.count > 40 ? String(value.prefix(40)) + "…" : value
            throw CairnError(
                .corrupted, "the header's \(metadataKey) is not a count of nanoseconds since 1970 in decimal digits: \"\(shown)\"")
        }
        return time
    }

    /// `value` in the form above, or nil.
    static func parse(_ value: String) -> UInt64? {
        let digits = Array(value.utf8)
        guard !digits.isEmpty, digits.count <= 20, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
            digits.count == 1 || digits[0] != 0x30
        else { return nil }
        return UInt64(value)
    }

    /// `time` as RFC 3339 in UTC with nanoseconds, for messages: `2026-12-07T13:21:10.123456789Z`.
    static func describe(_ time: UInt64) -> String {
        var seconds = time_t(time / 1_000_000_000)
        var parts = tm()
        guard gmtime_r(&seconds, &parts) != nil else { return "\(time) ns since 1970" }
        func pad(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        let fraction = String(time % 1_000_000_000)
        return pad(parts.tm_year + 1900, 4) + "-" + pad(parts.tm_mon + 1, 2) + "-" + pad(parts.tm_mday, 2) + "T"
            + pad(parts.tm_hour, 2) + ":" + pad(parts.tm_min, 2) + ":" + pad(parts.tm_sec, 2) + "."
            + String(repeating: "0", count: 9 - fraction.count) + fraction + "Z"
    }
}
