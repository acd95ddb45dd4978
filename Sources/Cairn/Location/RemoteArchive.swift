import Foundation

/// The remote archive behind an ``ArchiveLocation``'s `http` or `object` case: an `http://` or
/// `https://` URL read as it is, or an `s3://BUCKET/KEY` object read through its store's
/// endpoint with signed requests (`Spec/0003-command-line.md §1.1`, §1.2). Every reader of a
/// remote archive (the seekable reader, the front-to-back readers, `fetch`) opens it through
/// here, so an object is read exactly as a URL is.
package struct RemoteArchive: Sendable {
    /// How errors name it (`s3://...` or the URL).
    package let name: String
    /// The URL requests go to.
    package let url: String
    /// The client every request goes through (signing for an object store).
    package let client: HTTPClient
    /// Whether range requests may be answered with the whole object (object stores).
    package let acceptsWholeObject: Bool

    /// An archive at an `http(s)` URL, read through `client`.
    package init(url: String, client: HTTPClient) {
        name = url
        self.url = url
        self.client = client
        acceptsWholeObject = false
    }

    /// An object of `store`.
    package init(location: S3Location, store: S3Client) {
        name = location.description
        url = store.objectURL(location)
        client = store.client
        acceptsWholeObject = true
    }

    /// Opens it for random access (``HTTPArchiveSource``), blocking.
    ///
    /// - Parameter connections: range requests the source keeps in flight at once
    ///   (`Spec/0001-container-format.md §13.9`).
    /// - Throws: as ``HTTPArchiveSource/init(url:client:retry:acceptingWholeObject:tailSlack:connections:)``.
    package func openRandomAccess(connections: Int = RemoteReadOptions.defaultConnections) throws(CairnError) -> HTTPArchiveSource {
        try HTTPArchiveSource(url: url, client: client, acceptingWholeObject: acceptsWholeObject, connections: connections)
    }

    /// Its bytes front to back with one GET (no ranges needed), blocking until the answer's head.
    ///
    /// - Throws: as ``HTTPArchiveSource/openSequential(url:client:expectingValidator:size:)``.
    package func openSequential() throws(CairnError) -> SequentialArchiveBytes {
        try HTTPArchiveSource.openSequential(url: url, client: client)
    }
}
