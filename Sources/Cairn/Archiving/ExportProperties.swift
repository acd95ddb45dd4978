/// What ``Archiver/finish()`` reports about the archive it wrote (AppMigrationKit's export
/// properties, plus deduplication figures).
public struct ExportProperties: Sendable {
    /// Sum of all file content bytes, before deduplication and compression.
    public var uncompressedBytes: UInt64
    /// Sum of the stored chunk payload bytes, after deduplication and compression; nil when the
    /// archive was not compressible (hint off or compression `none`).
    public var compressedBytes: UInt64?
    /// The size estimate given in the configuration, if any.
    public var sizeEstimate: UInt64?
    /// The payload version string given in the configuration.
    public var version: String
    /// Total bytes of the archive file, framing and manifest included.
    public var archiveBytes: UInt64
    /// Entries of every kind.
    public var entryCount: Int
    /// Distinct chunks stored.
    public var chunkCount: Int
    /// Chunk references from files (at least ``chunkCount``).
    public var referenceCount: Int
    /// Raw bytes of the distinct chunks.
    public var uniqueBytes: UInt64
    /// Content bytes not stored again thanks to deduplication (`uncompressedBytes - uniqueBytes`).
    public var deduplicatedBytes: UInt64 { uncompressedBytes &- uniqueBytes }
    /// Problems with sources that did not stop the archive (a file that changed while read, an
    /// unreadable file, an unsupported file type), one per path.
    public var warnings: [CairnError]
}
