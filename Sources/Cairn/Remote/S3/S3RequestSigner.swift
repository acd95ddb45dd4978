import Foundation

/// Signs an ``HTTPClient``'s requests to an S3-compatible store with AWS Signature Version 4
/// (``SigV4Signer``) and reads the `<Error><Code>` and `<Message>` of its error answers.
///
/// A request with a body is signed over the body's SHA-256 (`x-amz-content-sha256`), so the
/// store rejects a part damaged on the way; one without is signed over the empty body's.
struct S3RequestSigner: HTTPRequestSigner {
    let signer: SigV4Signer
    let region: String

    init(configuration: S3Configuration) {
        signer = SigV4Signer(credentials: configuration.credentials, region: configuration.region, service: "s3")
        region = configuration.region
    }

    func signingHeaders(for request: HTTPRequest) throws(CairnError) -> [(name: String, value: String)] {
        let hash = request.bodySHA256 ?? SigV4Signer.payloadHash(request.body ?? [])
        return try signer.signedHeaders(
            method: request.method.rawValue, url: request.url, headers: request.headers, payloadHash: hash, date: Date())
    }

    /// The store's `Code: Message`, and for a 403 (also a HEAD's, which has no body) what to
    /// check: every reader and writer of an object gets the same words.
    func errorDetail(status: Int, body: [UInt8]) -> String? {
        let detail = S3XMLDocument(body).flatMap { $0.root.name == "Error" ? Self.detail(of: $0.root) : nil }
        guard status == 403 else { return detail }
        let hint = "the store refused the credentials: check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and the region \(region)"
        return detail.map { $0 + "; " + hint } ?? hint
    }

    /// ``CairnError/Cause/s3(code:httpStatus:)`` with the `<Code>` of an `<Error>` body, or nil.
    func errorCause(status: Int, body: [UInt8]) -> CairnError.Cause? {
        S3XMLDocument(body).flatMap { $0.root.name == "Error" ? Self.cause(of: $0.root, status: status) : nil }
    }

    /// ``CairnError/Cause/s3(code:httpStatus:)`` with the `<Code>` of an `<Error>` element, or
    /// nil when it has none.
    static func cause(of error: S3XMLDocument.Element, status: Int) -> CairnError.Cause? {
        guard let code = error.text(of: "Code"), !code.isEmpty else { return nil }
        return .s3(code: code, httpStatus: status)
    }

    /// "Code: Message" of an `<Error>` element (either part alone when the other is missing).
    static func detail(of error: S3XMLDocument.Element) -> String? {
        let code = error.text(of: "Code").flatMap { $0.isEmpty ? nil : $0 }
        let message = error.text(of: "Message").flatMap { $0.isEmpty ? nil : String($0.prefix(300)) }
        switch (code, message) {
        case (let code?, let message?): return "\(code): \(message)"
        case (let code?, nil): return code
        case (nil, let message?): return message
        case (nil, nil): return nil
        }
    }
}
