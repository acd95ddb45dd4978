import Cairn
import Foundation
import Glibc

/// Printing helpers: stdout for data, stderr for messages.
enum Output {
    static func out(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    static func err(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }

    static func error(_ error: any Error) {
        if let error = error as? CairnError {
            err("cairn: error: \(error.description)")
        } else if error is CancellationError {
            err("cairn: error: cancelled")
        } else {
            err("cairn: error: \(error)")
        }
    }

    static func warning(_ error: CairnError) {
        err("cairn: warning: \(error.description)")
    }

    /// JSON text of a JSON-compatible value, keys sorted.
    static func json(_ value: Any) -> String {
        guard JSONSerialization.isValidJSONObject(value),
            let data = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes])
        else { return "null" }
        return String(decoding: data, as: UTF8.self)
    }

    /// `1.5 MiB`-style sizes.
    static func bytes(_ count: UInt64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(count)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(count) B" : String(format: "%.1f ", value) + units[unit]
    }

    /// MB/s (10^6 bytes per second).
    static func rate(_ count: UInt64, seconds: Double) -> String {
        guard seconds > 0 else { return "-" }
        return String(format: "%.0f MB/s", Double(count) / seconds / 1e6)
    }

    static var standardErrorIsTerminal: Bool { isatty(2) == 1 }
}

/// Wall-clock time in seconds, monotonic.
func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}
