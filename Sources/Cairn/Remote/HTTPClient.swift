import Foundation
internal import CCurl
import Glibc
import Synchronization

/// A blocking HTTP/1.1 and HTTP/2 client over libcurl's easy interface, for range requests on
/// archives (RFC 9110).
///
/// Every request sends `Accept-Encoding: identity` and libcurl never decodes a body, so the bytes
/// delivered are the resource's own. Redirects are followed (at most
/// ``Configuration/maximumRedirects``); only `http` and `https` are allowed, also as redirect
/// targets. A response with status 400 or more is an error and its body is not delivered.
///
/// Easy handles are kept in a pool and reused, so consecutive requests to one server reuse its
/// connection (keep-alive). ``perform(_:onHead:onBody:)`` may be called from several threads at
/// once; each call takes its own handle.
package final class HTTPClient: Sendable {
    /// Timeouts and limits of a client.
    package struct Configuration: Sendable {
        /// Seconds to wait for a TCP (and TLS) connection to be established.
        package var connectTimeout: Double = 10
        /// Seconds without a single byte of the response (head or body) after which the transfer
        /// fails with `.network` "timed out". Checked at least once a second, so a stall is noticed
        /// between `stallTimeout` and `stallTimeout + 1` seconds after the last byte.
        package var stallTimeout: Double = 30
        /// Redirects followed before a request fails with `.limitExceeded`.
        package var maximumRedirects: Int = 10
        /// A file of CA certificates (PEM) that TLS servers are checked against instead of the
        /// system's; by default `$CURL_CA_BUNDLE`, else `$SSL_CERT_FILE`, else none (the system's).
        package var certificateAuthorities: String? =
            ProcessInfo.processInfo.environment["CURL_CA_BUNDLE"] ?? ProcessInfo.processInfo.environment["SSL_CERT_FILE"]

        /// The defaults: 10 s to connect, 30 s of stall, 10 redirects, the CA bundle the
        /// environment names.
        package init() {}
    }

    /// The configuration every request of this client uses.
    package let configuration: Configuration
    /// Signs every request (an object store's credentials), or nil for plain HTTP.
    package let signer: (any HTTPRequestSigner)?
    private let idleHandles = Mutex<[CurlEasyHandle]>([])
    private let receivedCount = Atomic<UInt64>(0)
    private let startedCount = Atomic<Int>(0)

    /// At most this many idle handles (each may hold an open connection) are kept.
    private static let maximumIdleHandles = 8
    /// The prefix of every `.httpStatus` message, followed by the status code and reason.
    static let statusMessagePrefix = "the server answered "

    /// Creates a client; libcurl is initialised once per process (`curl_global_init`).
    ///
    /// - Parameter signer: adds its signature to every request (each try anew) and reads the
    ///   detail of error answers; nil for plain HTTP.
    package init(configuration: Configuration = Configuration(), signer: (any HTTPRequestSigner)? = nil) {
        _ = curlGlobalInitialisation
        self.configuration = configuration
        self.signer = signer
    }

    deinit {
        idleHandles.withLock { $0.removeAll() }
    }

    /// Body bytes received by every request of this client (for reports and tests): the bytes
    /// handed to `onBody`, so the bodies of redirects and error responses are not counted.
    package var bytesReceived: UInt64 { receivedCount.load(ordering: .relaxed) }

    /// Requests started by this client (each call of ``perform(_:onHead:onBody:)``, redirects not
    /// counted separately).
    package var requestCount: Int { startedCount.load(ordering: .relaxed) }

    /// Performs one request, blocking; safe to call from several threads at once (connections are
    /// reused).
    ///
    /// - Important: The calling thread blocks for the whole transfer, closures included. From
    ///   async code, do not call it on the cooperative pool (two threads here): use a dedicated
    ///   thread, as ``HTTPBodyStream`` does.
    ///
    /// Sends `Accept-Encoding: identity`, and `Range` and `If-Range` when the request has them.
    /// Follows redirects. `onHead` is called once with the final response's head before any body
    /// byte; `onBody` with the body in order, in pieces of any size. Throwing from either aborts the
    /// transfer and `perform` rethrows that error.
    ///
    /// - Parameters:
    ///   - request: the URL, method and range.
    ///   - onHead: told of the final response's head (status below 400, identity encoding).
    ///   - onBody: given each piece of the body; the buffer is valid only during the call.
    /// - Returns: the final response's head (the one `onHead` saw).
    /// - Throws: `.network` (cannot connect, connection cut, timed out, TLS failure; `path` = the URL,
    ///   `offset` = the offset in the resource reached, that is the Content-Range start (0 for a 200)
    ///   plus the body bytes received, when the head had arrived; `cause` = libcurl's text),
    ///   `.httpStatus` for a status >= 400 (the message names the status, `path` the URL; `onBody` is
    ///   not called), `.corrupted` for a Content-Encoding other than identity (before any body byte),
    ///   `.limitExceeded` for more than ``Configuration/maximumRedirects`` redirects,
    ///   `.invalidArgument` for a URL libcurl cannot use or an `ifRange` with control characters,
    ///   or what the closures throw.
    package func perform(
        _ request: HTTPRequest,
        onHead: (HTTPResponseHead) throws(CairnError) -> Void,
        onBody: (UnsafeRawBufferPointer) throws(CairnError) -> Void
    ) throws(CairnError) -> HTTPResponseHead {
        try perform(request, isCancelled: nil, onHead: onHead, onBody: onBody)
    }

    /// A request whose body is read into memory, at most `limit` bytes.
    ///
    /// - Returns: the final response's head and its whole body.
    /// - Throws: `.limitExceeded` when the body is longer than `limit` bytes (the transfer stops
    ///   there), and everything ``perform(_:onHead:onBody:)`` throws.
    package func get(_ request: HTTPRequest, limit: Int) throws(CairnError) -> (head: HTTPResponseHead, body: [UInt8]) {
        var body: [UInt8] = []
        let head = try perform(
            request,
            onHead: { head in
                if let length = head.contentLength, length <= UInt64(max(0, limit)) {
                    body.reserveCapacity(Int(length))
                }
            },
            onBody: { (piece) throws(CairnError) in
                guard piece.count <= limit - body.count else {
                    throw CairnError(
                        .limitExceeded, "the response body is longer than the limit of \(limit) bytes",
                        path: request.url, offset: UInt64(body.count))
                }
                body.append(contentsOf: piece)
            })
        return (head, body)
    }

    /// ``perform(_:onHead:onBody:)`` with a cancellation check: `isCancelled` is polled by
    /// libcurl's progress callback (several times a second, also while nothing arrives), and
    /// when it returns true the transfer is aborted with a `.network` "cancelled" error.
    func perform(
        _ request: HTTPRequest,
        isCancelled: (@Sendable () -> Bool)?,
        onHead: (HTTPResponseHead) throws(CairnError) -> Void,
        onBody: (UnsafeRawBufferPointer) throws(CairnError) -> Void
    ) throws(CairnError) -> HTTPResponseHead {
        startedCount.add(1, ordering: .relaxed)
        var request = request
        if let signer { request.headers += try signer.signingHeaders(for: request) }
        let handle = try takeHandle(for: request.url)
        let outcome: Result<HTTPResponseHead, CairnError> = withoutActuallyEscaping(onHead) { onHead in
            withoutActuallyEscaping(onBody) { onBody in
                let transfer = CurlTransfer(
                    url: request.url, handle: handle, client: self, isCancelled: isCancelled, onHead: onHead,
                    onBody: onBody)
                return Result { () throws(CairnError) in try transfer.run(request) }
            }
        }
        // A handle whose transfer failed in the transport (a failed name lookup left one that
        // refused its next options with "bad argument") is not reused; the others keep their
        // connection for the next request.
        if case .failure(let error) = outcome, error.code == .network || error.code == .invalidArgument {
            return try outcome.get()
        }
        giveBack(handle)
        return try outcome.get()
    }

    /// Counts body bytes handed to `onBody`.
    func countReceived(_ count: Int) {
        receivedCount.add(UInt64(count), ordering: .relaxed)
    }

    /// The `.httpStatus` error for `status`: "the server answered 404 Not Found" (the reason
    /// phrase as the server sent it, left out when empty), `path` = `url`, and `detail` (what the
    /// error body says, from the signer) appended after a colon; its
    /// ``CairnError/underlyingCause`` is `cause` (what the signer read in the body) or
    /// ``CairnError/Cause/httpStatus(_:)``.
    package static func statusError(
        status: Int, reason: String, url: String, detail: String? = nil, cause: CairnError.Cause? = nil
    ) -> CairnError {
        let text = reason.isEmpty ? "\(status)" : "\(status) \(reason)"
        return CairnError(
            .httpStatus, statusMessagePrefix + text + (detail.map { " (\($0))" } ?? ""), path: url,
            underlyingCause: cause ?? .httpStatus(status))
    }

    private func takeHandle(for url: String) throws(CairnError) -> CurlEasyHandle {
        if let idle = idleHandles.withLock({ $0.popLast() }) {
            return idle
        }
        guard let handle = CurlEasyHandle() else {
            throw CairnError(.io, "libcurl could not create a transfer handle", path: url)
        }
        return handle
    }

    /// Resets `handle` (its options and the pointers into the finished transfer; its connection
    /// stays open) and keeps it for the next request.
    private func giveBack(_ handle: CurlEasyHandle) {
        curl_easy_reset(handle.raw)
        idleHandles.withLock { idle in
            if idle.count < Self.maximumIdleHandles { idle.append(handle) }
        }
    }
}

/// `curl_global_init`, run once per process (Swift initialises globals once, thread-safely).
private let curlGlobalInitialisation: CURLcode = cairn_curl_global_init()

/// One libcurl easy handle (`CURL *`), cleaned up exactly once when the last reference goes.
///
/// `@unchecked Sendable` because a handle moves between threads but is never shared: it is taken
/// out of the client's pool under its lock, used by one `perform` on one thread, reset, and put
/// back under the lock. libcurl requires exactly this (one thread at a time per easy handle).
final class CurlEasyHandle: @unchecked Sendable {
    let raw: UnsafeMutableRawPointer

    init?() {
        guard let raw = curl_easy_init() else { return nil }
        self.raw = raw
    }

    deinit { curl_easy_cleanup(raw) }
}
