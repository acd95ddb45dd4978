import Foundation
import Glibc

/// A one-line progress bar on standard error: percentage, bytes, rate and ETA, redrawn a few
/// times a second from a background thread that only reads the `Progress`.
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

    /// `--progress` forces it, `--no-progress` hides it; otherwise only on a terminal.
    static func shouldShow(_ args: Arguments) -> Bool {
        if args.flag("--no-progress") { return false }
        if args.flag("--progress") { return true }
        return Output.standardErrorIsTerminal
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
        FileHandle.standardError.write(Data("\n".utf8))
    }

    private func draw() {
        let total = max(progress.totalUnitCount, 0)
        let done = min(max(progress.completedUnitCount, 0), max(total, progress.completedUnitCount))
        let elapsed = monotonicSeconds() - started
        let rate = elapsed > 0 ? Double(done) / elapsed : 0
        let fraction = total > 0 ? min(1, Double(done) / Double(total)) : 0
        let width = 24
        let filled = Int(fraction * Double(width))
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
        var eta = "--"
        if rate > 0, total > done {
            let seconds = Int(Double(total - done) / rate)
            eta = String(format: "%d:%02d", seconds / 60, seconds % 60)
        }
        let percent = String(format: "%3.0f%%", fraction * 100)
        let line =
            "\r\(label) [\(bar)] \(percent) \(Output.bytes(UInt64(done))) / \(Output.bytes(UInt64(total)))  "
            + "\(Output.rate(UInt64(done), seconds: elapsed))  ETA \(eta)   "
        FileHandle.standardError.write(Data(line.utf8))
    }
}
