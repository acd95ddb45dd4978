internal import CZstd

/// How an archive compresses its chunks: a codec and, for zlib and zstd, a level.
///
/// ```swift
/// let fast = CompressionMethod.lz4
/// let small = CompressionMethod.zstd(level: 19)
/// let parsed = CompressionMethod(name: "zlib:9")
/// ```
///
/// Each chunk is stored compressed only when that makes it strictly smaller; otherwise it is
/// stored as is, whatever the method.
public struct CompressionMethod: Hashable, Sendable, CustomStringConvertible {
    /// The codec that compressed chunks are stored with.
    package let codec: ChunkCodec
    /// The compression level: 0–9 for zlib, ``zstdLevels`` for zstd, 0 for `none` and `lz4`.
    public let level: Int

    private init(codec: ChunkCodec, level: Int) {
        self.codec = codec
        self.level = level
    }

    /// Chunks are stored uncompressed.
    public static let none = CompressionMethod(codec: .none, level: 0)

    /// LZ4 frames at the default (fast) level: the quickest to write and to read.
    public static let lz4 = CompressionMethod(codec: .lz4, level: 0)

    /// The zlib levels accepted by ``zlib(level:)``: 0 (stored) to 9 (smallest).
    public static let zlibLevels: ClosedRange<Int> = 0...9

    /// The zstd levels accepted by ``zstd(level:)``, as reported by libzstd (negative levels
    /// trade ratio for speed).
    public static var zstdLevels: ClosedRange<Int> {
        Int(ZSTD_minCLevel())...Int(ZSTD_maxCLevel())
    }

    /// zlib streams (RFC 1950) at `level`, clamped to ``zlibLevels``.
    public static func zlib(level: Int = 6) -> CompressionMethod {
        CompressionMethod(codec: .zlib, level: level.clamped(to: zlibLevels))
    }

    /// Zstandard frames (RFC 8878) at `level`, clamped to ``zstdLevels``.
    public static func zstd(level: Int = 3) -> CompressionMethod {
        CompressionMethod(codec: .zstd, level: level.clamped(to: zstdLevels))
    }

    /// Parses a method name as the command line writes it: `none`, `lz4`, `zlib`, `zlib:<level>`,
    /// `zstd`, `zstd:<level>` (case-insensitive).
    ///
    /// - Returns: `nil` for an unknown name, a level on `none` or `lz4`, or a level out of range.
    public init?(name: String) {
        let parts = name.lowercased().split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        guard let codecName = parts.first else { return nil }
        var level: Int?
        if parts.count == 2 {
            guard let parsed = Int(parts[1]) else { return nil }
            level = parsed
        }
        switch codecName {
        case "none" where level == nil:
            self = .none
        case "lz4" where level == nil:
            self = .lz4
        case "zlib":
            let value = level ?? 6
            guard Self.zlibLevels.contains(value) else { return nil }
            self = .zlib(level: value)
        case "zstd":
            let value = level ?? 3
            guard Self.zstdLevels.contains(value) else { return nil }
            self = .zstd(level: value)
        default:
            return nil
        }
    }

    /// The name ``init(name:)`` parses: `none`, `lz4`, `zlib:6`, `zstd:3`, ...
    public var description: String {
        switch codec {
        case .none, .lz4: codec.name
        case .zlib, .zstd: "\(codec.name):\(level)"
        }
    }
}

extension Int {
    fileprivate func clamped(to range: ClosedRange<Int>) -> Int {
        Swift.min(Swift.max(self, range.lowerBound), range.upperBound)
    }
}
