import Foundation

/// The calls of the S3 API that Cairn makes, over ``HTTPClient`` with every request signed
/// (AWS Signature Version 4, ``S3RequestSigner``): `HeadObject`, the five calls of a multipart
/// upload (`CreateMultipartUpload`, `UploadPart`, `ListParts`, `CompleteMultipartUpload`,
/// `AbortMultipartUpload`), and, through ``client``, ranged `GetObject` for the readers.
///
/// Every call is retried on transient failures (``RetryPolicy``: connection errors, 408, 429 and
/// 5xx). Errors are `CairnError`s whose `path` is the request's URL without its query, so they
/// name the endpoint; an `.httpStatus` message carries the store's `<Code>` and `<Message>`,
/// and its `underlyingCause` the `<Code>` as `.s3(code:httpStatus:)`.
package final class S3Client: Sendable {
    /// The store and the credentials.
    package let configuration: S3Configuration
    /// The signed HTTP client every call (and every reader of an object) goes through.
    package let client: HTTPClient
    private let retry: RetryPolicy

    /// The largest answer body read into memory (a `ListParts` page of 1,000 parts is about
    /// 300 KB).
    private static let answerLimit = 4 << 20

    /// - Parameters:
    ///   - http: timeouts of the HTTP client.
    ///   - retry: how transient failures are retried.
    package init(configuration: S3Configuration, http: HTTPClient.Configuration = .init(), retry: RetryPolicy = RetryPolicy(attempts: 5)) {
        self.configuration = configuration
        self.client = HTTPClient(configuration: http, signer: S3RequestSigner(configuration: configuration))
        self.retry = retry
    }

    /// The URL a reader of `location` sends its range requests to.
    package func objectURL(_ location: S3Location) -> String {
        configuration.url(for: location)
    }

    /// One part of a multipart upload, as `ListParts` lists it or as it is sent to
    /// `CompleteMultipartUpload`.
    package struct Part: Sendable, Equatable, Codable {
        /// 1 to 10,000.
        package var number: Int
        /// The entity tag the store gave the part, quotes included.
        package var etag: String
        /// Bytes.
        package var size: UInt64

        package init(number: Int, etag: String, size: UInt64) {
            self.number = number
            self.etag = etag
            self.size = size
        }
    }

    /// `HeadObject`: the object's head, or nil when there is no object at `location` (404).
    ///
    /// - Throws: `.httpStatus` (403: credentials; 404 for a missing bucket is also nil), `.network`.
    package func headObject(_ location: S3Location) throws(CairnError) -> HTTPResponseHead? {
        do {
            return try call("HeadObject", HTTPRequest(url: configuration.url(for: location), method: .head), limit: 0).head
        } catch {
            if error.httpStatusCode == 404 { return nil }
            throw error
        }
    }

    /// `CreateMultipartUpload` (`POST /KEY?uploads`).
    ///
    /// - Returns: the upload id.
    /// - Throws: `.httpStatus` (403 for bad credentials, 404 `NoSuchBucket`), `.network`,
    ///   `.corrupted` for an answer without an upload id.
    package func createMultipartUpload(_ location: S3Location) throws(CairnError) -> String {
        let url = configuration.url(for: location, query: "uploads")
        let answer = try call(
            "CreateMultipartUpload", HTTPRequest(url: url, method: .post, headers: [(name: "Content-Type", value: "application/octet-stream")]))
        guard let document = S3XMLDocument(answer.body), let id = document.root.text(of: "UploadId"), !id.isEmpty else {
            throw CairnError(.corrupted, "the store's answer to CreateMultipartUpload holds no UploadId", path: Self.display(url))
        }
        return id
    }

    /// `UploadPart` (`PUT /KEY?partNumber=N&uploadId=ID`), signed over the part's SHA-256.
    ///
    /// - Parameter sha256: the part's SHA-256 in lowercase hex, when the caller has it.
    /// - Returns: the part's entity tag.
    /// - Throws: `.httpStatus` (404 `NoSuchUpload` when the upload was aborted), `.network`,
    ///   `.corrupted` for an answer without an ETag.
    package func uploadPart(_ location: S3Location, uploadID: String, number: Int, bytes: [UInt8], sha256: String? = nil)
        throws(CairnError) -> String
    {
        let query = "partNumber=\(number)&uploadId=" + S3Location.percentEncoded(uploadID, keepingSlash: false)
        let url = configuration.url(for: location, query: query)
        var request = HTTPRequest(url: url, method: .put, body: bytes)
        request.bodySHA256 = sha256
        let answer = try call("UploadPart \(number)", request)
        guard let etag = answer.head.etag, !etag.isEmpty else {
            throw CairnError(.corrupted, "the store's answer to UploadPart \(number) has no ETag", path: Self.display(url))
        }
        return etag
    }

    /// `ListParts` (`GET /KEY?uploadId=ID`), every page.
    ///
    /// - Returns: the parts the store holds, by part number.
    /// - Throws: `.httpStatus` (404 `NoSuchUpload` when the upload is gone), `.network`,
    ///   `.corrupted` for an answer that is not a `ListPartsResult`.
    package func listParts(_ location: S3Location, uploadID: String) throws(CairnError) -> [Part] {
        // Stores differ on the marker: AWS lists the parts after it, `rclone serve s3` from it on.
        // Following NextPartNumberMarker and keeping each number once works with both.
        var parts: [Int: Part] = [:]
        var marker: Int? = nil
        for _ in 0..<100 {
            var query = "uploadId=" + S3Location.percentEncoded(uploadID, keepingSlash: false)
            if let marker { query = "part-number-marker=\(marker)&" + query }
            let url = configuration.url(for: location, query: query)
            let answer = try call("ListParts", HTTPRequest(url: url))
            guard let document = S3XMLDocument(answer.body), document.root.name.hasPrefix("ListParts") else {
                throw CairnError(.corrupted, "the store's answer to ListParts is not a ListPartsResult", path: Self.display(url))
            }
            for element in document.root.children(named: "Part") {
                guard let number = element.text(of: "PartNumber").flatMap({ Int($0) }), let etag = element.text(of: "ETag"),
                    let size = element.text(of: "Size").flatMap({ UInt64($0) })
                else {
                    throw CairnError(.corrupted, "a part in the store's ListParts answer lacks its number, ETag or size", path: Self.display(url))
                }
                parts[number] = Part(number: number, etag: Self.quoted(etag), size: size)
            }
            guard document.root.text(of: "IsTruncated") == "true",
                let next = document.root.text(of: "NextPartNumberMarker").flatMap({ Int($0) }), next > (marker ?? 0)
            else { break }
            marker = next
        }
        return parts.values.sorted { $0.number < $1.number }
    }

    /// `CompleteMultipartUpload` (`POST /KEY?uploadId=ID` with the parts in order): the object
    /// appears at the key, whole, only now.
    ///
    /// - Parameter ifNoneMatch: send `If-None-Match: *`, so a store that supports conditional
    ///   writes refuses (412) when an object appeared at the key meanwhile.
    /// - Throws: `.alreadyExists` for a 412; `.httpStatus` (400 `InvalidPart`, 404
    ///   `NoSuchUpload`), also when the store answers 200 with an `<Error>` body; `.network`.
    package func completeMultipartUpload(
        _ location: S3Location, uploadID: String, parts: [Part], ifNoneMatch: Bool
    ) throws(CairnError) {
        let url = configuration.url(for: location, query: "uploadId=" + S3Location.percentEncoded(uploadID, keepingSlash: false))
        var xml = "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        for part in parts {
            xml += "<Part><PartNumber>\(part.number)</PartNumber><ETag>\(S3XMLDocument.escaped(part.etag))</ETag></Part>"
        }
        xml += "</CompleteMultipartUpload>"
        var headers = [(name: "Content-Type", value: "application/xml")]
        if ifNoneMatch { headers.append((name: "If-None-Match", value: "*")) }
        let request = HTTPRequest(url: url, method: .post, headers: headers, body: Array(xml.utf8))
        do {
            // S3 may answer 200 and report the failure in the body (an InternalError is retried).
            try retry.run(
                { () throws(CairnError) in
                    let answer = try call("CompleteMultipartUpload", request)
                    if let document = S3XMLDocument(answer.body), document.root.name == "Error" {
                        var error = HTTPClient.statusError(
                            status: 200, reason: "with an error", url: Self.display(url),
                            detail: S3RequestSigner.detail(of: document.root) ?? "no detail",
                            cause: S3RequestSigner.cause(of: document.root, status: 200))
                        error.message = "CompleteMultipartUpload: " + error.message
                        throw error
                    }
                },
                // `call` has retried everything else already (its status errors are 400 and up).
                isTransient: { $0.httpStatusCode == 200 && RetryPolicy.isTransient($0) })
        } catch {
            if error.httpStatusCode == 412 {
                throw CairnError(
                    .alreadyExists, "an object appeared at \(location) while the archive was uploaded; it was left as it is (use --force to replace it)",
                    path: Self.display(url))
            }
            throw error
        }
    }

    /// `AbortMultipartUpload` (`DELETE /KEY?uploadId=ID`): the store drops the parts. An upload
    /// already gone (404) counts as aborted.
    ///
    /// - Throws: `.httpStatus`, `.network`.
    package func abortMultipartUpload(_ location: S3Location, uploadID: String) throws(CairnError) {
        let url = configuration.url(for: location, query: "uploadId=" + S3Location.percentEncoded(uploadID, keepingSlash: false))
        do {
            _ = try call("AbortMultipartUpload", HTTPRequest(url: url, method: .delete))
        } catch {
            if error.httpStatusCode == 404 { return }
            throw error
        }
    }

    /// One call, retried when transient; the answer's body read into memory (at most `limit`).
    /// An error names the call and the URL (a 403's detail says what to check,
    /// ``S3RequestSigner``).
    private func call(_ operation: String, _ request: HTTPRequest, limit: Int = answerLimit) throws(CairnError)
        -> (head: HTTPResponseHead, body: [UInt8])
    {
        do {
            return try retry.run { () throws(CairnError) in try client.get(request, limit: limit) }
        } catch {
            var named = error
            named.path = Self.display(request.url)
            named.message = operation + ": " + error.message
            throw named
        }
    }

    /// A URL without its query, for errors.
    static func display(_ url: String) -> String {
        String(url.prefix { $0 != "?" })
    }

    /// An ETag with its double quotes (`ListParts` may list them without, or as `&quot;`).
    static func quoted(_ etag: String) -> String {
        let bare = etag.replacingOccurrences(of: "&quot;", with: "\"").trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        return "\"" + bare + "\""
    }

}
