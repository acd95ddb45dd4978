import Foundation
import Glibc

/// The archiver's entry points by location (what is written is labelled `writingTo:`), and the
/// size estimate of a set of sources.
extension Archiver {
    /// Creates an archiver writing the archive to `location`: a local file through ``FileSink``
    /// (bytes go to `<path>.partial`, and the archive appears at `path` only when ``finish()``
    /// succeeds), or an object through ``ObjectStoreSink`` (a multipart upload, no object at the
    /// key until ``finish()``; its state file in `$XDG_STATE_HOME/cairn/uploads`). Neither
    /// replaces what exists: pass `FileSink(writingTo:overwrite: true)` (or an
    /// ``ObjectStoreSink`` made with `overwrite`) to ``init(sink:configuration:)`` for that.
    ///
    /// Opening an object sends its first requests (`HeadObject`, `CreateMultipartUpload`) on a
    /// thread of its own, never on the caller's.
    ///
    /// - Parameters:
    ///   - location: a file or an object; an `http` URL is refused.
    ///   - configuration: chunking, compression, header fields, backpressure, exclusions.
    /// - Throws: `CairnError` naming the archive: `.invalidArgument` for an `http` location or a
    ///   bad configuration; `.alreadyExists` when the file or object exists; `.busy` when another
    ///   process is writing `<path>.partial`; `.io`; `.httpStatus`, `.network` for an object
    ///   store; `.limitExceeded` for a bad configuration.
    public convenience init(writingTo location: ArchiveLocation, configuration: Configuration = Configuration()) async throws(CairnError) {
        let sink = try await location.openSink(sizeEstimate: configuration.sizeEstimate)
        do throws(CairnError) {
            try self.init(sink: sink, configuration: configuration)
        } catch {
            await sink.abandon()
            throw error.withPath(location.name)
        }
    }

    /// ``init(writingTo:configuration:)-(ArchiveLocation,_)`` of the location a `URL` names
    /// (``ArchiveLocation/init(_:)``): a `file:` URL or an `s3://` one.
    ///
    /// - Throws: as ``init(writingTo:configuration:)-(ArchiveLocation,_)``, and as
    ///   ``ArchiveLocation/init(_:)`` for the URL.
    public convenience init(writingTo location: URL, configuration: Configuration = Configuration()) async throws(CairnError) {
        try await self.init(writingTo: ArchiveLocation(location), configuration: configuration)
    }

    /// Runs `body` with a new archiver writing to `location` (as
    /// ``init(writingTo:configuration:)-(ArchiveLocation,_)``), then finishes it.
    ///
    /// If `body` throws or the task is cancelled, the archive is abandoned (a file is left as
    /// `<path>.partial`, an upload as its state file: both resumable) and the error is rethrown.
    ///
    /// - Returns: the export properties.
    /// - Throws: what ``init(writingTo:configuration:)-(ArchiveLocation,_)`` and ``finish()``
    ///   throw, `CancellationError`, or what `body` throws, unchanged.
    nonisolated(nonsending) public static func withArchiver(
        writingTo location: ArchiveLocation, configuration: Configuration = Configuration(), _ body: (Archiver) async throws -> Void
    ) async throws -> ExportProperties {
        try await running(Archiver(writingTo: location, configuration: configuration), body)
    }

    /// The bytes of the regular files at and below `sources`: what appending them would read,
    /// before deduplication and compression. A quick scan (`lstat(2)` and `readdir(3)` only,
    /// no file is opened), for a progress total, ``Configuration/sizeEstimate`` or a free-space
    /// check.
    ///
    /// Symlinks are never followed (a link counts 0 bytes; a link to a directory is not
    /// entered), and items are left out as ``appendItem(at:)`` leaves them out: each source is
    /// stored under its last path component, and `exclusions` (as
    /// ``Configuration/exclusions``, `fnmatch(3)` patterns) are matched against the path in
    /// the archive. A directory below a source that cannot be read counts 0 bytes (appending
    /// it would give a warning, not an error). Hard links count once per name.
    ///
    /// - Parameters:
    ///   - sources: `file:` URLs of files, directories or symlinks.
    ///   - exclusions: glob patterns, as ``Configuration/exclusions``.
    /// - Returns: the total in bytes.
    /// - Throws: `CairnError` naming the source: `.invalidArgument` for a URL that is not a
    ///   `file:` URL; `.notFound` when a source does not exist; `.io` when it cannot be
    ///   examined.
    /// - Complexity: O(n) in the number of items below the sources.
    public static func sizeEstimate(of sources: [URL], excluding exclusions: [String] = []) throws(CairnError) -> UInt64 {
        var paths: [[UInt8]] = []
        for source in sources {
            guard ArchiveLocation.filePath(of: source) != nil else {
                throw CairnError(.invalidArgument, "a source must be a file: URL", path: source.absoluteString)
            }
            paths.append(PathBytes.fileSystemPath(source))
        }
        return try sizeEstimate(ofPaths: paths, excluding: ExclusionPatterns(exclusions))
    }

    /// ``sizeEstimate(of:excluding:)`` of raw file-system paths (the CLI's operands), each
    /// stored as ``appendItem(atPath:)`` stores it: under its last component, or at the top
    /// level when that is `.`, `..` or `/`.
    ///
    /// - Throws: as ``sizeEstimate(of:excluding:)``.
    package static func sizeEstimate(ofPaths paths: [[UInt8]], excluding exclusions: ExclusionPatterns) throws(CairnError)
        -> UInt64
    {
        var total: UInt64 = 0
        for path in paths {
            let top = PathBytes.lastComponent(path)
            let prefix = top.isEmpty || top == [0x2E] || top == [0x2E, 0x2E] || top == [0x2F] ? [] : top
            if !prefix.isEmpty, exclusions.excludes(prefix) { continue }
            let status = try FileStatus.of(path)
            switch status.kind {
            case .regular:
                total &+= status.size
            case .directory:
                guard let directory = try? FileDescriptor.open(path, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW) else { continue }
                total &+= sizeBelow(directory, prefix: prefix, excluding: exclusions)
                _ = try? directory.close()
            default:
                continue
            }
        }
        return total
    }

    /// The bytes of the regular files below the open `directory`, whose path in the archive is
    /// `prefix`; unreadable directories count 0.
    private static func sizeBelow(_ directory: FileDescriptor, prefix: [UInt8], excluding exclusions: ExclusionPatterns) -> UInt64 {
        guard let names = try? DirectoryReader.names(in: directory) else { return 0 }
        var total: UInt64 = 0
        for name in names {
            let inArchive = PathBytes.join(prefix, name)
            if exclusions.excludes(inArchive) { continue }
            guard let status = try? FileStatus.of(name, relativeTo: directory) else { continue }
            switch status.kind {
            case .regular:
                total &+= status.size
            case .directory:
                guard let child = try? FileDescriptor.open(name, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW, relativeTo: directory) else {
                    continue
                }
                total &+= sizeBelow(child, prefix: inArchive, excluding: exclusions)
                _ = try? child.close()
            default:
                continue
            }
        }
        return total
    }
}
