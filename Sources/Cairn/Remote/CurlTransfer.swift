internal import CCurl
import Glibc

/// The state of one running request: what libcurl's C callbacks reach through their context
/// pointer (`Unmanaged` of this object, alive for the whole `curl_easy_perform`).
///
/// It collects the final response's head from the header callback, checks it before the first
/// body byte (status, Content-Encoding), hands the body to `onBody`, and keeps the first error a
/// closure threw, which is what the request then throws (not libcurl's "write error").
final class CurlTransfer {
    private let url: String
    private let handle: CurlEasyHandle
    private let client: HTTPClient
    private let isCancelled: (@Sendable () -> Bool)?
    private let onHead: (HTTPResponseHead) throws(CairnError) -> Void
    private let onBody: (UnsafeRawBufferPointer) throws(CairnError) -> Void

    /// The status and reason of the last status line seen (each redirect starts a new one).
    private var status: Int?
    private var reason = ""
    /// The header fields since the last status line, names lowercased.
    private var headers: [String: String] = [:]
    /// The final head, once checked and handed to `onHead`.
    private var head: HTTPResponseHead?
    private var bodyStarted = false
    /// Body bytes handed to `onBody`.
    private var delivered: UInt64 = 0
    /// `CLOCK_MONOTONIC` seconds when the last header or body byte arrived.
    private var lastActivity: Double = 0
    /// The error a closure or a check threw inside a callback.
    private var keptError: CairnError?
    /// The first bytes of an error answer's body (status 400 or more), for the signer's
    /// ``HTTPRequestSigner/errorDetail(status:body:)``; collected only when there is a signer.
    private var errorBody: [UInt8] = []
    /// Error-body bytes kept at most.
    private static let errorBodyLimit = 16 << 10
    /// libcurl's detailed message for the last failure (`CURLOPT_ERRORBUFFER`).
    private let errorBuffer: UnsafeMutablePointer<CChar>

    init(
        url: String, handle: CurlEasyHandle, client: HTTPClient, isCancelled: (@Sendable () -> Bool)?,
        onHead: @escaping (HTTPResponseHead) throws(CairnError) -> Void,
        onBody: @escaping (UnsafeRawBufferPointer) throws(CairnError) -> Void
    ) {
        self.url = url
        self.handle = handle
        self.client = client
        self.isCancelled = isCancelled
        self.onHead = onHead
        self.onBody = onBody
        let size = Int(cairn_curl_error_size())
        errorBuffer = .allocate(capacity: size)
        errorBuffer.initialize(repeating: 0, count: size)
    }

    deinit { errorBuffer.deallocate() }

    /// Sets the handle's options for `request`, runs `curl_easy_perform`, and returns the final
    /// head or throws (see ``HTTPClient/perform(_:onHead:onBody:)``).
    func run(_ request: HTTPRequest) throws(CairnError) -> HTTPResponseHead {
        if let ifRange = request.ifRange, ifRange.utf8.contains(where: { $0 < 0x20 && $0 != 0x09 || $0 == 0x7F }) {
            throw CairnError(.invalidArgument, "the If-Range validator contains control characters", path: url)
        }
        var fields: UnsafeMutablePointer<curl_slist>? = nil
        var lines = ["Accept-Encoding: identity"]
        if let range = request.range { lines.append("Range: \(range.headerValue)") }
        if let ifRange = request.ifRange { lines.append("If-Range: \(ifRange)") }
        for (name, value) in request.headers {
            guard !(name + value).utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }), !name.isEmpty else {
                throw CairnError(.invalidArgument, "a request header field holds a line break", path: url)
            }
            lines.append("\(name): \(value)")
        }
        if request.body != nil {
            // A body of known length goes out at once: no `Expect: 100-continue` round trip, and
            // no form content type that libcurl would add for a POST.
            lines.append("Expect:")
            if !request.headers.contains(where: { $0.name.lowercased() == "content-type" }) { lines.append("Content-Type:") }
        }
        for line in lines {
            guard let appended = curl_slist_append(fields, line) else {
                curl_slist_free_all(fields)
                throw CairnError(.io, "libcurl could not store a request header", path: url)
            }
            fields = appended
        }
        defer { curl_slist_free_all(fields) }

        // A PUT or POST always sends a body (Content-Length: 0 when empty); one byte of storage
        // for an empty one, so the pointer is valid.
        let bodyCount = request.body?.count ?? (request.method == .post || request.method == .put ? 0 : nil)
        let body: [UInt8]? = bodyCount.map { $0 == 0 ? [0] : request.body ?? [0] }
        let code: CURLcode = withExtendedLifetime(self) { body.withUnsafeBytesIfPresent { bodyBytes in
            let context = Unmanaged.passUnretained(self).toOpaque()
            let h = handle.raw
            let configuration = client.configuration
            var set = CURLE_OK
            func check(_ result: CURLcode) { if set == CURLE_OK { set = result } }
            check(cairn_curl_setopt_string(h, CURLOPT_URL, request.url))
            check(cairn_curl_setopt_string(h, CURLOPT_PROTOCOLS_STR, "http,https"))
            check(cairn_curl_setopt_string(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https"))
            check(cairn_curl_setopt_long(h, CURLOPT_NOSIGNAL, 1))
            check(cairn_curl_setopt_long(h, CURLOPT_FOLLOWLOCATION, 1))
            check(cairn_curl_setopt_long(h, CURLOPT_MAXREDIRS, configuration.maximumRedirects))
            check(cairn_curl_setopt_long(h, CURLOPT_FAILONERROR, 0))
            check(
                cairn_curl_setopt_long(
                    h, CURLOPT_CONNECTTIMEOUT_MS, Self.milliseconds(configuration.connectTimeout)))
            // A backstop only: libcurl's speed is an average over about 5 s, so after a burst this
            // fires up to 5 s late; the progress callback enforces the stall timeout itself.
            check(cairn_curl_setopt_long(h, CURLOPT_LOW_SPEED_LIMIT, 1))
            check(cairn_curl_setopt_long(h, CURLOPT_LOW_SPEED_TIME, Self.wholeSeconds(configuration.stallTimeout)))
            check(cairn_curl_setopt_string(h, CURLOPT_USERAGENT, "cairn"))
            if let authorities = configuration.certificateAuthorities, !authorities.isEmpty {
                check(cairn_curl_setopt_string(h, CURLOPT_CAINFO, authorities))
            }
            // Larger reads than the default 16 KiB: fewer recv(2) calls and callbacks per MiB.
            check(cairn_curl_setopt_long(h, CURLOPT_BUFFERSIZE, Self.receiveBufferSize))
            check(cairn_curl_setopt_pointer(h, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(fields)))
            check(cairn_curl_setopt_pointer(h, CURLOPT_ERRORBUFFER, UnsafeMutableRawPointer(errorBuffer)))
            switch request.method {
            case .get: break
            case .head: check(cairn_curl_setopt_long(h, CURLOPT_NOBODY, 1))
            case .put, .post, .delete:
                check(cairn_curl_setopt_string(h, CURLOPT_CUSTOMREQUEST, request.method.rawValue))
            }
            if let bodyBytes {
                // The caller's bytes, not copied (CURLOPT_POSTFIELDS keeps the pointer): valid
                // for the whole curl_easy_perform below.
                check(cairn_curl_setopt_off_t(h, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bodyCount ?? 0)))
                check(cairn_curl_setopt_pointer(h, CURLOPT_POSTFIELDS, bodyBytes.baseAddress.map { UnsafeMutableRawPointer(mutating: $0) }))
            }
            check(cairn_curl_setopt_write_callback(h, CURLOPT_HEADERFUNCTION, curlHeaderCallback))
            check(cairn_curl_setopt_pointer(h, CURLOPT_HEADERDATA, context))
            check(cairn_curl_setopt_write_callback(h, CURLOPT_WRITEFUNCTION, curlWriteCallback))
            check(cairn_curl_setopt_pointer(h, CURLOPT_WRITEDATA, context))
            // The progress callback runs at least once a second, also while nothing arrives: it
            // checks cancellation and the stall timeout.
            check(cairn_curl_setopt_long(h, CURLOPT_NOPROGRESS, 0))
            check(cairn_curl_setopt_xferinfo_callback(h, CURLOPT_XFERINFOFUNCTION, curlProgressCallback))
            check(cairn_curl_setopt_pointer(h, CURLOPT_XFERINFODATA, context))
            lastActivity = Self.now()
            guard set == CURLE_OK else { return set }
            return curl_easy_perform(h)
        } }

        if let keptError { throw keptError }
        guard code == CURLE_OK else { throw error(for: code) }
        return try finalHead()
    }

    // MARK: Callbacks (called on the thread running curl_easy_perform)

    /// One header line, CRLF included: a status line starts a new set of fields.
    fileprivate func receiveHeaderLine(_ bytes: UnsafeRawBufferPointer) {
        lastActivity = Self.now()
        guard !bodyStarted else { return }  // trailer fields of a chunked body
        let line = String(decoding: bytes, as: UTF8.self).trimmingHTTPWhitespace()
        if line.hasPrefix("HTTP/") {
            let parts = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true)
            let code = parts.count >= 2 ? UInt64(httpDigits: parts[1]) : nil
            status = code.flatMap { parts[1].utf8.count == 3 ? Int($0) : nil }
            reason = parts.count == 3 ? String(parts[2]) : ""
            headers = [:]
            return
        }
        guard let colon = line.firstIndex(of: ":") else { return }
        let name = line[..<colon].trimmingHTTPWhitespace().lowercased()
        headers[name] = line[line.index(after: colon)...].trimmingHTTPWhitespace()
    }

    /// A piece of the final response's body. Returns false to make libcurl abort.
    fileprivate func receiveBody(_ piece: UnsafeRawBufferPointer) -> Bool {
        guard keptError == nil else { return false }
        lastActivity = Self.now()
        if client.signer != nil, let status, status >= 400 {
            // An object store explains its errors in the body: keep its start, then fail at the end.
            bodyStarted = true
            errorBody.append(contentsOf: piece.prefix(max(0, Self.errorBodyLimit - errorBody.count)))
            return true
        }
        do {
            bodyStarted = true
            _ = try finalHead()
            try onBody(piece)
        } catch {
            keptError = error
            return false
        }
        delivered += UInt64(piece.count)
        client.countReceived(piece.count)
        return true
    }

    /// Whether the transfer is to be aborted (progress callback): it was cancelled, or nothing
    /// arrived for the stall timeout.
    fileprivate var shouldAbort: Bool {
        guard keptError == nil else { return true }
        if let isCancelled, isCancelled() {
            keptError = CairnError(.network, "the transfer was cancelled", path: url, offset: reachedOffset)
            return true
        }
        let stallTimeout = client.configuration.stallTimeout
        if stallTimeout.isFinite, stallTimeout > 0, Self.now() - lastActivity >= stallTimeout {
            keptError = timeoutError(cause: "no byte arrived for \(stallTimeout) s")
            return true
        }
        return false
    }

    /// `.network` "timed out ...", before or during the body.
    private func timeoutError(cause: String) -> CairnError {
        let message = status == nil ? "timed out waiting for the server's answer" : "timed out: the server stopped sending"
        return CairnError(.network, message, path: effectiveURL ?? url, offset: reachedOffset, cause: cause)
    }

    // MARK: Head and errors

    /// The final head: built, checked and handed to `onHead` the first time.
    private func finalHead() throws(CairnError) -> HTTPResponseHead {
        if let head { return head }
        let answering = effectiveURL ?? url
        guard let status else {
            throw CairnError(.network, "the server sent no HTTP status line", path: answering)
        }
        let head = HTTPResponseHead(status: status, url: answering, headers: headers)
        self.head = head
        guard status < 400 else {
            let detail = client.signer?.errorDetail(status: status, body: errorBody)
            let cause = client.signer?.errorCause(status: status, body: errorBody)
            throw HTTPClient.statusError(status: status, reason: reason, url: answering, detail: detail, cause: cause)
        }
        if let encoding = headers["content-encoding"], !encoding.isEmpty, encoding.lowercased() != "identity" {
            throw CairnError(
                .corrupted, "the server sent \(encoding)-encoded bytes although identity was asked",
                path: answering)
        }
        try onHead(head)
        return head
    }

    /// The URL that answered, after redirects (`CURLINFO_EFFECTIVE_URL`).
    private var effectiveURL: String? {
        var text: UnsafeMutablePointer<CChar>? = nil
        guard cairn_curl_getinfo_string(handle.raw, CURLINFO_EFFECTIVE_URL, &text) == CURLE_OK, let text else {
            return nil
        }
        return String(cString: text)
    }

    /// The offset in the resource reached: the Content-Range start (0 for a 200) plus the body
    /// bytes received; nil before the head.
    private var reachedOffset: UInt64? {
        guard let head else { return nil }
        return (head.status == 206 ? head.contentRange?.first ?? 0 : 0) + delivered
    }

    private static let unfetchableURLMessage = "not a URL the HTTP client can fetch"

    /// The error a transfer gives text that is not a URL (libcurl's `CURLE_URL_MALFORMAT`), for a
    /// location refused before any transfer starts: the same message and cause as the transfer's.
    package static func malformedURLError(_ text: String) -> CairnError {
        CairnError(
            .invalidArgument, unfetchableURLMessage, path: text,
            cause: String(cString: curl_easy_strerror(CURLE_URL_MALFORMAT)))
    }

    /// The ``CairnError`` for a failed `curl_easy_perform`.
    private func error(for code: CURLcode) -> CairnError {
        var cause = String(cString: curl_easy_strerror(code))
        let detail = String(cString: errorBuffer)
        if !detail.isEmpty, detail != cause { cause += " (\(detail))" }
        let message: String
        switch code {
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_CONNECT:
            message = "cannot connect to the server"
        case CURLE_OPERATION_TIMEDOUT:
            if let connected = connectedFlag, !connected {
                message = "timed out connecting to the server"
            } else {
                return timeoutError(cause: cause)
            }
        case CURLE_PARTIAL_FILE, CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_GOT_NOTHING:
            message = "the connection was cut"
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CERTPROBLEM, CURLE_SSL_ISSUER_ERROR,
            CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_CRL_BADFILE:
            // Not transient: trying again meets the same certificate.
            return CairnError(
                .invalidArgument,
                "the server's TLS certificate is not trusted (CURL_CA_BUNDLE or SSL_CERT_FILE can name a CA file that trusts it)",
                path: effectiveURL ?? url, cause: cause)
        case CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CIPHER, CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED,
            CURLE_SSL_SHUTDOWN_FAILED, CURLE_SSL_CLIENTCERT, CURLE_USE_SSL_FAILED:
            message = "TLS failed"
        case CURLE_TOO_MANY_REDIRECTS:
            return CairnError(
                .limitExceeded, "more than \(client.configuration.maximumRedirects) redirects", path: url, cause: cause)
        case CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT, CURLE_BAD_FUNCTION_ARGUMENT:
            return CairnError(.invalidArgument, Self.unfetchableURLMessage, path: url, cause: cause)
        case CURLE_OUT_OF_MEMORY:
            return CairnError(.io, "libcurl ran out of memory", path: url, cause: cause)
        default:
            message = "the transfer failed"
        }
        return CairnError(.network, message, path: effectiveURL ?? url, offset: reachedOffset, cause: cause)
    }

    /// Whether a connection was established (`CURLINFO_CONNECT_TIME_T` > 0), nil if unknown.
    private var connectedFlag: Bool? {
        var microseconds: curl_off_t = 0
        guard cairn_curl_getinfo_off_t(handle.raw, CURLINFO_CONNECT_TIME_T, &microseconds) == CURLE_OK else { return nil }
        return microseconds > 0
    }

    /// `CLOCK_MONOTONIC` in seconds.
    private static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    /// Bytes libcurl reads per `recv(2)` at most; it hands them to the write callback in pieces
    /// of at most `CURL_MAX_WRITE_SIZE` (16 KiB) whatever this is.
    private static let receiveBufferSize = 256 << 10

    private static func milliseconds(_ seconds: Double) -> Int {
        guard seconds.isFinite, seconds > 0 else { return 0 }
        return seconds >= 1e9 ? 1_000_000_000_000 : Int((seconds * 1000).rounded(.up))
    }

    private static func wholeSeconds(_ seconds: Double) -> Int {
        guard seconds.isFinite, seconds > 1 else { return 1 }
        return seconds >= 1e9 ? 1_000_000_000 : Int(seconds.rounded(.up))
    }
}

extension Optional where Wrapped == [UInt8] {
    /// Runs `body` with the bytes when there are some, with nil otherwise.
    fileprivate func withUnsafeBytesIfPresent<R>(_ body: (UnsafeRawBufferPointer?) -> R) -> R {
        switch self {
        case .some(let bytes): return bytes.withUnsafeBytes { body($0) }
        case .none: return body(nil)
        }
    }
}

/// `CURLOPT_HEADERFUNCTION`: one header line per call.
private let curlHeaderCallback: curl_write_callback = { data, size, count, context in
    let length = size &* count
    guard let context else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    transfer.receiveHeaderLine(UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : length))
    return length
}

/// `CURLOPT_WRITEFUNCTION`: a piece of the body; returning less than given aborts the transfer.
private let curlWriteCallback: curl_write_callback = { data, size, count, context in
    let length = size &* count
    guard let context else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    let accepted = transfer.receiveBody(UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : length))
    return accepted ? length : 0
}

/// `CURLOPT_XFERINFOFUNCTION`: non-zero aborts the transfer (`CURLE_ABORTED_BY_CALLBACK`).
private let curlProgressCallback: curl_xferinfo_callback = { context, _, _, _, _ in
    guard let context else { return 1 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.shouldAbort ? 1 : 0
}
