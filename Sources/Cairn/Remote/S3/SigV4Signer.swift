import Foundation
import Glibc

/// Signs HTTP requests with AWS Signature Version 4 (`AWS4-HMAC-SHA256`), the authentication of
/// S3 and of the S3-compatible stores, sent in the `Authorization` header field.
///
/// Source: AWS documentation, "Create a signed AWS API request" (Signature Version 4 signing
/// process: canonical request, string to sign, signing key, signature), and for S3 "Signature
/// Calculations for the Authorization Header: Transferring Payload in a Single Chunk"; checked
/// against AWS's published `aws-sig-v4-test-suite` and the S3 examples of that page.
///
/// The steps, for a request `method url` with header fields `headers` and a body whose SHA-256 is
/// `payloadHash`, at time `date`:
/// 1. Canonical request: the method, the canonical URI, the canonical query string, the canonical
///    header fields (`name:value` lines, names lowercased, sorted), the signed header names
///    (`a;b;c`) and the payload hash, separated by line feeds.
/// 2. String to sign: `AWS4-HMAC-SHA256`, the `X-Amz-Date` timestamp, the credential scope
///    `YYYYMMDD/region/service/aws4_request` and the hex SHA-256 of the canonical request.
/// 3. Signing key: HMAC-SHA-256 chained from `"AWS4" + secret` over the date, the region, the
///    service and `aws4_request`; the signature is the hex HMAC of the string to sign under it.
///
/// The canonical URI differs by service: for `s3` it is the URL's path as sent, each segment
/// URI-encoded once (escapes the URL has are decoded first, so nothing is encoded twice) and
/// never normalised; for other services the path is normalised (`.`, `..` and empty segments
/// removed) and each segment encoded twice, as the generic test suite expects.
///
/// The secret access key and the session token appear in no error this type throws.
package struct SigV4Signer: Sendable {
    /// The signing algorithm's name, the first word of the `Authorization` value.
    package static let algorithm = "AWS4-HMAC-SHA256"
    /// The payload hash that tells S3 the body is not covered by the signature (for a body
    /// streamed before its hash is known; TLS still protects it in transit).
    package static let unsignedPayload = "UNSIGNED-PAYLOAD"

    /// The credentials requests are signed with.
    private let credentials: S3Credentials
    /// The region of the credential scope (`us-east-1`; S3-compatible stores often accept any).
    package let region: String
    /// The service of the credential scope: `s3`, or another AWS service name.
    package let service: String
    /// Whether the request carries and signs `X-Amz-Content-Sha256` (S3 requires it; the generic
    /// test suite's requests do not send it).
    package let includesContentHashHeader: Bool

    /// Creates a signer.
    ///
    /// - Parameters:
    ///   - credentials: The access key, its secret, and the session token if any.
    ///   - region: The region of the credential scope, e.g. `us-east-1`.
    ///   - service: The service of the credential scope; `s3` (the default) selects S3's
    ///     canonical URI (no normalisation, no second encoding).
    ///   - includesContentHashHeader: Whether `X-Amz-Content-Sha256` is sent and signed; `true`
    ///     by default, as S3 requires.
    package init(
        credentials: S3Credentials, region: String, service: String = "s3", includesContentHashHeader: Bool = true
    ) {
        self.credentials = credentials
        self.region = region
        self.service = service
        self.includesContentHashHeader = includesContentHashHeader
    }

    /// Returns the lowercase hexadecimal SHA-256 of a request body, the payload hash to sign.
    ///
    /// - Parameter body: The whole body; empty for a request without one.
    /// - Returns: 64 lowercase hexadecimal digits; an empty string when libcrypto cannot hash (it
    ///   cannot allocate), which ``signedHeaders(method:url:headers:payloadHash:date:)`` rejects,
    ///   so a made-up hash is never signed.
    package static func payloadHash(_ body: [UInt8]) -> String {
        (try? SHA256.hash(body))?.hexString ?? ""
    }

    /// The header fields to add to the request: `Authorization`, `X-Amz-Date`,
    /// `X-Amz-Content-Sha256` (always unless ``includesContentHashHeader`` is false; its value is
    /// `payloadHash`), and `X-Amz-Security-Token` when the credentials have a session token.
    ///
    /// The signature covers `host` (derived from `url`: the host, plus `:port` when the URL names
    /// a port other than its scheme's default, which is what libcurl sends), `x-amz-date`,
    /// `x-amz-content-sha256`, `x-amz-security-token` when there is a token, and every field in
    /// `headers`.
    ///
    /// - Parameters:
    ///   - method: The request method, e.g. `GET`, `PUT`, `POST`.
    ///   - url: The absolute `http://` or `https://` URL exactly as it is sent: path and query
    ///     already percent-encoded (a space as `%20`; a `+` in the query is a literal plus).
    ///   - headers: The other fields the request sends that are to be signed (`Range`,
    ///     `Content-MD5`, `Content-Type`, `If-None-Match`, `x-amz-*`...). Names are matched
    ///     without case; values are trimmed and inner runs of spaces collapsed for signing (send
    ///     them as given). A name given twice is signed as `value1,value2`, in order. `Host`,
    ///     `Authorization` and the fields the signer adds are refused.
    ///   - payloadHash: The body's hash from ``payloadHash(_:)``, or ``unsignedPayload``.
    ///   - date: The time of the request; it must be within minutes of the server's clock.
    /// - Returns: The fields to add, names in their conventional case.
    /// - Throws: ``CairnError`` with code `.invalidArgument` and the URL as its path for a URL
    ///   that is not an absolute HTTP(S) URL with a host (or whose path or query holds a
    ///   character that must be percent-encoded, or a broken `%` escape), a method or header
    ///   field that is not a valid token or holds a line break, a field the signer sets itself,
    ///   a malformed payload hash, a region, service or access key ID that cannot appear in the
    ///   credential scope, or a date outside years 0 to 9999; `.io` when libcrypto fails.
    package func signedHeaders(
        method: String, url: String, headers: [(name: String, value: String)], payloadHash: String, date: Date
    ) throws(CairnError) -> [(name: String, value: String)] {
        try signing(method: method, url: url, headers: headers, payloadHash: payloadHash, date: date).headers
    }

    /// Every step of one signature, for tests that check each against published vectors.
    ///
    /// - Important: ``canonicalRequest`` contains the session token when there is one: do not
    ///   log it. The secret access key appears in none of these.
    package struct Signing: Sendable {
        /// The canonical request (step 1), lines separated by `\n`.
        package var canonicalRequest: String
        /// The string to sign (step 2).
        package var stringToSign: String
        /// The signature: 64 lowercase hexadecimal digits.
        package var signature: String
        /// The `Authorization` field's value.
        package var authorization: String
        /// The fields to add to the request (see ``SigV4Signer/signedHeaders(method:url:headers:payloadHash:date:)``).
        package var headers: [(name: String, value: String)]
    }

    /// Signs a request and returns every step; see
    /// ``signedHeaders(method:url:headers:payloadHash:date:)`` for the parameters and errors.
    package func signing(
        method: String, url: String, headers: [(name: String, value: String)], payloadHash: String, date: Date
    ) throws(CairnError) -> Signing {
        func invalid(_ message: String) -> CairnError { CairnError(.invalidArgument, message, path: url) }

        guard Self.isToken(method) else { throw invalid("the HTTP method \"\(method)\" is not a valid token") }
        guard Self.isScopePart(region) else { throw invalid("the region \"\(region)\" cannot appear in a signature's credential scope") }
        guard Self.isScopePart(service) else { throw invalid("the service \"\(service)\" cannot appear in a signature's credential scope") }
        guard !credentials.accessKeyID.isEmpty,
            credentials.accessKeyID.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ",") && $0 != UInt8(ascii: "/") })
        else {
            throw invalid("the access key ID is empty or holds a space, ',', '/' or a character outside printable ASCII")
        }
        if let token = credentials.sessionToken, !Self.isFieldValue(token) {
            throw invalid("the session token holds a line break or another control character")
        }
        guard !payloadHash.isEmpty, payloadHash.utf8.count <= 128,
            payloadHash.utf8.allSatisfy({ Self.isAlphanumeric($0) || $0 == UInt8(ascii: "-") })
        else {
            throw invalid("the payload hash is empty or malformed (expected 64 hexadecimal digits or \(Self.unsignedPayload))")
        }

        let target = try RequestTarget(parsing: url)
        let canonicalURI = try Self.canonicalURI(target.path, normalising: service != "s3", url: url)
        let canonicalQuery = try Self.canonicalQuery(target.query, url: url)
        let time = try Self.timestamp(date, url: url)

        // The fields the signer sets; the caller may not pass these.
        var fields: [(name: String, value: String)] = [("host", target.hostHeader), ("x-amz-date", time.dateTime)]
        if includesContentHashHeader { fields.append(("x-amz-content-sha256", payloadHash)) }
        if let token = credentials.sessionToken { fields.append(("x-amz-security-token", token)) }
        let reserved: Set<String> = ["host", "authorization", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"]
        for field in headers {
            let name = field.name.lowercased()
            guard Self.isToken(field.name) else { throw invalid("the header field name \"\(field.name)\" is not a valid token") }
            guard !reserved.contains(name) else { throw invalid("the header field \(field.name) is set by the signer") }
            guard Self.isFieldValue(field.value) else { throw invalid("the header field \(field.name) holds a line break or another control character") }
            fields.append((name, field.value))
        }

        // Sorted by name (stable, so repeated names keep their order), repeated names joined.
        let sorted = fields.enumerated().sorted { left, right in
            left.element.name != right.element.name
                ? left.element.name.utf8.lexicographicallyPrecedes(right.element.name.utf8) : left.offset < right.offset
        }
        var canonical: [(name: String, values: [String])] = []
        for (_, field) in sorted {
            let value = Self.canonicalValue(field.value)
            if let last = canonical.last, last.name == field.name {
                canonical[canonical.count - 1].values.append(value)
            } else {
                canonical.append((field.name, [value]))
            }
        }
        let signedHeaderNames = canonical.map(\.name).joined(separator: ";")
        let canonicalHeaders = canonical.map { "\($0.name):\($0.values.joined(separator: ","))\n" }.joined()

        let canonicalRequest = [
            method, canonicalURI, canonicalQuery, canonicalHeaders, signedHeaderNames, payloadHash,
        ].joined(separator: "\n")
        let scope = "\(time.date)/\(region)/\(service)/aws4_request"
        let stringToSign = [
            Self.algorithm, time.dateTime, scope, try SHA256.hash(Array(canonicalRequest.utf8)).hexString,
        ].joined(separator: "\n")

        var key = try HMAC.sha256(key: Array("AWS4\(credentials.secretAccessKey)".utf8), message: Array(time.date.utf8))
        for part in [region, service, "aws4_request"] {
            key = try HMAC.sha256(key: key, message: Array(part.utf8))
        }
        let mac = try HMAC.sha256(key: key, message: Array(stringToSign.utf8))
        guard let signature = Digest(bytes: mac)?.hexString else {
            throw CairnError(.io, "libcrypto returned an HMAC of the wrong length", path: url)
        }

        let authorization =
            "\(Self.algorithm) Credential=\(credentials.accessKeyID)/\(scope), SignedHeaders=\(signedHeaderNames), Signature=\(signature)"
        var added: [(name: String, value: String)] = [("Authorization", authorization), ("X-Amz-Date", time.dateTime)]
        if includesContentHashHeader { added.append(("X-Amz-Content-Sha256", payloadHash)) }
        if let token = credentials.sessionToken { added.append(("X-Amz-Security-Token", token)) }
        return Signing(
            canonicalRequest: canonicalRequest, stringToSign: stringToSign, signature: signature,
            authorization: authorization, headers: added)
    }
}

// MARK: - The URL's parts

extension SigV4Signer {
    /// What signing needs of an absolute URL: the `Host` field, the path and the query, both still
    /// percent-encoded as sent.
    struct RequestTarget {
        /// The host, with `:port` when the URL names a port other than the scheme's default.
        var hostHeader: String
        /// The path as sent; `/` when the URL has none.
        var path: Substring
        /// The query after `?`, without a fragment; empty when there is none.
        var query: Substring

        /// Splits `scheme://[userinfo@]host[:port][/path][?query][#fragment]` (RFC 3986 §3).
        ///
        /// - Throws: `.invalidArgument` naming the URL (the message never repeats it).
        init(parsing url: String) throws(CairnError) {
            func malformed(_ why: String) -> CairnError {
                CairnError(.invalidArgument, "not a URL that can be signed: \(why)", path: url)
            }
            guard let separator = url.range(of: "://") else { throw malformed("it has no scheme") }
            let scheme = url[..<separator.lowerBound].lowercased()
            let defaultPort: String
            switch scheme {
            case "http": defaultPort = "80"
            case "https": defaultPort = "443"
            default: throw malformed("the scheme must be http or https")
            }
            var rest = url[separator.upperBound...]
            if let fragment = rest.firstIndex(of: "#") { rest = rest[..<fragment] }
            let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
            var authority = rest[..<authorityEnd]
            if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }

            var host = authority
            var port: Substring = ""
            if authority.hasPrefix("[") {
                guard let close = authority.firstIndex(of: "]") else { throw malformed("an IPv6 address lacks its ']'") }
                host = authority[...close]
                let after = authority[authority.index(after: close)...]
                if !after.isEmpty {
                    guard after.hasPrefix(":") else { throw malformed("text follows the IPv6 address") }
                    port = after.dropFirst()
                }
                guard host.utf8.dropFirst().dropLast().allSatisfy({ SigV4Signer.isHexDigit($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }),
                    host.count > 2
                else { throw malformed("the IPv6 address is not valid") }
            } else {
                if let colon = authority.firstIndex(of: ":") {
                    host = authority[..<colon]
                    port = authority[authority.index(after: colon)...]
                }
                guard !host.isEmpty,
                    host.utf8.allSatisfy({ SigV4Signer.isUnreserved($0) })
                else { throw malformed("the host is empty or not a valid name") }
            }
            // An empty port (`host:`) means the default one (RFC 3986 §3.2.3).
            if !port.isEmpty {
                guard let number = UInt64(httpDigits: port), (1...65535).contains(number) else {
                    throw malformed("the port is not a number from 1 to 65535")
                }
                port = Substring(String(number))
            }
            hostHeader = port.isEmpty || port == defaultPort ? String(host) : "\(host):\(port)"

            let pathAndQuery = rest[authorityEnd...]
            let queryStart = pathAndQuery.firstIndex(of: "?")
            path = queryStart.map { pathAndQuery[..<$0] } ?? pathAndQuery
            query = queryStart.map { pathAndQuery[pathAndQuery.index(after: $0)...] } ?? ""
            if path.isEmpty { path = "/" }
            let allowed: (UInt8) -> Bool = { byte in
                SigV4Signer.isUnreserved(byte) || "!$&'()*+,;=:@/%".utf8.contains(byte)
            }
            guard path.utf8.allSatisfy(allowed) else {
                throw malformed("the path holds a character that must be percent-encoded")
            }
            guard query.utf8.allSatisfy({ allowed($0) || $0 == UInt8(ascii: "?") }) else {
                throw malformed("the query holds a character that must be percent-encoded")
            }
        }
    }
}

// MARK: - Canonical forms

extension SigV4Signer {
    /// The canonical URI: each path segment decoded, then URI-encoded once (`s3`) or, after
    /// removing `.`, `..` and empty segments, twice (other services).
    static func canonicalURI(_ path: Substring, normalising: Bool, url: String) throws(CairnError) -> String {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        var decoded: [[UInt8]] = []
        for segment in segments { decoded.append(try percentDecoded(segment, url: url)) }
        guard normalising else {
            return "/" + decoded.map { uriEncoded($0) }.joined(separator: "/")
        }
        var kept: [[UInt8]] = []
        for segment in decoded {
            switch segment {
            case [], Array(".".utf8): continue
            case Array("..".utf8): _ = kept.popLast()
            default: kept.append(segment)
            }
        }
        let endsInDirectory = [[], Array(".".utf8), Array("..".utf8)].contains(decoded.last ?? [])
        let joined = kept.map { uriEncoded(Array(uriEncoded($0).utf8)) }.joined(separator: "/")
        return kept.isEmpty ? "/" : "/" + joined + (endsInDirectory ? "/" : "")
    }

    /// The canonical query string: every `name=value` decoded and URI-encoded, sorted by name
    /// then value; a parameter without `=` gets an empty value (`uploads` becomes `uploads=`).
    static func canonicalQuery(_ query: Substring, url: String) throws(CairnError) -> String {
        var parameters: [(name: String, value: String)] = []
        for piece in query.split(separator: "&") {
            let equals = piece.firstIndex(of: "=")
            let name = equals.map { piece[..<$0] } ?? piece
            let value = equals.map { piece[piece.index(after: $0)...] } ?? ""
            parameters.append(
                (uriEncoded(try percentDecoded(name, url: url)), uriEncoded(try percentDecoded(value, url: url))))
        }
        parameters.sort { left, right in
            left.name != right.name
                ? left.name.utf8.lexicographicallyPrecedes(right.name.utf8)
                : left.value.utf8.lexicographicallyPrecedes(right.value.utf8)
        }
        return parameters.map { "\($0.name)=\($0.value)" }.joined(separator: "&")
    }

    /// A header field value for signing: without leading and trailing whitespace, inner runs of
    /// spaces and tabs as one space.
    static func canonicalValue(_ value: String) -> String {
        var result = ""
        var pendingSpace = false
        for character in value.trimmingHTTPWhitespace() {
            if character == " " || character == "\t" {
                pendingSpace = true
                continue
            }
            if pendingSpace { result.append(" ") }
            pendingSpace = false
            result.append(character)
        }
        return result
    }

    /// The bytes of `text` with each `%XX` replaced by the byte it stands for.
    ///
    /// - Throws: `.invalidArgument` naming the URL for a `%` not followed by two hexadecimal digits.
    static func percentDecoded(_ text: Substring, url: String) throws(CairnError) -> [UInt8] {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                throw CairnError(
                    .invalidArgument, "not a URL that can be signed: a '%' is not followed by two hexadecimal digits",
                    path: url)
            }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    /// AWS's `UriEncode`: unreserved bytes (`A-Z a-z 0-9 - _ . ~`) as they are, every other byte
    /// as `%XX` with uppercase hexadecimal digits.
    static func uriEncoded(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        for byte in bytes {
            if isUnreserved(byte) {
                output.append(byte)
            } else {
                output.append(contentsOf: [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
            }
        }
        return String(decoding: output, as: UTF8.self)
    }
}

// MARK: - Time and character classes

extension SigV4Signer {
    /// `YYYYMMDD` and `YYYYMMDD'T'HHMMSS'Z'` in UTC (`gmtime_r`), whole seconds.
    static func timestamp(_ date: Date, url: String) throws(CairnError) -> (date: String, dateTime: String) {
        let outOfRange = CairnError(.invalidArgument, "the request's date is outside the years 0 to 9999", path: url)
        guard let seconds = Int(exactly: date.timeIntervalSince1970.rounded(.down)) else { throw outOfRange }
        var time = time_t(seconds)
        var parts = tm()
        guard gmtime_r(&time, &parts) != nil else { throw outOfRange }
        let year = Int(parts.tm_year) + 1900
        guard (0...9999).contains(year) else { throw outOfRange }
        func padded(_ value: Int, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        let day = padded(year, 4) + padded(Int(parts.tm_mon) + 1, 2) + padded(Int(parts.tm_mday), 2)
        let clock = padded(Int(parts.tm_hour), 2) + padded(Int(parts.tm_min), 2) + padded(Int(parts.tm_sec), 2)
        return (day, "\(day)T\(clock)Z")
    }

    static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
    }

    /// RFC 3986 §2.3 unreserved: `A-Z a-z 0-9 - . _ ~`.
    static func isUnreserved(_ byte: UInt8) -> Bool {
        isAlphanumeric(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_")
            || byte == UInt8(ascii: "~")
    }

    static func isHexDigit(_ byte: UInt8) -> Bool { hexValue(byte) != nil }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: return byte &- 0x30
        case 0x41...0x46: return byte &- 0x41 &+ 10
        case 0x61...0x66: return byte &- 0x61 &+ 10
        default: return nil
        }
    }

    /// An RFC 9110 §5.6.2 token (a method or a field name).
    static func isToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { isAlphanumeric($0) || "!#$%&'*+-.^_`|~".utf8.contains($0) }
    }

    /// A field value without line breaks or control characters other than tab (RFC 9110 §5.5).
    static func isFieldValue(_ text: String) -> Bool {
        text.utf8.allSatisfy { $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }
    }

    /// A region or service name: letters, digits, `-`, `_` and `.`.
    static func isScopePart(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { isAlphanumeric($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".") }
    }
}
