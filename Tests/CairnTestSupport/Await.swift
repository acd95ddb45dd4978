import Foundation
import Glibc

/// Waiting on events in tests: a condition becoming true, a child process ending.
///
/// Tests never assert that something happened within some seconds: on a loaded 2-core machine
/// (another build, the suite run twice at once) a step that takes 10 ms alone can take seconds.
/// They wait for the event itself (a file appears, a counter reaches a value, a server stops
/// accepting, a process exits) and assert on what it left. ``safetyBound`` only turns a hang
/// (the event never comes, a regression) into a failure that says what was awaited.
public enum Await {
    /// The most seconds any wait lasts before it fails instead of hanging: 10 minutes, far
    /// beyond what any awaited event takes on a busy machine.
    public static let safetyBound: Double = 600

    /// An awaited event that did not come within the safety bound.
    public struct NeverHappened: Error, CustomStringConvertible {
        public var description: String
    }

    /// Returns once `condition` is true, checking it every `interval` seconds; blocks the calling
    /// thread (in async code use ``suspendingUntil(_:bound:interval:_:)``).
    ///
    /// - Parameters:
    ///   - what: the event, for the failure message ("the partial file holds a commit").
    ///   - bound: seconds before giving up; ``safetyBound`` unless a test has a reason.
    /// - Throws: ``NeverHappened`` naming `what` after `bound` seconds; what `condition` throws.
    public static func until(
        _ what: @autoclosure () -> String, bound: Double = safetyBound, interval: Double = 0.005, _ condition: () throws -> Bool
    ) throws {
        let deadline = Date().addingTimeInterval(bound)
        while try !condition() {
            guard Date() < deadline else { throw NeverHappened(description: "never happened in \(Int(bound)) s: \(what())") }
            usleep(useconds_t(interval * 1_000_000))
        }
    }

    /// Returns once `condition` is true, sleeping `interval` seconds between checks without
    /// holding a thread of the cooperative pool (on 2 cores a blocked thread starves the tasks
    /// the test waits for).
    ///
    /// - Throws: ``NeverHappened`` naming `what` after `bound` seconds; `CancellationError`;
    ///   what `condition` throws.
    public static func suspendingUntil(
        _ what: @autoclosure () -> String, bound: Double = safetyBound, interval: Double = 0.005,
        _ condition: () async throws -> Bool
    ) async throws {
        let deadline = Date().addingTimeInterval(bound)
        while try await !condition() {
            guard Date() < deadline else { throw NeverHappened(description: "never happened in \(Int(bound)) s: \(what())") }
            try await Task.sleep(nanoseconds: UInt64(interval * 1_000_000_000))
        }
    }

    /// Runs `body`; if it has not returned after `bound` seconds, runs `rescue` once on another
    /// thread, which should record the failure and undo what blocks `body` (drain a pipe, kill
    /// a process), so a regression fails the test instead of hanging the suite.
    public static func rescuing<R>(
        after bound: Double = safetyBound, _ rescue: @escaping @Sendable () -> Void, _ body: () throws -> R
    ) rethrows -> R {
        let done = DispatchSemaphore(value: 0)
        let watchdog = Thread {
            if done.wait(timeout: .now() + bound) == .timedOut { rescue() }
        }
        watchdog.start()
        defer { done.signal() }
        return try body()
    }
}

extension ChildProcess.Child {
    /// Waits for the child to end on its own or after a signal the test sent. A child still
    /// running after `bound` seconds is killed (SIGKILL) and reported.
    ///
    /// - Throws: ``Await/NeverHappened`` naming `what` when the child had to be killed.
    public func wait(bound: Double = Await.safetyBound, for what: @autoclosure () -> String) throws -> ChildProcess.Result {
        do {
            try Await.until(what(), bound: bound) { !process.isRunning }
        } catch {
            kill(pid, SIGKILL)
            _ = wait()
            throw error
        }
        return wait()
    }
}
