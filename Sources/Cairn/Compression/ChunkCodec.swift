/// How a chunk's payload is stored in a Cairn archive: the on-disk codec id.
///
/// The raw values are part of the Cairn container format and never change.
package enum ChunkCodec: UInt8, Sendable, CaseIterable {
    /// The payload is the chunk's bytes, unchanged.
    case none = 0
    /// The payload is one LZ4 frame (LZ4 Frame Format 1.6.x) that records the chunk's length.
    case lz4 = 1
    /// The payload is one zlib stream (RFC 1950 around RFC 1951 deflate).
    case zlib = 2
    /// The payload is one Zstandard frame (RFC 8878) that records the chunk's length.
    case zstd = 3

    /// The lowercase name used in messages and on the command line.
    package var name: String {
        switch self {
        case .none: "none"
        case .lz4: "lz4"
        case .zlib: "zlib"
        case .zstd: "zstd"
        }
    }
}
