import Foundation
import Glibc

/// The sender's half of resuming a transfer (`Spec/0003-command-line.md`, `cat`).
public enum ArchiveTransfer {
    /// Writes `archive`'s bytes from `offset` to its end into `output`.
    ///
    /// - Parameters:
    ///   - path: the archive, a local path or an `http(s)://` URL.
    ///   - offset: the first byte to send.
    ///   - token: when given, the receiver's ``ResumeToken``; the bytes are sent only if the
    ///     record ending at `offset` in the archive is a commit (or the footer) with the token's
    ///     chain digest, i.e. the receiver's prefix is a prefix of this archive.
    ///   - output: where the bytes go.
    /// - Throws: `.tokenMismatch`; `.invalidArgument` for an offset past the end; `.io`.
    public static func send(archiveAt path: String, from offset: UInt64, expecting token: ResumeToken?, to output: FileHandle)
        throws
    {
        let source = try LocalArchiveSource(path: path)
        defer { source.close() }
        try send(source, from: offset, expecting: token, to: output)
    }

    /// Writes the bytes `source` serves from `offset` to its end into `output` (a remote source:
    /// in 8 MiB range requests, each checked against the archive's validator).
    ///
    /// - Throws: as ``send(archiveAt:from:expecting:to:)``, and what reading `source` throws.
    package static func send(_ source: any ArchiveSource, from offset: UInt64, expecting token: ResumeToken?, to output: FileHandle)
        throws
    {
        let size = source.size
        let path = source.name
        guard offset <= size else {
            throw CairnError(.invalidArgument, "offset is past the end of the archive (\(size) bytes)", path: path, offset: offset)
        }
        if let token { try token.check(against: source) }
        let out = FileDescriptor(rawValue: output.fileDescriptor, path: "<output>")
        var buffer = [UInt8](repeating: 0, count: source.isRemote ? 8 << 20 : 1 << 20)
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
    }
}
