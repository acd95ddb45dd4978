import Glibc

/// The byte channel from a fetch's writer thread to its verifier: blocks of ``blockSize`` bytes
/// that the writer fills with what arrives (libcurl's pieces, a seed's records), appends to the
/// partial file, and hands over whole, so the verifier checks the records where they lie, with no
/// copy in between (a ring buffer cost a copy in and a copy out, and the verifier's own buffer
/// and a copy per record two more). At most ``blockLimit`` blocks exist and they are reused: the
/// writer waits (a condition variable) while the verifier holds them all, and the verifier
/// awaits (a continuation, leaving its pool thread to the chunk checks) while nothing was sent.
/// A writer whose reader has stopped gets an error, as a socket's `EPIPE` would give.
///
/// The verifier takes blocks with ``nextBlock()`` and gives them back with ``recycle(_:)``; it may
/// also read bytes with ``read(into:)`` (the prelude and header, before it takes whole blocks).
package final class FetchChannel: ByteBlockSource, ByteInput, @unchecked Sendable {
    /// The size of a block (1 MiB): one `write(2)` each. Writes of 2 MiB into the page cache
    /// took several times the CPU (in `copy_folio_from_iter_atomic`, measured on this kernel).
    package static let blockSize = 1 << 20
    /// The most blocks in existence (16 MiB of them): the one the writer fills, those sent and
    /// not yet taken, and those the verifier checks (``CheckedRecordStream``'s window and the one
    /// it reads).
    package static let blockLimit = 16

    // Everything below is touched only with `mutex` held.
    private var free: [ByteBlock] = []
    private var created = 0
    private var queue: [ByteBlock] = []
    /// The block ``read(into:)`` is reading from, its next byte at `start`.
    private var reading: ByteBlock?
    private var finished = false
    private var stopped = false
    /// The verifier, waiting in ``nextBlock()`` for a block.
    private var waiter: CheckedContinuation<ByteBlock?, Never>?
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// Signalled when a block is given back (the writer may be waiting for one).
    private let blockFree: UnsafeMutablePointer<pthread_cond_t>
    /// Signalled when a block is sent or the stream ends (``read(into:)`` may be waiting).
    private let blockSent: UnsafeMutablePointer<pthread_cond_t>

    package init() {
        mutex = .allocate(capacity: 1)
        blockFree = .allocate(capacity: 1)
        blockSent = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(blockFree, nil)
        pthread_cond_init(blockSent, nil)
    }

    deinit {
        pthread_cond_destroy(blockSent)
        pthread_cond_destroy(blockFree)
        pthread_mutex_destroy(mutex)
        blockSent.deallocate()
        blockFree.deallocate()
        mutex.deallocate()
    }

    /// The error the writer's calls throw once the reader has stopped.
    package static let readerStopped = "the verifier stopped reading"

    // MARK: The writer's side

    /// An empty block to fill (``ByteBlock/start`` and ``ByteBlock/end`` 0), blocking while the
    /// verifier holds every block.
    ///
    /// - Throws: `.io` with message ``readerStopped`` when the verifier has stopped.
    package func emptyBlock() throws(CairnError) -> ByteBlock {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while free.isEmpty, created >= Self.blockLimit, !stopped { pthread_cond_wait(blockFree, mutex) }
        guard !stopped else { throw CairnError(.io, Self.readerStopped) }
        let block: ByteBlock
        if let reused = free.popLast() {
            block = reused
        } else {
            created += 1
            block = ByteBlock(capacity: Self.blockSize)
        }
        block.start = 0
        block.end = 0
        return block
    }

    /// Hands `block` (from ``emptyBlock()``, filled) to the verifier; an empty one is given back.
    ///
    /// - Throws: `.io` with message ``readerStopped`` when the verifier has stopped.
    package func send(_ block: ByteBlock) throws(CairnError) {
        pthread_mutex_lock(mutex)
        guard !stopped else {
            pthread_mutex_unlock(mutex)
            throw CairnError(.io, Self.readerStopped)
        }
        guard block.end > block.start else {
            free.append(block)
            pthread_mutex_unlock(mutex)
            return
        }
        let waiting = waiter
        waiter = nil
        if waiting == nil {
            queue.append(block)
            pthread_cond_signal(blockSent)
        }
        pthread_mutex_unlock(mutex)
        waiting?.resume(returning: block)
    }

    /// Ends the stream: the verifier reads end of input after the blocks sent.
    package func finishSending() {
        pthread_mutex_lock(mutex)
        finished = true
        let waiting = waiter
        waiter = nil
        pthread_cond_broadcast(blockSent)
        pthread_mutex_unlock(mutex)
        waiting?.resume(returning: nil)
    }

    /// Whether the verifier has stopped reading (a writer waiting for other bytes stops too).
    package var isStopped: Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return stopped
    }

    // MARK: The verifier's side

    /// Stops the verifier's side: its reads see end of input and the writer's calls fail.
    package func stopReading() {
        pthread_mutex_lock(mutex)
        stopped = true
        queue.removeAll()
        reading = nil
        let waiting = waiter
        waiter = nil
        pthread_cond_broadcast(blockSent)
        pthread_cond_broadcast(blockFree)
        pthread_mutex_unlock(mutex)
        waiting?.resume(returning: nil)
    }

    /// The next block sent (after what ``read(into:)`` took of it), awaiting one; nil at the end
    /// of the stream (after ``finishSending()``, or at once after ``stopReading()``).
    nonisolated(nonsending) package func nextBlock() async -> ByteBlock? {
        await withCheckedContinuation { (continuation: CheckedContinuation<ByteBlock?, Never>) in
            pthread_mutex_lock(mutex)
            let ready: ByteBlock??
            if stopped {
                ready = .some(nil)
            } else if let partial = reading {
                reading = nil
                ready = partial
            } else if !queue.isEmpty {
                ready = queue.removeFirst()
            } else if finished {
                ready = .some(nil)
            } else {
                waiter = continuation
                ready = nil
            }
            pthread_mutex_unlock(mutex)
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Whether ``nextBlock()`` would return at once.
    package var hasBlockReady: Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return stopped || finished || reading != nil || !queue.isEmpty
    }

    /// Gives back a block from ``nextBlock()``.
    package func recycle(_ block: ByteBlock) {
        pthread_mutex_lock(mutex)
        if !stopped { free.append(block) }
        pthread_cond_signal(blockFree)
        pthread_mutex_unlock(mutex)
    }

    /// Reads up to `buffer.count` bytes, blocking until some are there; 0 at the end of the
    /// stream (after ``finishSending()``, or at once after ``stopReading()``).
    package func read(into buffer: UnsafeMutableRawBufferPointer) throws(CairnError) -> Int {
        guard let destination = buffer.baseAddress, buffer.count > 0 else { return 0 }
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while reading == nil {
            guard !stopped else { return 0 }
            if !queue.isEmpty {
                reading = queue.removeFirst()
            } else if finished {
                return 0
            } else {
                pthread_cond_wait(blockSent, mutex)
            }
        }
        guard let block = reading, let source = block.bytes.baseAddress else { return 0 }
        let n = min(buffer.count, block.end - block.start)
        destination.copyMemory(from: source + block.start, byteCount: n)
        block.start += n
        if block.start == block.end {
            reading = nil
            free.append(block)
            pthread_cond_signal(blockFree)
        }
        return n
    }
}
