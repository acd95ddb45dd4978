import Cairn
import Foundation

/// Fault helpers a test can also call directly.
public enum MigrationFaults {
    /// Flips every bit of the byte at `offset` (bytes from the file's start) in the file at
    /// `url`.
    ///
    /// - Throws: `CairnError` naming the file: `.invalidArgument` when the file is not longer
    ///   than `offset`; `.io` (the cause names Foundation's error) when it cannot be opened,
    ///   read or written.
    public static func flipByte(at offset: UInt64, in url: URL) throws(CairnError) {
        let path = url.path(percentEncoded: false)
        let handle: FileHandle
        do {
            handle = try FileHandle(forUpdating: url)
        } catch {
            throw CairnError(
                .io, "cannot open", path: path, cause: "\(error)", underlyingCause: Errno(foundationError: error).map { .errno($0) })
        }
        defer { try? handle.close() }
        let size: UInt64
        let byte: UInt8?
        do {
            size = try handle.seekToEnd()
            guard offset < size else {
                throw CairnError(.invalidArgument, "offset \(offset) is past the end (\(size) bytes)", path: path)
            }
            try handle.seek(toOffset: offset)
            byte = try handle.read(upToCount: 1)?.first
            guard let byte else { throw CairnError(.io, "cannot read", path: path, offset: offset) }
            try handle.seek(toOffset: offset)
            try handle.write(contentsOf: [~byte])
        } catch let error as CairnError {
            throw error
        } catch {
            throw CairnError(
                .io, "cannot flip the byte", path: path, offset: offset, cause: "\(error)",
                underlyingCause: Errno(foundationError: error).map { .errno($0) })
        }
    }
}
