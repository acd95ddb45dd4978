import Foundation
import Synchronization

/// The parts of a multipart upload in flight, each on a thread of its own, at most ``limit`` at
/// once (`Spec/0003-command-line.md §3.3`, item 2): the archiver hands a part over and goes on
/// making the next one instead of waiting for its round trip, and waits only while ``limit``
/// parts are in flight (back-pressure, so memory holds at most ``limit`` parts beyond the one
/// being filled).
///
/// Parts may complete in any order; each records itself when the store acknowledges it. The
/// first failure is kept: the sink stops handing parts over, lets the others end (each recorded
/// if acknowledged, so a resume keeps it) and then reports it.
///
/// The counts live in a `Mutex`; waiting continuations are resumed outside the lock. One
/// producer (the sink, called by the archiver one call at a time) waits at a time.
final class PartUploadWindow: Sendable {
    private struct State {
        var running = 0
        var failure: CairnError?
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    /// The most parts in flight at once, 1 or more.
    let limit: Int
    private let state = Mutex(State())

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// The parts in flight now.
    var inFlight: Int { state.withLock { $0.running } }

    /// The first failure of a part upload, if any.
    var failure: CairnError? { state.withLock { $0.failure } }

    /// Waits until fewer than ``limit`` parts are in flight.
    ///
    /// - Returns: the first failure of a part, when one failed: the caller then stops handing
    ///   parts over (``drain()`` waits for the others).
    nonisolated(nonsending) func waitForRoom() async -> CairnError? {
        await wait(untilFewerThan: limit)
        return failure
    }

    /// Waits until no part is in flight (every acknowledged part recorded).
    ///
    /// - Returns: the first failure of a part, if one failed.
    nonisolated(nonsending) func drain() async -> CairnError? {
        await wait(untilFewerThan: 1)
        return failure
    }

    /// Runs `upload` on a new thread, counted in flight until it returns; what it throws is kept
    /// as the failure when it is the first. Call after ``waitForRoom()`` returned no failure.
    func start(_ upload: @escaping @Sendable () throws(CairnError) -> Void) {
        state.withLock { $0.running += 1 }
        let thread = Thread { [self] in
            var failed: CairnError?
            do throws(CairnError) { try upload() } catch { failed = error }
            let waiters = state.withLock { state in
                state.running -= 1
                if state.failure == nil { state.failure = failed }
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
        thread.start()
    }

    private func wait(untilFewerThan bound: Int) async {
        while state.withLock({ $0.running >= bound }) {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state in
                    guard state.running >= bound else { return true }
                    state.waiters.append(continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        }
    }
}
