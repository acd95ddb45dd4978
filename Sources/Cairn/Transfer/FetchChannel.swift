import Glibc

/// The byte channel from a fetch's writer thread to its verifier: a connected pair of Unix
/// stream sockets, so the verifier reads the archive through the same descriptor-based stream
/// as `cairn verify -`, and a writer whose reader has stopped gets `EPIPE` (sent with
/// `MSG_NOSIGNAL`, so no `SIGPIPE` reaches the process).
package final class FetchChannel: Sendable {
    /// The verifier's end.
    package let reading: FileDescriptor
    private let writing: FileDescriptor

    /// - Throws: `.io` when the sockets cannot be created.
    package init() throws(CairnError) {
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            throw Errno.current.error("cannot create the fetch's verification channel")
        }
        var size: Int32 = 1 << 20
        _ = setsockopt(pair[1], SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        _ = setsockopt(pair[0], SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        reading = FileDescriptor(rawValue: pair[0], path: "<fetch>")
        writing = FileDescriptor(rawValue: pair[1], path: "<fetch>")
    }

    /// The error `send` throws once the reader has stopped.
    package static let readerStopped = "the verifier stopped reading"

    /// Sends all of `bytes`, blocking while the verifier is behind.
    ///
    /// - Throws: `.io` with message ``readerStopped`` when the verifier has stopped.
    package func send(_ bytes: UnsafeRawBufferPointer) throws(CairnError) {
        guard let base = bytes.baseAddress else { return }
        var done = 0
        while done < bytes.count {
            let n = retryOnInterrupt { Glibc.send(writing.rawValue, base + done, bytes.count - done, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else {
                throw CairnError(.io, Self.readerStopped, cause: String(cString: strerror(errno)))
            }
            done += n
        }
    }

    /// Ends the stream: the verifier reads end of file after the bytes sent.
    package func finishSending() {
        _ = shutdown(writing.rawValue, Int32(SHUT_WR))
    }

    /// Stops the verifier's side: its reads see end of file and the writer's sends fail.
    package func stopReading() {
        _ = shutdown(reading.rawValue, Int32(SHUT_RDWR))
        _ = shutdown(writing.rawValue, Int32(SHUT_RDWR))
    }

    /// Closes both ends.
    package func close() {
        _ = try? reading.close()
        _ = try? writing.close()
    }
}
