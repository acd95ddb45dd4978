/// A byte range of RFC 9110 §14.1.2, sent as `Range: bytes=...`.
package enum HTTPByteRange: Sendable, Equatable {
    /// `bytes=N-`: from offset N to the end.
    case from(UInt64)
    /// `bytes=first-last`, both inclusive.
    case bounded(UInt64, UInt64)
    /// `bytes=-N`: the last N bytes.
    case suffix(UInt64)

    /// The field value, `bytes=...`.
    package var headerValue: String {
        switch self {
        case .from(let first): return "bytes=\(first)-"
        case .bounded(let first, let last): return "bytes=\(first)-\(last)"
        case .suffix(let count): return "bytes=-\(count)"
        }
    }
}

/// One HTTP request: a URL (`http://` or `https://`), a method, an optional range, extra header
/// fields and an optional body held in memory.
package struct HTTPRequest: Sendable {
    /// The request method.
    package enum Method: String, Sendable {
        /// `GET`: the head and the body.
        case get = "GET"
        /// `HEAD`: the head only.
        case head = "HEAD"
        /// `PUT`, with ``HTTPRequest/body`` (an object or a part of a multipart upload).
        case put = "PUT"
        /// `POST`, with ``HTTPRequest/body`` (empty when nil).
        case post = "POST"
        /// `DELETE`.
        case delete = "DELETE"
    }

    /// The absolute URL, `http://` or `https://`.
    package var url: String
    /// The method, `GET` by default.
    package var method: Method = .get
    /// The byte range to ask for, or nil for the whole resource.
    package var range: HTTPByteRange? = nil
    /// A validator (an ETag or a Last-Modified date, as received) sent as `If-Range` (RFC 9110
    /// §13.1.5): the server answers 206 with the range only if the resource still matches it, and
    /// 200 with the whole resource otherwise. Only meaningful with ``range``.
    package var ifRange: String? = nil
    /// Further header fields, sent as given (after `Range` and `If-Range`); a request signer
    /// signs them (``HTTPRequestSigner``). Names and values must not hold CR, LF or NUL.
    package var headers: [(name: String, value: String)] = []
    /// The body of a `PUT` or `POST`, sent with its `Content-Length` (never chunked, never with
    /// `Expect: 100-continue`); nil for none.
    package var body: [UInt8]? = nil
    /// The SHA-256 of ``body`` in lowercase hex when the caller has it already, so that a
    /// signer that signs over it (SigV4's `x-amz-content-sha256`) need not hash the body again.
    package var bodySHA256: String? = nil

    /// Creates a request.
    package init(
        url: String, method: Method = .get, range: HTTPByteRange? = nil, ifRange: String? = nil,
        headers: [(name: String, value: String)] = [], body: [UInt8]? = nil
    ) {
        self.url = url
        self.method = method
        self.range = range
        self.ifRange = ifRange
        self.headers = headers
        self.body = body
    }
}

/// Signs every request of an ``HTTPClient`` (AWS Signature Version 4 for an object store) and
/// reads the detail out of its error answers.
package protocol HTTPRequestSigner: Sendable {
    /// The header fields to add to `request` just before it is sent (each try of a retried
    /// request is signed anew).
    ///
    /// - Throws: `.invalidArgument` for a request it cannot sign (a malformed URL).
    func signingHeaders(for request: HTTPRequest) throws(CairnError) -> [(name: String, value: String)]

    /// What an error answer's body says, in one line ("NoSuchBucket: The specified bucket does
    /// not exist"), or nil; the client keeps the first 16 KiB of an error answer's body for it.
    func errorDetail(status: Int, body: [UInt8]) -> String?

    /// The cause an error answer's body names (an object store's `<Code>`:
    /// ``CairnError/Cause/s3(code:httpStatus:)``), or nil when it names none.
    func errorCause(status: Int, body: [UInt8]) -> CairnError.Cause?
}

/// `Content-Range: bytes first-last/total` (RFC 9110 §14.4); `total` is nil for `*`.
package struct HTTPContentRange: Sendable, Equatable {
    /// The offset of the first byte of the body in the resource.
    package var first: UInt64
    /// The offset of the last byte of the body in the resource (inclusive).
    package var last: UInt64
    /// The resource's length, or nil when the server sent `*`.
    package var total: UInt64?

    /// Creates a range.
    package init(first: UInt64, last: UInt64, total: UInt64?) {
        self.first = first
        self.last = last
        self.total = total
    }

    /// Parses a `Content-Range` field value strictly: `bytes first-last/total` or
    /// `bytes first-last/*`, decimal digits only, `first <= last`, and `last < total`. Returns nil
    /// for anything else (an unsatisfied range `bytes */N` included).
    package init?(parsing value: String) {
        let trimmed = value.trimmingHTTPWhitespace()
        guard trimmed.hasPrefix("bytes ") else { return nil }
        let spec = trimmed.dropFirst("bytes ".count)
        let halves = spec.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard halves.count == 2 else { return nil }
        let bounds = halves[0].split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = UInt64(httpDigits: bounds[0]),
            let last = UInt64(httpDigits: bounds[1]), first <= last
        else { return nil }
        var total: UInt64? = nil
        if halves[1] != "*" {
            guard let value = UInt64(httpDigits: halves[1]), last < value else { return nil }
            total = value
        }
        self.init(first: first, last: last, total: total)
    }
}

/// The status line and header fields of the final response of a request (after redirects).
package struct HTTPResponseHead: Sendable {
    /// The status code (200, 206, ...).
    package var status: Int
    /// The URL that answered, after redirects.
    package var url: String
    /// Header fields of the final response, names lowercased (the last value of a repeated field).
    package var headers: [String: String]
    /// `Content-Length`, when present and a plain decimal number.
    package var contentLength: UInt64?
    /// `Content-Range`, when present and well formed (see ``HTTPContentRange/init(parsing:)``).
    package var contentRange: HTTPContentRange?
    /// `ETag`, as received (quotes and a `W/` prefix included).
    package var etag: String?
    /// `Last-Modified`, as received.
    package var lastModified: String?
    /// The validator to keep for `If-Range`: the ETag when it is strong (not `W/`), else
    /// Last-Modified, else nil.
    package var strongValidator: String?
    /// The total size of the resource in bytes: Content-Range's total for a 206 (and for a 200
    /// that carries one), else Content-Length for a 200; nil otherwise or when unknown.
    package var resourceLength: UInt64?

    /// Derives every field from `status`, `url` and `headers` (names already lowercased).
    package init(status: Int, url: String, headers: [String: String]) {
        self.status = status
        self.url = url
        self.headers = headers
        contentLength = headers["content-length"].flatMap { UInt64(httpDigits: Substring($0.trimmingHTTPWhitespace())) }
        contentRange = headers["content-range"].flatMap { HTTPContentRange(parsing: $0) }
        etag = headers["etag"]
        lastModified = headers["last-modified"]
        if let etag, !etag.hasPrefix("W/") {
            strongValidator = etag
        } else {
            strongValidator = lastModified
        }
        switch status {
        case 206: resourceLength = contentRange?.total
        case 200: resourceLength = contentRange?.total ?? contentLength
        default: resourceLength = nil
        }
    }

    /// Whether this answers a range request with the range: a 206, or a 200 with a
    /// Content-Range (some object stores, `rclone serve s3` among them, answer a range so).
    package var isRangeAnswer: Bool {
        status == 206 || (status == 200 && contentRange != nil)
    }
}

extension CairnError {
    /// The status code of an `.httpStatus` error (from its ``CairnError/underlyingCause``), nil
    /// for every other error.
    package var httpStatusCode: Int? {
        guard code == .httpStatus else { return nil }
        switch underlyingCause {
        case .httpStatus(let status)?, .s3(_, let status)?: return status
        default: return nil
        }
    }
}

extension UInt64 {
    /// A decimal number of 1 to 19 ASCII digits, nothing else (no sign, no spaces).
    init?(httpDigits text: Substring) {
        guard !text.isEmpty, text.utf8.count <= 19, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            return nil
        }
        self.init(text)
    }
}

extension StringProtocol {
    /// The text without leading and trailing spaces, tabs, CR and LF (RFC 9110 §5.6.3 OWS, and
    /// the line end of a header line).
    func trimmingHTTPWhitespace() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" || $0 == "\r\n" }
        guard let start = firstIndex(where: { !isSpace($0) }), let end = lastIndex(where: { !isSpace($0) }) else {
            return ""
        }
        return String(self[start...end])
    }
}
