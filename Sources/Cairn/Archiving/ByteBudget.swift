import Synchronization

/// An async semaphore counted in bytes, with low/high watermarks
/// (see ``BackpressurePolicy``).
///
/// ``acquire(_:)`` suspends while taking the bytes would pass the high watermark (a single
/// request larger than `high` is admitted alone, so nothing deadlocks); once anyone waits, new
/// requests queue behind them in order until ``release(_:)`` brings the count down to the low
/// watermark. Continuations are resumed outside the lock.
package final class ByteBudget: Sendable {
    private struct Waiter {
        var id: UInt64
        var bytes: Int
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var inUse = 0
        var peak = 0
        var waiters: [Waiter] = []
        var nextID: UInt64 = 0
        var closed = false
    }

    private let state = Mutex(State())
    package let policy: BackpressurePolicy

    package init(policy: BackpressurePolicy) {
        self.policy = policy
    }

    /// Bytes currently in flight.
    package var bytesInUse: Int { state.withLock { $0.inUse } }
    /// The most bytes ever in flight at once.
    package var peakBytesInUse: Int { state.withLock { $0.peak } }
    /// Whether some acquirer is suspended.
    package var hasWaiters: Bool { state.withLock { !$0.waiters.isEmpty } }

    /// Takes `bytes`, suspending while the budget is exhausted.
    ///
    /// - Throws: `CancellationError` if the task is cancelled while waiting or the budget was
    ///   closed.
    package func acquire(_ bytes: Int) async throws {
        let id = state.withLock { s -> UInt64 in
            s.nextID += 1
            return s.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome: Result<Void, any Error>? = state.withLock { s in
                    if s.closed || Task.isCancelled { return .failure(CancellationError()) }
                    if s.waiters.isEmpty, s.inUse == 0 || s.inUse + bytes <= policy.high.bytes {
                        s.inUse += bytes
                        s.peak = max(s.peak, s.inUse)
                        return .success(())
                    }
                    s.waiters.append(Waiter(id: id, bytes: bytes, continuation: continuation))
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let removed = state.withLock { s -> Waiter? in
                guard let index = s.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return s.waiters.remove(at: index)
            }
            removed?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Returns `bytes`; admits waiters once the count is at or below the low watermark.
    package func release(_ bytes: Int) {
        let admitted = state.withLock { s -> [Waiter] in
            s.inUse = max(0, s.inUse - bytes)
            guard !s.waiters.isEmpty, s.inUse <= policy.low.bytes else { return [] }
            var admitted: [Waiter] = []
            while let first = s.waiters.first, s.inUse == 0 || s.inUse + first.bytes <= policy.high.bytes {
                s.waiters.removeFirst()
                s.inUse += first.bytes
                s.peak = max(s.peak, s.inUse)
                admitted.append(first)
            }
            return admitted
        }
        for waiter in admitted { waiter.continuation.resume() }
    }

    /// Fails every waiter and every later ``acquire(_:)`` with `CancellationError`.
    package func close() {
        let waiters = state.withLock { s -> [Waiter] in
            s.closed = true
            defer { s.waiters = [] }
            return s.waiters
        }
        for waiter in waiters { waiter.continuation.resume(throwing: CancellationError()) }
    }

    /// Re-opens a closed budget with nothing in flight (after an abandoned append).
    package func reset() {
        state.withLock { s in
            s.closed = false
            s.inUse = 0
        }
    }
}

/// Batch buffers handed back by the writer for the producer to reuse, so a long archive does not
/// allocate, zero and fault in a fresh megabyte per batch. Holds at most ``capacity`` buffers.
package final class BufferPool: Sendable {
    private let buffers = Mutex<[[UInt8]]>([])
    private let capacity: Int

    package init(capacity: Int) { self.capacity = capacity }

    /// A buffer of exactly `count` bytes (contents unspecified), reused when one is available.
    package func take(count: Int) -> [UInt8] {
        let reused = buffers.withLock { list -> [UInt8]? in
            while let candidate = list.popLast() {
                if candidate.count == count { return candidate }
            }
            return nil
        }
        return reused ?? [UInt8](repeating: 0, count: count)
    }

    /// Returns a buffer for reuse.
    package func give(_ buffer: [UInt8]) {
        buffers.withLock { list in
            if list.count < capacity { list.append(buffer) }
        }
    }
}
