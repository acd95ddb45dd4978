import Cairn
import Foundation

/// Fault helpers a test can also call directly.
public enum MigrationFaults {
    /// Flips every bit of the byte at `offset` in the file at `url`.
    ///
    /// - Throws: `CairnError` `.invalidArgument` when the file is shorter; `.io`.
    public static func flipByte(at offset: UInt64, in url: URL) throws {
        let handle = try FileHandle(forUpdating: url)
        defer { try? handle.close() }
        let size = try handle.seekToEnd()
        guard offset < size else {
            throw CairnError(.invalidArgument, "offset \(offset) is past the end (\(size) bytes)", path: url.path)
        }
        try handle.seek(toOffset: offset)
        guard let byte = try handle.read(upToCount: 1)?.first else {
            throw CairnError(.io, "cannot read", path: url.path, offset: offset)
        }
        try handle.seek(toOffset: offset)
        try handle.write(contentsOf: [~byte])
    }
}
