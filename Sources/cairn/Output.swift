import Cairn
import Foundation
import Glibc

/// Printing helpers: stdout for data, stderr for messages.
enum Output {
    static func out(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    /// Prints a message line on standard error; nothing once the command was interrupted, so
    /// the interruption's one line (``Interruption``) is all that follows a signal.
    static func err(_ text: String) {
        rawError(text + "\n")
    }

    /// Writes `text` as it is on standard error (the progress bar), unless interrupted.
    static func rawError(_ text: String) {
        guard !Interruption.isInterrupted else { return }
        FileHandle.standardError.write(Data(text.utf8))
    }

    /// Prints an error: `cairn: error: ` and its description, then each of its
    /// `additionalErrors` on a line of its own.
    static func error(_ error: any Error) {
        if let error = error as? CairnError {
            err("cairn: error: \(error.description)")
            // Each further problem once, unless the first already says it (same path, and its
            // message contains the other's): clashes at several paths are each named.
            for more in error.additionalErrors
            where !(error.message.contains(more.message) && (more.path == nil || more.path == error.path)) {
                err("cairn: error: \(more.description)")
            }
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

    /// `1 entry`, `2 entries`, `0 files`: a count and its noun, singular only for exactly one.
    ///
    /// - Parameters:
    ///   - count: how many.
    ///   - singular: the noun for one (`entry`, `file`, `chunk`).
    ///   - plural: the noun for any other count; `singular + "s"` when nil.
    static func count(_ count: Int, _ singular: String, plural: String? = nil) -> String {
        "\(count) \(noun(count, singular, plural: plural))"
    }

    /// The noun alone, for a count printed another way (`1,234 entries`): `singular` for exactly
    /// one, else `plural` (`singular + "s"` when nil).
    static func noun(_ count: Int, _ singular: String, plural: String? = nil) -> String {
        count == 1 ? singular : plural ?? singular + "s"
    }

    /// `count(_:_:plural:)` for `entry`/`entries`, the noun every command prints.
    static func entries(_ count: Int) -> String { Self.count(count, "entry", plural: "entries") }

    static var standardErrorIsTerminal: Bool { isatty(2) == 1 }
}

/// Wall-clock time in seconds, monotonic.
func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}
