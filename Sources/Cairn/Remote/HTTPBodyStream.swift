import Dispatch
import Synchronization

/// A request running on its own thread whose body is written into a pipe, for readers that take a
/// descriptor (RecordStream, the stream extractor, verify).
///
/// The thread, the pipe and their ending are a ``PipeProducer``'s: the pipe holds up to 1 MiB
/// (where the system allows it), so the transfer runs ahead of the reader by that much and then
/// waits for it, and memory stays bounded whatever the speeds; the transfer thread blocks SIGPIPE
/// for itself, so a reader that went away ends the transfer (as cancelled) instead of killing the
/// process. This type adds the response's head, which the caller awaits before reading the body.
///
/// - Important: End every stream with ``finish()`` (after reading ``body`` to its end) or
///   ``cancel()``; both wait for the transfer thread and close ``body``.
package final class HTTPBodyStream: Sendable {
    private let producer: PipeProducer
    private let heads: HeadState

    /// The pipe's read end: the body, then end of file when the transfer ends (well or not).
    /// Closed by ``finish()`` and ``cancel()``; do not close it yourself.
    package var body: FileDescriptor { producer.output }

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
        let heads = HeadState(url: request.url)
        self.heads = heads
        producer = try PipeProducer(name: request.url) { (writer) throws(CairnError) in
            do throws(CairnError) {
                _ = try client.perform(
                    request, isCancelled: { writer.isCancelled },
                    onHead: { head in heads.publish(head) },
                    onBody: { (piece) throws(CairnError) in
                        try tee?(piece)
                        try writer.write(piece)
                    })
                heads.end(with: nil)
            } catch {
                heads.end(with: error)
                throw error
            }
        }
    }

    /// Waits for the final response's head (blocking).
    ///
    /// - Returns: the head, as ``HTTPClient/perform(_:onHead:onBody:)`` gave it.
    /// - Throws: the transfer's error if it failed before the head (see
    ///   ``HTTPClient/perform(_:onHead:onBody:)``; `.network` "cancelled" after ``cancel()``).
    package func head() throws(CairnError) -> HTTPResponseHead {
        try heads.waitForHead()
    }

    /// Stops the transfer (the reader is done or failed), waits for the thread, and closes
    /// ``body``. Returns within about a second even when the server stalls (libcurl polls the
    /// cancellation between reads and at least once a second). Calling it again does nothing.
    package func cancel() {
        producer.cancel()
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
        try producer.finish()
    }
}

extension HTTPBodyStream {
    /// The response's head, published by the transfer thread to the stream's callers.
    fileprivate final class HeadState: Sendable {
        private struct Phase {
            var head: HTTPResponseHead?
            var error: CairnError?
        }

        let url: String
        private let phase = Mutex(Phase())
        /// Signalled when the head is known or the transfer ended; each waiter signals it again.
        private let known = DispatchSemaphore(value: 0)
        private let signalled = Atomic<Bool>(false)

        init(url: String) { self.url = url }

        func publish(_ head: HTTPResponseHead) {
            phase.withLock { $0.head = head }
            signalOnce()
        }

        /// The transfer ended: waiters without a head get `error`.
        func end(with error: CairnError?) {
            phase.withLock { $0.error = error }
            signalOnce()
        }

        private func signalOnce() {
            if !signalled.exchange(true, ordering: .acquiringAndReleasing) { known.signal() }
        }

        func waitForHead() throws(CairnError) -> HTTPResponseHead {
            known.wait()
            known.signal()
            let (head, error) = phase.withLock { ($0.head, $0.error) }
            if let head { return head }
            throw error ?? CairnError(.network, "the transfer ended without a response", path: url)
        }
    }
}
