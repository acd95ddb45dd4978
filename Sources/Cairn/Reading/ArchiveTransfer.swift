import Foundation
import Glibc

/// The sender's half of resuming a transfer (`Spec/0003-command-line.md`, `cat`): an archive's
/// bytes from an offset to its end, sent only when the receiver's prefix is a prefix of it.
///
/// ```swift
/// let sink = try FileSink(writingTo: .file(path: "/tmp/copy.cairn"))
/// try await ArchiveTransfer.send(archiveAt: ArchiveLocation(parsing: "s3://exports/app.cairn"), to: sink)
/// ```
public enum ArchiveTransfer {
    /// Bytes read per request from a remote source (each range checked against the validator).
    static let remoteBlockBytes = 8 << 20
    /// Bytes read per `pread(2)` from a local file.
    static let localBlockBytes = 1 << 20

    /// Sends the archive at `location`'s bytes from `offset` to its end into `sink`, then calls
    /// the sink's `finish()`; on any error or cancellation the sink's `abandon()` instead.
    ///
    /// The blocking reads (a `pread(2)` of 1 MiB from a local file, or an 8 MiB range request
    /// for a remote one) run on a thread of their own, never on the cooperative pool; `sink`'s
    /// `write` is awaited before the next block is read, so a slow sink slows the reads instead
    /// of growing memory (one block is in flight at a time). Cancellation is checked before
    /// every block.
    ///
    /// - Parameters:
    ///   - location: the archive: a local file, an `http(s)` URL or an object (opened on a
    ///     thread of its own).
    ///   - offset: the first byte to send. Default 0 (the whole archive).
    ///   - token: when given, the receiver's ``ResumeToken``; the bytes are sent only if the
    ///     record ending at `offset` in the archive is a commit (or the footer) with the token's
    ///     chain digest, i.e. the receiver's prefix is a prefix of this archive.
    ///   - sink: where the bytes go, in order (``FileSink``, ``StandardOutputSink``, your own).
    /// - Throws: `CairnError` naming the archive: `.tokenMismatch`; `.invalidArgument` for an
    ///   offset past the end; `.notFound`, `.io`; `.network`,
    ///   `.httpStatus`, `.sourceChanged` for a remote archive; `.io` wrapping what `sink`
    ///   throws (as ``ArchiveSink`` says); or `CancellationError`, unwrapped.
    nonisolated(nonsending) public static func send(
        archiveAt location: ArchiveLocation, from offset: UInt64 = 0, expecting token: ResumeToken? = nil, to sink: any ArchiveSink
    ) async throws {
        try await send(archiveAt: location, from: offset, expecting: token, remote: RemoteReadOptions(), to: sink)
    }

    /// ``send(archiveAt:from:expecting:to:)`` reading a remote archive with `remote`'s
    /// connections and timeouts: each 8 MiB block is fetched in up to
    /// ``RemoteReadOptions/connections`` range requests at once (`Spec/0001-container-format.md
    /// §13.9`).
    ///
    /// - Throws: as ``send(archiveAt:from:expecting:to:)``.
    nonisolated(nonsending) public static func send(
        archiveAt location: ArchiveLocation, from offset: UInt64 = 0, expecting token: ResumeToken? = nil, remote: RemoteReadOptions,
        to sink: any ArchiveSink
    ) async throws {
        let source: any ArchiveSource
        do {
            source = try await location.openRandomAccess(remote: remote)
        } catch {
            await sink.abandon()
            throw error
        }
        defer { source.close() }
        try await send(source, from: offset, expecting: token, to: sink)
    }

    /// Sends the bytes `source` serves from `offset` to its end into `sink`, as
    /// ``send(archiveAt:from:expecting:to:)``; `source` stays open.
    ///
    /// - Throws: as ``send(archiveAt:from:expecting:to:)``.
    nonisolated(nonsending) package static func send(
        _ source: any ArchiveSource, from offset: UInt64, expecting token: ResumeToken?, to sink: any ArchiveSink
    ) async throws {
        let name = source.name
        do {
            let size = source.size
            guard offset <= size else {
                throw CairnError(.invalidArgument, "offset is past the end of the archive (\(size) bytes)", path: name, offset: offset)
            }
            try Task.checkCancellation()
            if let token {
                try await DedicatedThread.run { () throws(CairnError) in try token.check(against: source) }
            }
            let blockBytes = source.isRemote ? remoteBlockBytes : localBlockBytes
            var position = offset
            while position < size {
                try Task.checkCancellation()
                let start = position
                let count = Int(min(UInt64(blockBytes), size - start))
                let block = try await DedicatedThread.run { () throws(CairnError) in
                    try readBlock(source, at: start, count: count)
                }
                if block.isEmpty { break }
                do {
                    try await sink.write(block)
                } catch {
                    throw CairnError.sinkFailure(wrapping: error)
                }
                position += UInt64(block.count)
            }
            try Task.checkCancellation()
            do {
                try await sink.finish()
            } catch {
                throw CairnError.sinkFailure(wrapping: error)
            }
        } catch {
            await sink.abandon()
            throw (error as? CairnError)?.withPath(name) ?? error
        }
    }

    /// Up to `count` bytes of `source` from `offset` (fewer only at its end).
    private static func readBlock(_ source: any ArchiveSource, at offset: UInt64, count: Int) throws(CairnError) -> [UInt8] {
        var block = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let n = try block.withMutableBytes { (raw) throws(CairnError) in
                try source.read(
                    fromAbsoluteOffset: offset + UInt64(filled), into: UnsafeMutableRawBufferPointer(rebasing: raw[filled..<count]))
            }
            if n == 0 { break }
            filled += n
        }
        if filled < count { block.removeSubrange(filled...) }
        return block
    }

    /// Writes the bytes `source` serves from `offset` to its end into `output` (a remote source:
    /// in 8 MiB range requests, each checked against the archive's validator), blocking the
    /// calling thread (the `cairn` tool's `cat`).
    ///
    /// - Throws: `CairnError` naming the archive: `.tokenMismatch`; `.invalidArgument` for an
    ///   offset past the end; what reading `source` throws.
    package static func send(_ source: any ArchiveSource, from offset: UInt64, expecting token: ResumeToken?, to output: FileHandle)
        throws(CairnError)
    {
        let size = source.size
        let path = source.name
        guard offset <= size else {
            throw CairnError(.invalidArgument, "offset is past the end of the archive (\(size) bytes)", path: path, offset: offset)
        }
        do throws(CairnError) {
            if let token { try token.check(against: source) }
            let out = FileDescriptor(rawValue: output.fileDescriptor, path: "<output>")
            var buffer = [UInt8](repeating: 0, count: source.isRemote ? remoteBlockBytes : localBlockBytes)
            var position = offset
            while position < size {
                let n = try buffer.withMutableBytes { (raw) throws(CairnError) in
                    try source.read(fromAbsoluteOffset: position, into: raw)
                }
                if n == 0 { break }
                try buffer.withBytes { (raw) throws(CairnError) in
                    try out.writeAll(UnsafeRawBufferPointer(rebasing: raw[0..<n]))
                }
                position += UInt64(n)
            }
        } catch {
            throw error.withPath(path)
        }
    }
}
