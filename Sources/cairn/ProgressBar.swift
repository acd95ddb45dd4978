import Foundation
import Glibc

/// A one-line progress bar on standard error, redrawn a few times a second from a background
/// thread that only reads the `Progress`.
///
/// What it shows is honest about what is known (`Spec/0003-command-line.md §2.1`): with a total
/// (`totalUnitCount > 0`) and no more done than it, a bar, the percentage, bytes of total, the
/// rate and an ETA; without a total, or once more was done than the total said (an estimate that
/// was too small), only the bytes done and the rate.
final class ProgressBar: @unchecked Sendable {
    // @unchecked: `stopped` is guarded by `lock`; `progress` is itself thread-safe.
    private let progress: Progress
    private let label: String
    private let lock = NSLock()
    private var stopped = false
    private var thread: Thread?
    private let started = monotonicSeconds()

    init(progress: Progress, label: String) {
        self.progress = progress
        self.label = label
    }

    /// Whether to draw: `--no-progress` hides it, `--progress` forces it; otherwise only when
    /// standard error is a terminal and `readsArchiveFromStandardInput` is false.
    ///
    /// The second condition is the rule that keeps two bars off one terminal: in
    /// `cairn create -o - DIR | cairn extract - -C D` both processes share the terminal on
    /// standard error, so the reader of a stream (`extract -`) stays quiet unless asked, and the
    /// writer's bar is the one drawn.
    ///
    /// - Parameters:
    ///   - args: the command's parsed options.
    ///   - readsArchiveFromStandardInput: whether the archive operand is `-`.
    static func shouldShow(_ args: Arguments, readsArchiveFromStandardInput: Bool = false) -> Bool {
        if args.flag("--no-progress") { return false }
        if args.flag("--progress") { return true }
        return Output.standardErrorIsTerminal && !readsArchiveFromStandardInput
    }

    func start() {
        let thread = Thread { [self] in
            while true {
                lock.lock()
                let done = stopped
                lock.unlock()
                if done { break }
                draw()
                usleep(200_000)
            }
        }
        self.thread = thread
        thread.start()
    }

    func stop() {
        lock.lock()
        stopped = true
        lock.unlock()
        usleep(1000)
        draw()
        Output.rawError("\n")
    }

    private func draw() {
        let line = Self.line(
            label: label, completed: progress.completedUnitCount, total: progress.totalUnitCount,
            elapsed: monotonicSeconds() - started)
        // Erase what a longer earlier line left, on a terminal; a file gets plain lines.
        Output.rawError("\r" + line + (Output.standardErrorIsTerminal ? "\u{1B}[K" : ""))
    }

    /// The text of one redraw (without the leading carriage return).
    ///
    /// - Parameters:
    ///   - completed: bytes done (negative values count as 0).
    ///   - total: bytes expected; 0 or less when unknown.
    ///   - elapsed: seconds since the start.
    static func line(label: String, completed: Int64, total: Int64, elapsed: Double) -> String {
        let done = UInt64(max(completed, 0))
        let rate = Output.rate(done, seconds: elapsed)
        guard total > 0, done <= UInt64(total) else {
            // No total, or past it: what is known, without a percentage that would lie.
            return "\(label) \(Output.bytes(done))  \(rate)   "
        }
        let fraction = Double(done) / Double(total)
        let width = 24
        let filled = min(width, Int(fraction * Double(width)))
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
        var eta = "--"
        let perSecond = elapsed > 0 ? Double(done) / elapsed : 0
        if perSecond > 0, UInt64(total) > done {
            let seconds = Int(min(Double(UInt64(total) - done) / perSecond, 359_999))
            eta = String(format: "%d:%02d", seconds / 60, seconds % 60)
        }
        let percent = String(format: "%3.0f%%", fraction * 100)
        return "\(label) [\(bar)] \(percent) \(Output.bytes(done)) / \(Output.bytes(UInt64(total)))  \(rate)  ETA \(eta)   "
    }
}
