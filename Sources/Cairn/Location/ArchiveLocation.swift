import Foundation
import Glibc

/// Where an archive is: a local file, an archive on an HTTP(S) server, or an object in an
/// S3-compatible store (`Spec/0003-command-line.md §1.1`, §1.2). Every entry point that reads,
/// writes, verifies, fetches or sends an archive takes one: ``Extractor/init(at:trustedKeys:decryption:)``,
/// ``Extractor/verifyArchive(at:trustedKeys:decryption:)``, ``Archiver/init(writingTo:configuration:)-(ArchiveLocation,_)``,
/// ``ArchiveFetcher/init(from:options:)``, ``ArchiveTransfer/send(archiveAt:from:expecting:to:)``.
///
/// ```swift
/// let local = ArchiveLocation.file(path: "/tmp/export.cairn")
/// let served = try ArchiveLocation(parsing: "https://example.com/export.cairn")
/// let stored = try ArchiveLocation(parsing: "s3://exports/app.cairn")  // credentials from AWS_*
/// ```
///
/// The one reading of a location written as text (``init(parsing:s3Endpoint:)``) or as a `URL`
/// (``init(_:)``) lives here, and so does every name derived from one (the partial file
/// `<path>.partial`, a fetch's state beside it, an upload's state file).
public enum ArchiveLocation: Sendable, CustomStringConvertible {
    /// A local file, by its file-system path (relative to the working directory unless it
    /// starts with `/`).
    case file(path: String)
    /// An archive on an HTTP(S) server: read with range requests (the footer and manifest,
    /// then only the records needed), or with one GET by the readers that read every byte.
    case http(url: URL)
    /// An object in an S3-compatible store, read with signed `GetObject` requests and written
    /// with a multipart upload; `configuration` is the store, region and credentials.
    case object(S3Location, configuration: S3Configuration)

    /// What a location is, known from its text alone (before any credentials are read).
    package enum Kind: Sendable, Equatable {
        case file, http, object
    }

    /// The one classification of a location written as text: `s3://` (any case) is an object,
    /// `http://` or `https://` (any case) a URL, anything else a path. The parser
    /// (``init(parsing:s3Endpoint:)``) and the `cairn` tool both ask this.
    package static func kind(of text: String) -> Kind {
        if S3Location.isLocation(text) { return .object }
        let lower = text.prefix(8).lowercased()
        if lower.hasPrefix("http://") || lower.hasPrefix("https://") { return .http }
        return .file
    }

    /// What this location is.
    package var kind: Kind {
        switch self {
        case .file: .file
        case .http: .http
        case .object: .object
        }
    }

    /// Reads a location written as text, as the `cairn` tool reads its operands: `s3://BUCKET/KEY`
    /// is an object whose store and credentials come from the environment (`AWS_ENDPOINT_URL`
    /// unless `s3Endpoint` is given, `AWS_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
    /// `AWS_SESSION_TOKEN`); `http://...` and `https://...` are URLs; anything else is a path.
    ///
    /// - Parameters:
    ///   - text: the location.
    ///   - s3Endpoint: the store's base URL for an `s3://` location; nil: `AWS_ENDPOINT_URL`,
    ///     else AWS's own.
    /// - Throws: `CairnError` `.invalidArgument` naming the text for a malformed `s3://` location
    ///   or URL, a bad endpoint, or missing credentials (naming the variable).
    public init(parsing text: String, s3Endpoint: String? = nil) throws(CairnError) {
        try self.init(parsing: text, s3Endpoint: s3Endpoint, environment: ProcessInfo.processInfo.environment)
    }

    /// ``init(parsing:s3Endpoint:)`` with the S3 settings read from `environment` (tests: a
    /// server of their own).
    package init(parsing text: String, s3Endpoint: String? = nil, environment: [String: String]) throws(CairnError) {
        switch Self.kind(of: text) {
        case .file:
            self = .file(path: text)
        case .http:
            self = .http(url: try Self.httpURL(text))
        case .object:
            let location = try S3Location(parsing: text)
            self = .object(location, configuration: try S3Configuration.fromEnvironment(endpoint: s3Endpoint, environment: environment))
        }
    }

    /// The URL of `http(s)` text, taken as typed: text with a space, a control character or
    /// another byte a URL may not hold is refused as the HTTP client refuses it (it sent such
    /// text to libcurl unchanged before there was a parser), and only non-ASCII characters (an
    /// internationalized path) are percent-encoded, which the server decodes back.
    private static func httpURL(_ text: String) throws(CairnError) -> URL {
        if let url = URL(string: text, encodingInvalidCharacters: false) { return url }
        guard text.unicodeScalars.contains(where: { !$0.isASCII }),
            !text.unicodeScalars.contains(where: { $0.isASCII && (Character($0).isWhitespace || $0.value < 0x20 || $0.value == 0x7F) }),
            let url = URL(string: text)
        else { throw CurlTransfer.malformedURLError(text) }
        return url
    }

    /// Reads a location given as a `URL`: a `file:` URL (or one without a scheme) is a path;
    /// `http:` and `https:` are URLs; `s3://BUCKET/KEY` is an object (its escapes decoded: the
    /// key is the raw one), with the store and credentials from the environment, as
    /// ``init(parsing:s3Endpoint:)``.
    ///
    /// - Throws: `CairnError` `.invalidArgument` naming the URL for another scheme; for `s3:`,
    ///   what ``init(parsing:s3Endpoint:)`` throws.
    public init(_ url: URL) throws(CairnError) {
        try self.init(url, environment: ProcessInfo.processInfo.environment)
    }

    /// ``init(_:)`` with the S3 settings read from `environment`.
    package init(_ url: URL, environment: [String: String]) throws(CairnError) {
        if let path = Self.filePath(of: url) {
            self = .file(path: path)
            return
        }
        switch url.scheme?.lowercased() {
        case "http", "https":
            self = .http(url: url)
        case "s3":
            guard let bucket = url.host(percentEncoded: false) else {
                throw CairnError(.invalidArgument, "not an s3://BUCKET/KEY location", path: url.absoluteString)
            }
            try self.init(parsing: "s3://" + bucket + url.path(percentEncoded: false), environment: environment)
        default:
            throw CairnError(.invalidArgument, "not a file:, http://, https:// or s3:// URL", path: url.absoluteString)
        }
    }

    /// The file-system path of a `file:` URL or a URL without a scheme; nil for other URLs.
    package static func filePath(of url: URL) -> String? {
        guard url.isFileURL || url.scheme == nil else { return nil }
        // A relative URL's path with its escapes decoded: `URL(string: "my file.cairn")` names
        // the file `my file.cairn`, not `my%20file.cairn`.
        return url.isFileURL ? url.path(percentEncoded: false) : url.relativePath
    }

    /// How errors and messages name it: the path, the URL, or `s3://BUCKET/KEY`.
    public var description: String { name }

    /// How errors and messages name it: the path, the URL, or `s3://BUCKET/KEY`.
    package var name: String {
        switch self {
        case .file(let path): path
        case .http(let url): url.absoluteString
        case .object(let location, _): location.description
        }
    }

    /// The path of a local file; `.invalidArgument` naming the location otherwise.
    ///
    /// - Parameter role: what the location is for, in the error (`"the destination"`).
    package func requireFile(for role: String) throws(CairnError) -> String {
        guard case .file(let path) = self else {
            throw CairnError(.invalidArgument, "\(role) must be a local file", path: name)
        }
        return path
    }
}

// MARK: - Names derived from a location

extension ArchiveLocation {
    /// The suffix of the file an archive is written to until it is complete.
    package static let partialSuffix = ".partial"

    /// Where the archive `path` is written until it is complete (by ``Archiver`` and a fetch):
    /// `<path>.partial`.
    package static func partialPath(of path: String) -> String { path + partialSuffix }

    /// ``partialPath(of:)-(String)`` of a raw path.
    package static func partialPath(of path: [UInt8]) -> [UInt8] { path + Array(partialSuffix.utf8) }

    /// The state an interrupted fetch into `path` keeps beside its partial file:
    /// `<path>.partial.fetch`.
    package static func fetchStatePath(of path: String) -> String { partialPath(of: path) + ".fetch" }

    /// Where a fetch into `path` sets an earlier partial file aside as a seed when the archive
    /// changed: `<path>.partial.seed`.
    package static func setAsidePath(of path: String) -> String { partialPath(of: path) + ".seed" }

    /// Where an upload to `location` at `endpoint` keeps its state by default: in
    /// `$XDG_STATE_HOME/cairn/uploads` (else `~/.local/state/cairn/uploads`), named by the first
    /// 16 hex digits of the SHA-256 of the endpoint, bucket and key, then the key's last
    /// component (at most 64 bytes of it) and `.partial.upload`: the same for a resume run from
    /// any directory, different for two keys with the same last component. The directory is
    /// created (mode 0700) when missing.
    ///
    /// - Throws: `.io` naming the directory when it cannot be created.
    package static func uploadStatePath(
        of location: S3Location, endpoint: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(CairnError) -> String {
        let base =
            environment["XDG_STATE_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? ((environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()) + "/.local/state")
        let directory = base + "/cairn/uploads"
        do {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw CairnError(
                .io, "cannot create the directory of upload states", path: directory, cause: "\(error)",
                underlyingCause: Errno(foundationError: error).map { .errno($0) })
        }
        let digest = (try? SHA256.hash(Array("\(endpoint)\n\(location.bucket)\n\(location.key)".utf8)))?.hexString ?? "0"
        let last = location.key.split(separator: "/").last.map(String.init) ?? "upload"
        let name = String(decoding: Array(last.utf8.prefix(64)), as: UTF8.self).replacingOccurrences(of: "\u{FFFD}", with: "")
        return directory + "/" + String(digest.prefix(16)) + "-" + partialPath(of: name) + ".upload"
    }
}

// MARK: - Opening

extension ArchiveLocation {
    /// The remote archive behind an `http` or `object` location (nil for a file), its requests
    /// sent by a client with `http`'s timeouts.
    package func remote(http: HTTPClient.Configuration = .init()) -> RemoteArchive? {
        switch self {
        case .file: nil
        case .http(let url): RemoteArchive(url: url.absoluteString, client: HTTPClient(configuration: http))
        case .object(let location, let configuration):
            RemoteArchive(location: location, store: S3Client(configuration: configuration, http: http))
        }
    }

    /// Opens it for random access: a local file with `open(2)`, a remote archive with one suffix
    /// range request for its footer (on a thread of its own, never the cooperative pool's),
    /// later reads keeping up to `options.connections` requests in flight (§13.9).
    ///
    /// - Throws: as `LocalArchiveSource.init(path:)` or `HTTPArchiveSource`'s opening, naming
    ///   the location.
    package func openRandomAccess(remote options: RemoteReadOptions = RemoteReadOptions()) async throws(CairnError) -> any ArchiveSource {
        do throws(CairnError) {
            guard let remote = remote(http: options.http) else { return try LocalArchiveSource(path: name) }
            let connections = options.connections
            return try await DedicatedThread.run { () throws(CairnError) in try remote.openRandomAccess(connections: connections) }
        } catch {
            throw error.withPath(name)
        }
    }

    /// Its bytes front to back, read once: a local file's descriptor, or a remote archive's body
    /// from one GET (no range support needed, `options`' timeouts), whose head is awaited on a
    /// thread of its own.
    ///
    /// - Throws: `.notFound`, `.io` for a file; `.httpStatus`, `.network` naming the URL.
    package func openSequential(remote options: RemoteReadOptions = RemoteReadOptions()) async throws(CairnError) -> SequentialArchiveBytes {
        guard let remote = remote(http: options.http) else {
            let input = try FileDescriptor.open(name, flags: O_RDONLY)
            return SequentialArchiveBytes(
                descriptor: input, finish: { () throws(CairnError) in try input.close() }, cancel: { _ = try? input.close() })
        }
        return try await DedicatedThread.run { () throws(CairnError) in try remote.openSequential() }
    }

    /// A new sink writing the archive here: a ``FileSink`` (`<path>.partial` until complete), or
    /// an ``ObjectStoreSink`` (a multipart upload, its state in
    /// ``uploadStatePath(of:endpoint:environment:)``; its first requests sent on a thread of
    /// their own). Neither replaces what exists.
    ///
    /// - Parameter sizeEstimate: the archive's expected size in bytes (an upload's part size).
    /// - Throws: `.invalidArgument` naming an `http` location (a URL is read, not written); what
    ///   the sink's initializer throws.
    package func openSink(sizeEstimate: UInt64? = nil) async throws(CairnError) -> any ArchiveSink {
        switch self {
        case .file(let path):
            return try FileSink(path: path)
        case .http:
            throw CairnError(
                .invalidArgument, "an archive is written to a file or an s3:// object, not to an http(s) URL", path: name)
        case .object(let location, let configuration):
            let statePath = try Self.uploadStatePath(of: location, endpoint: configuration.endpoint)
            return try await DedicatedThread.run { () throws(CairnError) in
                try ObjectStoreSink(location: location, configuration: configuration, statePath: statePath, sizeEstimate: sizeEstimate)
            }
        }
    }
}
