internal import CLinux
import Dispatch
import Glibc
import Synchronization

/// A request running on its own thread whose body is written into a pipe, for readers that take a
/// descriptor (RecordStream, the stream extractor, verify).
///
/// The pipe holds up to 1 MiB (`F_SETPIPE_SZ`, where the system allows it): the transfer runs
/// ahead of the reader by that much and then waits for it, so memory stays bounded whatever the
/// speeds. The transfer thread blocks SIGPIPE for itself, so a reader that went away ends the
/// transfer (as cancelled) instead of killing the process, and nothing changes for other threads.
///
/// - Important: End every stream with ``finish()`` (after reading ``body`` to its end) or
///   ``cancel()``; both wait for the transfer thread and close ``body``.
package final class HTTPBodyStream: Sendable {
    /// The pipe's read end: the body, then end of file when the transfer ends (well or not).
    /// Closed by ``finish()`` and ``cancel()``; do not close it yourself.
    package let body: FileDescriptor
    private let state: State
    private let thread: Mutex<pthread_t?>

    /// Starts `request` on a new thread.
    ///
    /// - Parameters:
    ///   - client: the client that performs the request.
    ///   - request: the request; its body goes into ``body``.
    ///   - tee: called on the transfer thread with each piece of the body before it goes into the
    ///     pipe (fetch appends it to its partial file there); throwing from it aborts the transfer
    ///     with that error.
    /// - Throws: `.io` when the pipe or the thread cannot be created.
    package init(
        client: HTTPClient, request: HTTPRequest,
        tee: (@Sendable (UnsafeRawBufferPointer) throws(CairnError) -> Void)? = nil
    ) throws(CairnError) {
        var ends: [Int32] = [-1, -1]
        guard pipe2(&ends, O_CLOEXEC) == 0 else {
            throw Errno.current.error("cannot create a pipe for the body", path: request.url)
        }
        // A larger pipe means fewer wake-ups; the default (64 KiB) also works.
        _ = fcntl(ends[1], cairn_f_setpipe_sz(), Int32(1 << 20))
        body = FileDescriptor(rawValue: ends[0], path: request.url)
        let writeEnd = FileDescriptor(rawValue: ends[1], path: request.url)
        let state = State(url: request.url)
        self.state = state

        let work = ThreadWork {
            HTTPBodyStream.blockBrokenPipeSignal()
            let outcome: CairnError?
            do throws(CairnError) {
                _ = try client.perform(
                    request, isCancelled: { state.isCancelled },
                    onHead: { head in state.publish(head) },
                    onBody: { (piece) throws(CairnError) in
                        try tee?(piece)
                        try HTTPBodyStream.write(piece, to: writeEnd, state: state)
                    })
                outcome = nil
            } catch {
                outcome = error
            }
            _ = Glibc.close(writeEnd.rawValue)
            state.end(with: outcome)
        }
        var handle = pthread_t()
        let context = Unmanaged.passRetained(work).toOpaque()
        let created = pthread_create(&handle, nil, { context in
            guard let context else { return nil }
            Unmanaged<ThreadWork>.fromOpaque(context).takeRetainedValue().run()
            return nil
        }, context)
        guard created == 0 else {
            Unmanaged<ThreadWork>.fromOpaque(context).release()
            _ = Glibc.close(ends[0])
            _ = Glibc.close(ends[1])
            throw Errno(rawValue: created).error("cannot start the transfer thread", path: request.url)
        }
        thread = Mutex(handle)
    }

    deinit {
        cancel()
    }

    /// Waits for the final response's head (blocking).
    ///
    /// - Returns: the head, as ``HTTPClient/perform(_:onHead:onBody:)`` gave it.
    /// - Throws: the transfer's error if it failed before the head (see
    ///   ``HTTPClient/perform(_:onHead:onBody:)``; `.network` "cancelled" after ``cancel()``).
    package func head() throws(CairnError) -> HTTPResponseHead {
        try state.waitForHead()
    }

    /// Stops the transfer (the reader is done or failed), waits for the thread, and closes
    /// ``body``. Returns within about a second even when the server stalls (libcurl polls the
    /// cancellation between reads and at least once a second). Calling it again does nothing.
    package func cancel() {
        state.cancel()
        // Closing the read end makes a write blocked on a full pipe fail with EPIPE at once.
        closeBody()
        join()
    }

    /// Waits for the transfer to end and closes ``body``; throws its error (a cut connection, a
    /// full disk in `tee`, ...). Call after reading the body to its end to tell a clean end from a
    /// cut.
    ///
    /// - Throws: the transfer's error (see ``HTTPClient/perform(_:onHead:onBody:)``); nothing after
    ///   ``cancel()`` or when the transfer ended because ``body`` was closed by the reader.
    /// - Important: The transfer waits for the reader when the pipe is full: read ``body`` to its
    ///   end first, or call ``cancel()`` instead.
    package func finish() throws(CairnError) {
        join()
        closeBody()
        if let error = state.endError { throw error }
    }

    /// Waits for the transfer thread: the first caller joins it, any other waits for its end.
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

    private func closeBody() {
        if state.takeBodyForClosing() { _ = Glibc.close(body.rawValue) }
    }

    /// Blocks SIGPIPE for the transfer thread (``PipeProducer/blockBrokenPipeSignal()``).
    private static func blockBrokenPipeSignal() { PipeProducer.blockBrokenPipeSignal() }

    /// Writes all of `piece` into the pipe; a reader that went away (EPIPE) ends the transfer as
    /// cancelled.
    private static func write(_ piece: UnsafeRawBufferPointer, to pipe: FileDescriptor, state: State)
        throws(CairnError)
    {
        guard try PipeProducer.write(piece, to: pipe) else {
            state.cancel()
            throw CairnError(.network, "the transfer was cancelled: the reader closed the body", path: pipe.path)
        }
    }
}

extension HTTPBodyStream {
    /// What the transfer thread and the stream's callers share.
    fileprivate final class State: Sendable {
        private struct Phase {
            var head: HTTPResponseHead?
            var ended = false
            var error: CairnError?
            var bodyClosed = false
        }

        let url: String
        private let phase = Mutex(Phase())
        private let cancelled = Atomic<Bool>(false)
        /// Signalled when the head is known or the transfer ended; each waiter signals it again.
        private let headKnown = DispatchSemaphore(value: 0)
        /// Signalled when the transfer ended; each waiter signals it again.
        private let ended = DispatchSemaphore(value: 0)

        init(url: String) { self.url = url }

        var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

        func cancel() { cancelled.store(true, ordering: .releasing) }

        func publish(_ head: HTTPResponseHead) {
            phase.withLock { $0.head = head }
            headKnown.signal()
        }

        func end(with error: CairnError?) {
            let signal = phase.withLock { phase -> Bool in
                phase.ended = true
                phase.error = error
                return phase.head == nil
            }
            if signal { headKnown.signal() }
            ended.signal()
        }

        func waitForEnd() {
            ended.wait()
            ended.signal()
        }

        func waitForHead() throws(CairnError) -> HTTPResponseHead {
            headKnown.wait()
            headKnown.signal()
            let (head, error) = phase.withLock { ($0.head, $0.error) }
            if let head { return head }
            throw error ?? CairnError(.network, "the transfer ended without a response", path: url)
        }

        /// The error the transfer ended with, nil when it ended well or was cancelled.
        var endError: CairnError? {
            guard !isCancelled else { return nil }
            return phase.withLock { $0.error }
        }

        /// True exactly once: the caller closes the body.
        func takeBodyForClosing() -> Bool {
            phase.withLock { phase in
                defer { phase.bodyClosed = true }
                return !phase.bodyClosed
            }
        }
    }

    /// The closure a transfer thread runs, passed to `pthread_create` as its argument.
    fileprivate final class ThreadWork: Sendable {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }
}
