/// The hard limits of format version 1 (`Spec/0001-container-format.md §14`).
///
/// A reader refuses anything past these before allocating; a writer never produces it.
public enum FormatLimits {
    /// Largest record payload, in bytes (16 MiB).
    public static let maximumRecordPayload = 16 * 1024 * 1024
    /// Largest header record payload, in bytes (1 MiB).
    public static let maximumHeaderPayload = 1024 * 1024
    /// Largest raw (uncompressed) chunk, in bytes (8 MiB).
    public static let maximumChunkLength = 8 * 1024 * 1024
    /// Longest path in archive, in bytes.
    public static let maximumPathLength = 4096
    /// Longest path component, in bytes.
    public static let maximumComponentLength = 255
    /// Deepest path, in components.
    public static let maximumPathDepth = 512
    /// Longest symlink or hard-link target, in bytes.
    public static let maximumLinkTargetLength = 4096
    /// Most extended attributes per entry.
    public static let maximumExtendedAttributes = 128
    /// Longest extended attribute name, in bytes.
    public static let maximumExtendedAttributeNameLength = 255
    /// Largest extended attribute value, in bytes.
    public static let maximumExtendedAttributeValueLength = 65536
    /// Longest header string (version, platform, app identifier, metadata key), in bytes.
    public static let maximumHeaderStringLength = 4096
    /// Largest metadata value, in bytes.
    public static let maximumMetadataValueLength = 65536
    /// Most metadata pairs.
    public static let maximumMetadataPairs = 256
    /// Most chunk references in one chunk-references record.
    public static let maximumReferencesPerRecord = 65536
    /// Most rows in one manifest chunk-table record.
    public static let maximumChunkRowsPerRecord = 65536
    /// Most rows in one manifest reference-table record.
    public static let maximumReferenceRowsPerRecord = 1_048_576
    /// A writer starts a new manifest entry-table record when adding the next row would take its
    /// payload past this many bytes (one row is at most about 8.5 MB, so a record stays under
    /// ``maximumRecordPayload``).
    public static let entryTableRecordTarget = 8 * 1024 * 1024
}
