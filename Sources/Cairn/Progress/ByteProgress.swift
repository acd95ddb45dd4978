import Foundation

/// How Cairn publishes byte counts to a Foundation `Progress` (export and import alike): the one
/// place the rule is decided.
///
/// - An indeterminate total (`-1`: no size estimate, no declared sizes) stays indeterminate;
///   `completedUnitCount` counts the bytes.
/// - A known total that the bytes outgrow (an estimate that was too small) grows ahead of them,
///   to the bytes done plus an eighth, so the fraction keeps moving instead of sticking at 100%
///   before the work is done. The owner sets the exact total when it finishes.
/// - The fraction never exceeds 1.
package enum ByteProgress {
    /// Publishes `bytes` done to `progress`.
    package static func report(_ bytes: UInt64, to progress: Progress) {
        let done = Int64(clamping: bytes)
        let total = progress.totalUnitCount
        if total >= 0, total <= done, done > 0 { progress.totalUnitCount = grownTotal(done: done) }
        progress.completedUnitCount = done
    }

    /// The total a too-small estimate grows to once `done` bytes are done.
    package static func grownTotal(done: Int64) -> Int64 {
        done &+ max(done / 8, 1)
    }
}
