/// The header record: the archive's options and the creator's metadata
/// (`Spec/0001-container-format.md §5`).
public struct ArchiveHeader: Sendable, Equatable {
    /// How file contents were cut into chunks.
    public var chunking: ChunkingPolicy
    /// The codec the writer preferred (chunks that did not shrink are stored raw regardless).
    public var compression: CompressionMethod
    /// The creator's hint that the payload is worth compressing.
    public var isCompressible: Bool
    /// The creator's estimate of the total content bytes, if it gave one.
    public var sizeEstimate: UInt64?
    /// The payload's own version string (AppMigrationKit's `resourcesVersion`).
    public var resourcesVersion: String
    /// The platform the archive was made on, e.g. `"Linux x86_64"`.
    public var sourcePlatform: String
    /// The identifier of the app that made the archive.
    public var appIdentifier: String
    /// Free key/value pairs, written sorted by key.
    public var metadata: [String: String]

    public init(
        chunking: ChunkingPolicy = .default, compression: CompressionMethod = .lz4,
        isCompressible: Bool = true, sizeEstimate: UInt64? = nil, resourcesVersion: String = "",
        sourcePlatform: String = "", appIdentifier: String = "", metadata: [String: String] = [:]
    ) {
        self.chunking = chunking
        self.compression = compression
        self.isCompressible = isCompressible
        self.sizeEstimate = sizeEstimate
        self.resourcesVersion = resourcesVersion
        self.sourcePlatform = sourcePlatform
        self.appIdentifier = appIdentifier
        self.metadata = metadata
    }

    package func validate() throws(CairnError) {
        try chunking.validate()
        for s in [resourcesVersion, sourcePlatform, appIdentifier] + Array(metadata.keys)
        where s.utf8.count > FormatLimits.maximumHeaderStringLength {
            throw CairnError(.limitExceeded, "header string is longer than \(FormatLimits.maximumHeaderStringLength) bytes")
        }
        guard metadata.count <= FormatLimits.maximumMetadataPairs else {
            throw CairnError(.limitExceeded, "more than \(FormatLimits.maximumMetadataPairs) metadata pairs")
        }
        for v in metadata.values where v.utf8.count > FormatLimits.maximumMetadataValueLength {
            throw CairnError(.limitExceeded, "metadata value is longer than \(FormatLimits.maximumMetadataValueLength) bytes")
        }
        let size = encoded().count
        guard size <= FormatLimits.maximumHeaderPayload else {
            throw CairnError(.limitExceeded, "header is \(size) bytes, over the limit of \(FormatLimits.maximumHeaderPayload)")
        }
    }

    package func encoded() -> [UInt8] {
        var w = ByteWriter()
        w.u8(chunking.isContentDefined ? 0 : 1)
        w.u8(compression.codec.rawValue)
        w.u8(isCompressible ? 1 : 0)
        w.u8(UInt8(bitPattern: Int8(clamping: compression.level)))
        w.u32(UInt32(truncatingIfNeeded: chunking.minimum))
        w.u32(UInt32(truncatingIfNeeded: chunking.average))
        w.u32(UInt32(truncatingIfNeeded: chunking.maximum))
        w.u64(sizeEstimate ?? UInt64.max)
        w.string16(Array(resourcesVersion.utf8))
        w.string16(Array(sourcePlatform.utf8))
        w.string16(Array(appIdentifier.utf8))
        let pairs = metadata.sorted { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) }
        w.u16(UInt16(truncatingIfNeeded: pairs.count))
        for (key, value) in pairs {
            w.string16(Array(key.utf8))
            w.string32(Array(value.utf8))
        }
        return w.bytes
    }

    package static func decode(_ payload: [UInt8], offset: UInt64) throws(CairnError) -> ArchiveHeader {
        var r = ByteReader(payload, baseOffset: offset, what: "header record")
        let kind = try r.u8("chunking kind")
        let codecID = try r.u8("codec")
        let flags = try r.u8("flags")
        guard flags & ~1 == 0 else { throw r.error("reserved flag bits are set") }
        let level = Int(Int8(bitPattern: try r.u8("compression level")))
        let minimum = Int(try r.u32("minimum chunk length"))
        let average = Int(try r.u32("average chunk length"))
        let maximum = Int(try r.u32("maximum chunk length"))
        let chunking: ChunkingPolicy
        switch kind {
        case 0: chunking = .contentDefined(minimum: minimum, average: average, maximum: maximum)
        case 1: chunking = .fixed(size: maximum)
        default: throw r.error("unknown chunking kind \(kind)")
        }
        do { try chunking.validate() } catch { throw r.error("invalid chunking parameters: \(error.message)") }
        let compression: CompressionMethod
        switch ChunkCodec(rawValue: codecID) {
        case .none?: compression = .none
        case .lz4?: compression = .lz4
        case .zlib?: compression = .zlib(level: level)
        case .zstd?: compression = .zstd(level: level)
        case nil: throw r.error("unknown codec \(codecID)")
        }
        let estimate = try r.u64("size estimate")
        let limit = FormatLimits.maximumHeaderStringLength
        let version = try r.string16("resources version", limit: limit)
        let platform = try r.string16("source platform", limit: limit)
        let app = try r.string16("app identifier", limit: limit)
        let count = Int(try r.u16("metadata count"))
        guard count <= FormatLimits.maximumMetadataPairs else { throw r.error("\(count) metadata pairs, over the limit") }
        var metadata: [String: String] = [:]
        for _ in 0..<count {
            let key = try r.string16("metadata key", limit: limit)
            let value = try r.string32("metadata value", limit: FormatLimits.maximumMetadataValueLength)
            metadata[String(decoding: key, as: UTF8.self)] = String(decoding: value, as: UTF8.self)
        }
        return ArchiveHeader(
            chunking: chunking, compression: compression, isCompressible: flags & 1 != 0,
            sizeEstimate: estimate == UInt64.max ? nil : estimate,
            resourcesVersion: String(decoding: version, as: UTF8.self),
            sourcePlatform: String(decoding: platform, as: UTF8.self),
            appIdentifier: String(decoding: app, as: UTF8.self), metadata: metadata)
    }
}
