import Foundation

/// The `URL` forms of the extractor's entry points: what is read is labelled `at:`, and a
/// location is a `file:` URL or a remote archive (`http://`, `https://`, `s3://BUCKET/KEY`).
extension Extractor {
    /// Opens the archive at `location` and reads its manifest.
    ///
    /// - A `file:` URL (or a URL without a scheme) opens the local file, as ``init(path:)``.
    /// - An `http:` or `https:` URL reads the footer and manifest with range requests; extraction
    ///   then fetches only the records it needs (`Spec/0001-container-format.md §13.7`).
    /// - An `s3://BUCKET/KEY` URL does the same with signed `GetObject` range requests, the
    ///   store and credentials taken from the environment (`AWS_ENDPOINT_URL`,
    ///   `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`; see
    ///   `S3Configuration.fromEnvironment()`). Pass credentials explicitly with
    ///   ``init(object:configuration:)``.
    ///
    /// - Parameter location: the archive.
    /// - Throws: `CairnError` naming the archive: `.notFound`, `.io`, `.corrupted`,
    ///   `.checksumMismatch`, `.unsupportedVersion`, or `.truncated` for an incomplete archive (no
    ///   valid footer); for a remote archive also `.network`, `.httpStatus`, `.sourceChanged`,
    ///   and `.invalidArgument` for a server without range support, missing S3 credentials or
    ///   another URL scheme.
    public convenience init(at location: URL) throws(CairnError) {
        try self.init(at: location, environment: ProcessInfo.processInfo.environment)
    }

    /// ``init(at:)`` with the S3 settings of an `s3://` URL read from `environment` instead of
    /// the process's (tests: a server of their own).
    ///
    /// - Throws: as ``init(at:)``.
    package convenience init(at location: URL, environment: [String: String]) throws(CairnError) {
        let resolved = try ArchiveLocation(location, environment: environment)
        switch resolved {
        case .file(let path): try self.init(path: path)
        case .remote: try self.init(source: resolved.openRandomAccess())
        }
    }

    /// Opens the archive at `location` (as ``init(at:)``), runs `body` with it, and closes it,
    /// also when `body` throws.
    ///
    /// - Returns: what `body` returns.
    /// - Throws: what ``init(at:)`` throws, or what `body` throws, unchanged.
    nonisolated(nonsending) public static func withExtractor<R>(at location: URL, _ body: (Extractor) async throws -> R)
        async throws -> R
    {
        let extractor = try Extractor(at: location)
        defer { extractor.close() }
        return try await body(extractor)
    }

    /// Verifies as much of a possibly incomplete local archive as is valid, as
    /// ``verifyPrefix(atPath:)``.
    ///
    /// - Parameter location: a `file:` URL.
    /// - Returns: the verified length (bytes) and the resume token naming it.
    /// - Throws: `CairnError` naming the archive: `.invalidArgument` for a URL that is not a
    ///   `file:` URL; `.notFound`; `.corrupted` / `.unsupportedVersion` when not even the
    ///   prelude and header are valid; `.io`; or `CancellationError`.
    nonisolated(nonsending) public static func verifyPrefix(at location: URL) async throws -> PrefixVerification {
        try await verifyPrefix(atPath: ArchiveLocation.requireFilePath(location, for: "the archive"))
    }
}

extension Extractor {
    /// Opens the archive at `url`: a `file:` URL as ``init(path:)``, an `http:` or `https:` URL
    /// through range requests (footer and manifest by range requests; extraction then
    /// fetches only the records it needs, `Spec/0001-container-format.md §13.7`).
    ///
    /// - Throws: as ``init(path:)``, plus `.network`, `.httpStatus`, `.sourceChanged` naming the URL,
    ///   and `.invalidArgument` for a server without range support.
    public convenience init(url: URL) throws(CairnError) {
        if url.isFileURL {
            try self.init(path: url.path)
        } else {
            try self.init(source: HTTPArchiveSource(url: url.absoluteString))
        }
    }

    /// Verifies the archive at `url` front to back without opening its manifest first: a
    /// `file:` URL as ``verifyArchive(atPath:)``, an `http:`, `https:` or `s3:` URL (resolved as
    /// ``init(at:)`` resolves it) read with one GET (no range support needed), every byte
    /// through the same checker.
    ///
    /// - Returns: what was verified.
    /// - Throws: `CairnError` naming the archive: the first problem found, naming its offset;
    ///   `.network`, `.httpStatus` naming the URL; `.invalidArgument` for another scheme; or
    ///   `CancellationError`.
    nonisolated(nonsending) public static func verifyArchive(at url: URL) async throws -> VerificationReport {
        switch try ArchiveLocation(url) {
        case .file(let path): return try await verifyArchive(atPath: path)
        case .remote(let remote): return try await verify(remote.openSequential(), path: remote.name)
        }
    }
}

extension Extractor {
    /// Opens the archive stored as `location` in an object store, through ranged `GetObject`
    /// requests signed with AWS Signature Version 4: the footer and manifest first, then only
    /// the records extraction needs (`Spec/0001-container-format.md §13.7`).
    ///
    /// - Throws: `.httpStatus` (403 for bad credentials, 404 for a missing bucket or object) and
    ///   `.network` naming the endpoint's URL; what ``init(path:)`` throws for a bad archive.
    public convenience init(object location: S3Location, configuration: S3Configuration) throws(CairnError) {
        try self.init(source: RemoteArchive(location: location, store: S3Client(configuration: configuration)).openRandomAccess())
    }

    /// Verifies the archive stored as `location` front to back with one `GetObject`.
    ///
    /// - Returns: what was verified.
    /// - Throws: the first problem found, naming its offset; `.network`, `.httpStatus` naming the endpoint's URL.
    nonisolated(nonsending) public static func verifyArchive(object location: S3Location, configuration: S3Configuration) async throws
        -> VerificationReport
    {
        let remote = RemoteArchive(location: location, store: S3Client(configuration: configuration))
        return try await verify(remote.openSequential(), path: location.description)
    }
}
