internal import CLinux
import Dispatch
import Glibc
import Synchronization

/// A producer running on its own thread that writes bytes into a pipe, for readers that take a
/// descriptor (``RecordStream``, the stream extractor, `verify`): the opening of an encrypted
/// archive's sealed blocks (`SealedBlockStream`) runs this way, beside the reader, on the
/// second core.
///
/// The pipe holds up to 1 MiB where the system allows it: the producer runs ahead of the reader
/// by that much and then waits, so memory stays bounded whatever the speeds. The producer thread
/// blocks SIGPIPE for itself, so a reader that went away ends it (as cancelled) instead of
/// killing the process.
///
/// - Important: End every producer with ``finish()`` (after reading ``output`` to its end) or
///   ``cancel()``; both wait for the thread and close ``output``.
package final class PipeProducer: Sendable {
    /// The pipe's read end: what the producer wrote, then end of file when it returned or threw.
    /// Closed by ``finish()`` and ``cancel()``; do not close it yourself.
    package let output: FileDescriptor
    private let state: State
    private let thread: Mutex<pthread_t?>

    /// Hands the producer what it writes with.
    package struct Writer: Sendable {
        fileprivate let pipe: FileDescriptor
        fileprivate let state: State

        /// Whether the reader cancelled: the producer should return.
        package var isCancelled: Bool { state.isCancelled }

        /// Writes all of `bytes` into the pipe, waiting while it is full.
        ///
        /// - Throws: `.io` "cancelled" when the reader closed its end (EPIPE), after which the
        ///   producer should return; `.io` for any other failure of `write(2)`.
        package func write(_ bytes: UnsafeRawBufferPointer) throws(CairnError) {
            guard try PipeProducer.write(bytes, to: pipe) else {
                state.cancel()
                throw CairnError(.io, "cancelled: the reader closed the pipe", path: pipe.path)
            }
        }
    }

    /// Starts `produce` on a new thread; it writes through the ``Writer`` it is given and returns
    /// at its end (or throws what went wrong, which ``finish()`` throws).
    ///
    /// - Parameter name: what errors about the pipe name.
    /// - Throws: `.io` when the pipe or the thread cannot be created.
    package init(name: String, produce: @escaping @Sendable (Writer) throws(CairnError) -> Void) throws(CairnError) {
        var ends: [Int32] = [-1, -1]
        guard pipe2(&ends, O_CLOEXEC) == 0 else {
            throw Errno.current.error("cannot create a pipe", path: name)
        }
        _ = fcntl(ends[1], cairn_f_setpipe_sz(), Int32(1 << 20))
        output = FileDescriptor(rawValue: ends[0], path: name)
        let state = State()
        self.state = state
        let writer = Writer(pipe: FileDescriptor(rawValue: ends[1], path: name), state: state)
        let work = Work {
            PipeProducer.blockBrokenPipeSignal()
            var outcome: CairnError?
            do throws(CairnError) { try produce(writer) } catch { outcome = error }
            _ = Glibc.close(writer.pipe.rawValue)
            state.end(with: outcome)
        }
        var handle = pthread_t()
        let context = Unmanaged.passRetained(work).toOpaque()
        let created = pthread_create(&handle, nil, { context in
            guard let context else { return nil }
            Unmanaged<Work>.fromOpaque(context).takeRetainedValue().run()
            return nil
        }, context)
        guard created == 0 else {
            Unmanaged<Work>.fromOpaque(context).release()
            _ = Glibc.close(ends[0])
            _ = Glibc.close(ends[1])
            throw Errno(rawValue: created).error("cannot start a thread", path: name)
        }
        thread = Mutex(handle)
    }

    deinit { cancel() }

    /// Stops the producer, waits for its thread, and closes ``output``. Calling it again does
    /// nothing.
    package func cancel() {
        state.cancel()
        // Closing the read end makes a write blocked on a full pipe fail with EPIPE at once.
        closeOutput()
        join()
    }

    /// Waits for the producer to end and closes ``output``; throws what it threw. Call after
    /// reading ``output`` to its end, to tell a clean end from a failed one.
    ///
    /// - Throws: the producer's error; nothing after ``cancel()``.
    package func finish() throws(CairnError) {
        join()
        closeOutput()
        if let error = state.endError { throw error }
    }

    private func join() {
        guard let handle = thread.withLock({ (handle: inout pthread_t?) -> pthread_t? in
            defer { handle = nil }
            return handle
        }) else {
            state.waitForEnd()
            return
        }
        pthread_join(handle, nil)
    }

    private func closeOutput() {
        if state.takeOutputForClosing() { _ = Glibc.close(output.rawValue) }
    }

    /// Blocks SIGPIPE for the calling thread only: writing to a pipe without a reader then fails
    /// with EPIPE. A SIGPIPE raised by such a write stays pending on this thread and is discarded
    /// when it exits, so it reaches neither the process nor the CLI's handlers.
    package static func blockBrokenPipeSignal() {
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &signals, nil)
    }

    /// Writes all of `bytes` into `pipe` (on a thread that blocked SIGPIPE).
    ///
    /// - Returns: false when the reader went away (EPIPE): nothing more can be written.
    /// - Throws: `.io` naming the pipe for any other failure of `write(2)`.
    package static func write(_ bytes: UnsafeRawBufferPointer, to pipe: FileDescriptor) throws(CairnError) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        var done = 0
        while done < bytes.count {
            let n = retryOnInterrupt { Glibc.write(pipe.rawValue, base + done, bytes.count - done) }
            if n < 0, errno == EPIPE { return false }
            guard n > 0 else { throw Errno.current.error("cannot write into a pipe", path: pipe.path) }
            done += n
        }
        return true
    }
}

extension PipeProducer {
    /// What the producer thread and the reader share.
    fileprivate final class State: Sendable {
        private struct Phase {
            var error: CairnError?
            var outputClosed = false
        }

        private let phase = Mutex(Phase())
        private let cancelled = Atomic<Bool>(false)
        /// Signalled when the producer ended; each waiter signals it again.
        private let ended = DispatchSemaphore(value: 0)

        var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

        func cancel() { cancelled.store(true, ordering: .releasing) }

        func end(with error: CairnError?) {
            phase.withLock { $0.error = error }
            ended.signal()
        }

        func waitForEnd() {
            ended.wait()
            ended.signal()
        }

        /// The error the producer ended with; nil when it ended well or was cancelled.
        var endError: CairnError? {
            guard !isCancelled else { return nil }
            return phase.withLock { $0.error }
        }

        /// True exactly once: the caller closes the output.
        func takeOutputForClosing() -> Bool {
            phase.withLock { phase in
                defer { phase.outputClosed = true }
                return !phase.outputClosed
            }
        }
    }

    /// The closure the producer thread runs, passed to `pthread_create` as its argument.
    fileprivate final class Work: Sendable {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }
}
