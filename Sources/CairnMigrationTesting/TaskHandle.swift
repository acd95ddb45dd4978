import Synchronization

/// Cancels a task that may not be known yet: a cancel before ``set(_:)`` is applied there.
final class TaskHandle: Sendable {
    private let state = Mutex<(cancel: (@Sendable () -> Void)?, requested: Bool)>((nil, false))

    func set<T: Sendable>(_ task: Task<T, any Error>) {
        let requested = state.withLock { state in
            state.cancel = { task.cancel() }
            return state.requested
        }
        if requested { task.cancel() }
    }

    func cancel() {
        let cancel = state.withLock { state in
            state.requested = true
            return state.cancel
        }
        cancel?()
    }
}
