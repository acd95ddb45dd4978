import Foundation

/// Where an S3-compatible store is and how to sign for it: the endpoint, the region, the
/// credentials and the addressing style (`Spec/0003-command-line.md §1.2`).
///
/// Credentials are only ever used to sign requests (AWS Signature Version 4); they are never
/// printed, logged or put in an error message.
public struct S3Configuration: Sendable {
    /// How a bucket is named in a request's URL.
    public enum Addressing: String, Sendable {
        /// `ENDPOINT/BUCKET/KEY`: the style of MinIO, Ceph RGW and `rclone serve s3`.
        case path
        /// `BUCKET.HOST/KEY`: the style of AWS S3 (and R2).
        case virtualHosted = "virtual"
    }

    /// The store's base URL, `http://HOST[:PORT]` or `https://...`, without a path.
    public var endpoint: String
    /// The region requests are signed for (`us-east-1` when unset).
    public var region: String
    /// The access key id, secret and optional session token.
    public var credentials: S3Credentials
    /// Path-style or virtual-hosted addressing.
    public var addressing: Addressing

    /// A configuration given in full.
    ///
    /// - Throws: `CairnError` `.invalidArgument` naming `endpoint` when it is not an `http://`
    ///   or `https://` URL with a host and no path, query or user info.
    public init(endpoint: String, region: String = "us-east-1", credentials: S3Credentials, addressing: Addressing = .path)
        throws(CairnError)
    {
        var trimmed = endpoint
        while trimmed.hasSuffix("/") { trimmed.removeLast() }
        guard let url = URLComponents(string: trimmed), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host, !host.isEmpty, url.path.isEmpty, url.query == nil, url.user == nil, url.password == nil
        else {
            throw CairnError(
                .invalidArgument, "the S3 endpoint must be an http:// or https:// URL with a host and no path", path: endpoint)
        }
        self.endpoint = trimmed
        self.region = region.isEmpty ? "us-east-1" : region
        self.credentials = credentials
        self.addressing = addressing
    }

    /// The configuration the environment gives, as the AWS tools read it: `AWS_ENDPOINT_URL`
    /// (unless `endpoint` is given), `AWS_REGION` (else `AWS_DEFAULT_REGION`, else `us-east-1`),
    /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN`. Without an endpoint
    /// it is AWS's own, `https://s3.REGION.amazonaws.com`, with virtual-hosted addressing;
    /// another endpoint gets path-style addressing unless `addressing` says otherwise.
    ///
    /// - Throws: `CairnError` `.invalidArgument` naming the missing variable or the bad endpoint.
    public static func fromEnvironment(
        endpoint: String? = nil, addressing: Addressing? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(CairnError) -> S3Configuration {
        let credentials = try S3Credentials.fromEnvironment(environment)
        let (url, given) = Self.endpoint(given: endpoint, environment: environment)
        return try S3Configuration(
            endpoint: url, region: region(environment), credentials: credentials,
            addressing: addressing ?? (given ? .path : .virtualHosted))
    }

    /// The region the environment gives: `AWS_REGION`, else `AWS_DEFAULT_REGION`, else `us-east-1`.
    static func region(_ environment: [String: String]) -> String {
        [environment["AWS_REGION"], environment["AWS_DEFAULT_REGION"]].compactMap { $0 }.first { !$0.isEmpty } ?? "us-east-1"
    }

    /// The endpoint `fromEnvironment` uses, without reading credentials: `given`, else
    /// `AWS_ENDPOINT_URL`, else `https://s3.REGION.amazonaws.com`; and whether it was given.
    package static func endpoint(given: String?, environment: [String: String] = ProcessInfo.processInfo.environment)
        -> (url: String, given: Bool)
    {
        if let chosen = given ?? environment["AWS_ENDPOINT_URL"].flatMap({ $0.isEmpty ? nil : $0 }) {
            var trimmed = chosen
            while trimmed.hasSuffix("/") { trimmed.removeLast() }
            return (trimmed, true)
        }
        return ("https://s3.\(region(environment)).amazonaws.com", false)
    }

    /// The URL of `location` (or of its bucket when `bucketOnly`), with `query` (already
    /// encoded, without `?`) appended.
    func url(for location: S3Location, query: String? = nil, bucketOnly: Bool = false) -> String {
        let path = bucketOnly ? "/" : "/" + location.encodedKey
        var base: String
        switch addressing {
        case .path:
            base = endpoint + "/" + location.bucket + (bucketOnly ? "" : path)
        case .virtualHosted:
            let schemeEnd = endpoint.range(of: "://")?.upperBound ?? endpoint.startIndex
            base = String(endpoint[..<schemeEnd]) + location.bucket + "." + String(endpoint[schemeEnd...]) + path
        }
        if let query { base += "?" + query }
        return base
    }
}
