import Foundation

/// A remote archive operand, resolved: an `http://` or `https://` URL read as it is, or an
/// `s3://BUCKET/KEY` object read through its store's endpoint with signed requests
/// (`Spec/0003-command-line.md §1.1`, §1.2). Every reader of a remote archive (the seekable
/// reader, the front-to-back readers, `fetch`) opens it through here, so an object is read
/// exactly as a URL is.
package struct RemoteArchive: Sendable {
    /// The operand as given (`s3://...` or the URL).
    package let name: String
    /// The URL requests go to.
    package let url: String
    /// The client every request goes through (signing for an object store).
    package let client: HTTPClient
    /// Whether range requests may be answered with the whole object (object stores).
    package let acceptsWholeObject: Bool

    /// Whether `text` names a remote archive: `http://`, `https://` or `s3://` (any case).
    package static func isRemote(_ text: String) -> Bool {
        HTTPArchiveSource.isURL(text) || S3Location.isLocation(text)
    }

    /// Resolves `text`.
    ///
    /// - Parameters:
    ///   - s3Endpoint: the store's endpoint for an `s3://` operand (`--s3-endpoint`); else
    ///     `AWS_ENDPOINT_URL`, else AWS's own.
    ///   - http: timeouts of the client.
    /// - Throws: `.invalidArgument` for a malformed `s3://` location, a bad endpoint or missing
    ///   credentials (naming the variable).
    package init(
        _ text: String, s3Endpoint: String? = nil, http: HTTPClient.Configuration = .init(),
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(CairnError) {
        name = text
        if S3Location.isLocation(text) {
            let location = try S3Location(parsing: text)
            let configuration = try S3Configuration.fromEnvironment(endpoint: s3Endpoint, environment: environment)
            let store = S3Client(configuration: configuration, http: http)
            url = store.objectURL(location)
            client = store.client
            acceptsWholeObject = true
        } else {
            url = text
            client = HTTPClient(configuration: http)
            acceptsWholeObject = false
        }
    }

    /// An object of `store`.
    package init(location: S3Location, store: S3Client) {
        name = location.description
        url = store.objectURL(location)
        client = store.client
        acceptsWholeObject = true
    }

    /// Opens it for random access (``HTTPArchiveSource``).
    ///
    /// - Throws: as ``HTTPArchiveSource/init(url:client:retry:acceptingWholeObject:)``.
    package func openRandomAccess() throws(CairnError) -> HTTPArchiveSource {
        try HTTPArchiveSource(url: url, client: client, acceptingWholeObject: acceptsWholeObject)
    }

    /// Its bytes front to back with one GET (no ranges needed).
    ///
    /// - Throws: as ``HTTPArchiveSource/openSequential(url:client:expectingValidator:size:)``.
    package func openSequential() throws(CairnError) -> SequentialArchiveBytes {
        try HTTPArchiveSource.openSequential(url: url, client: client)
    }
}
