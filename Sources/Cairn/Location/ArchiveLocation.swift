import Foundation

/// An archive's location given as a `URL`, resolved once for every URL-taking entry point
/// (``Extractor/init(at:)``, ``Extractor/verifyArchive(at:)``, ``ArchiveTransfer``): a local
/// file, or a remote archive read through ``RemoteArchive`` (`http://`, `https://`, or
/// `s3://BUCKET/KEY` with `S3Configuration.fromEnvironment()`).
package enum ArchiveLocation {
    /// A local file, by its path.
    case file(String)
    /// A remote archive.
    case remote(RemoteArchive)

    /// Resolves `url`: a `file:` URL (or a URL without a scheme) is a local path; `http:`,
    /// `https:` and `s3:` are remote.
    ///
    /// - Throws: `.invalidArgument` naming the URL for another scheme; for `s3:`, what
    ///   ``RemoteArchive/init(_:s3Endpoint:http:environment:)`` throws (a malformed location,
    ///   missing credentials naming the variable).
    package init(_ url: URL, environment: [String: String] = ProcessInfo.processInfo.environment) throws(CairnError) {
        if let path = ArchiveLocation.filePath(url) {
            self = .file(path)
            return
        }
        var text = url.absoluteString
        if url.scheme?.lowercased() == "s3", let bucket = url.host(percentEncoded: false) {
            // A key is raw bytes, as `s3://BUCKET/KEY` on the command line: decode the URL's escapes.
            text = "s3://" + bucket + url.path(percentEncoded: false)
        }
        guard RemoteArchive.isRemote(text) else {
            throw CairnError(.invalidArgument, "not a file:, http://, https:// or s3:// URL", path: text)
        }
        self = .remote(try RemoteArchive(text, environment: environment))
    }

    /// The file-system path of a `file:` URL or a URL without a scheme; nil for other URLs.
    package static func filePath(_ url: URL) -> String? {
        guard url.isFileURL || url.scheme == nil else { return nil }
        return url.isFileURL ? url.path(percentEncoded: false) : url.relativeString
    }

    /// The file-system path of `url`, which must be a local file.
    ///
    /// - Parameter role: what the URL is for, in the error (`"the archive"`).
    /// - Throws: `.invalidArgument` naming the URL when it is not a `file:` URL.
    package static func requireFilePath(_ url: URL, for role: String) throws(CairnError) -> String {
        guard let path = filePath(url) else {
            throw CairnError(.invalidArgument, "\(role) must be a file: URL", path: url.absoluteString)
        }
        return path
    }

    /// How errors name it: the path, or the remote operand as given.
    package var name: String {
        switch self {
        case .file(let path): path
        case .remote(let remote): remote.name
        }
    }

    /// Opens it for random access.
    ///
    /// - Throws: as ``LocalArchiveSource/init(path:)`` or
    ///   ``RemoteArchive/openRandomAccess()``, naming the location.
    package func openRandomAccess() throws(CairnError) -> any ArchiveSource {
        do throws(CairnError) {
            switch self {
            case .file(let path): return try LocalArchiveSource(path: path)
            case .remote(let remote): return try remote.openRandomAccess()
            }
        } catch {
            throw error.withPath(name)
        }
    }
}
