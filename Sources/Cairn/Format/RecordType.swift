/// The record types (`Spec/0001-container-format.md §4`): 1–10 in format 1.x, and in 2.0
/// all but 7–9 (the 1.x manifest tables), plus 11 and 12.
package enum RecordType: UInt8, Sendable {
    case header = 1
    case chunk = 2
    case entry = 3
    case chunkReferences = 4
    case fileEnd = 5
    case commit = 6
    case manifestChunks = 7
    case manifestReferences = 8
    case manifestEntries = 9
    case footer = 10
    /// Format 2.0: a run of small items with their content (§7.5).
    case pack = 11
    /// Format 2.0: a compressed segment of the manifest (§11).
    case manifest = 12
    /// Format 2.1: the framed length and digest of every manifest record, skippable, just
    /// before the final commit (§11.8).
    case manifestIndex = 13
    /// Format 2.2: the maker's Ed25519 signature over the prefix ending at a commit, or over the
    /// whole archive (the root), skippable (`Spec/0004-trusted-archives.md §3`).
    case signature = 14
    /// Format 3.0: the clear envelope of an encrypted archive at offset 12, before its sealed
    /// blocks (`Spec/0004-trusted-archives.md §6.2`).
    case envelope = 15

    package var name: String {
        switch self {
        case .header: "header"
        case .chunk: "chunk"
        case .entry: "entry"
        case .chunkReferences: "chunk references"
        case .fileEnd: "file end"
        case .commit: "commit"
        case .manifestChunks: "manifest chunk table"
        case .manifestReferences: "manifest reference table"
        case .manifestEntries: "manifest entry table"
        case .footer: "footer"
        case .pack: "pack"
        case .manifest: "manifest"
        case .manifestIndex: "manifest index"
        case .signature: "signature"
        case .envelope: "envelope"
        }
    }
}

extension RecordType {
    /// `name` with "a" or "an" before it, for messages.
    package static func withArticle(_ name: String) -> String {
        (name.first.map { "aeiou".contains($0) } ?? false ? "an " : "a ") + name
    }
}

/// Record framing constants (`Spec/0001-container-format.md §3`).
package enum RecordFraming {
    /// type u8, flags u8, reserved u16, length u32.
    package static let headerLength = 8
    /// CRC-32 u32 after the payload.
    package static let trailerLength = 4
    package static let overhead = headerLength + trailerLength
    /// Flag bit 0: a reader that does not know this record type skips it.
    package static let skippableFlag: UInt8 = 0x01
}

/// The 12-byte prelude at offset 0 (`Spec/0001-container-format.md §2`).
package enum Prelude {
    /// `89 43 41 49 52 4E 0D 0A`: a high byte first (catches 7-bit transfers), "CAIRN", CR LF
    /// (catches line-ending conversion).
    package static let magic: [UInt8] = [0x89, 0x43, 0x41, 0x49, 0x52, 0x4E, 0x0D, 0x0A]
    /// The version writers write: 2.1 (2.0 with the manifest index, §2.3).
    package static let majorVersion: UInt16 = 2
    package static let minorVersion: UInt16 = 1
    /// The major versions readers read.
    package static let readableMajorVersions: ClosedRange<UInt16> = 1...2
    package static let length = 12

    /// The version a signing writer writes: 2.2 (2.1 with signature records,
    /// `Spec/0004-trusted-archives.md §3.1`).
    package static let signedMinorVersion: UInt16 = 2

    package static var bytes: [UInt8] { bytes(minor: minorVersion) }

    /// The minor version a writer writes: 2.2 when it signs, 2.1 otherwise (an unsigned archive
    /// holds nothing 2.2 adds). The one place that decides it.
    package static func minorVersion(signed: Bool) -> UInt16 { signed ? signedMinorVersion : minorVersion }

    /// The prelude of version 2.`minor` (a rebuild of a 2.0 archive writes 2.0's).
    package static func bytes(minor: UInt16) -> [UInt8] {
        var w = ByteWriter(capacity: length)
        w.raw(magic)
        w.u16(majorVersion)
        w.u16(minor)
        return w.bytes
    }

    /// Whether format 2.`minor` has the manifest index before the final commit and manifest
    /// segments cut by content (`Spec/0001 §11.1`, §11.8): 2.1 and later. The one place that
    /// says which versions those belong to.
    package static func hasManifestIndex(minor: UInt16) -> Bool { minor >= 1 }

    /// Checks a prelude and returns its version.
    ///
    /// - Parameter sealed: the prelude of an encrypted archive's outer file is expected (major
    ///   version 3, `Spec/0004-trusted-archives.md §6.2`) instead of a plain archive's (1 or 2):
    ///   identities were given to open it.
    /// - Throws: `.truncated`, `.corrupted` (bad magic), `.unsupportedVersion` for a major this
    ///   reader does not read (whether or not `sealed`, §6.2 rule 2); `.untrusted` for an
    ///   encrypted archive read without an identity (rule 1), or a plain one when `sealed`
    ///   (rule 2: it is what stripping the encryption would leave).
    package static func parse(_ bytes: [UInt8], sealed: Bool = false) throws(CairnError) -> FormatVersion {
        guard bytes.count >= length else {
            throw CairnError(.truncated, "file is too short to be a Cairn archive (\(bytes.count) bytes)", offset: 0)
        }
        guard Array(bytes[0..<8]) == magic else {
            throw CairnError(.corrupted, "not a Cairn archive (bad magic)", offset: 0)
        }
        let major = UInt16(bytes[8]) | UInt16(bytes[9]) << 8
        let minor = UInt16(bytes[10]) | UInt16(bytes[11]) << 8
        guard readableMajorVersions.contains(major) || major == EnvelopeRecord.majorVersion else {
            throw CairnError(
                .unsupportedVersion,
                "archive format version \(major).\(minor) is not supported (this reader reads 1.x, 2.x and, encrypted, "
                    + "\(EnvelopeRecord.majorVersion).x)",
                offset: 8)
        }
        if sealed, major != EnvelopeRecord.majorVersion {
            throw CairnError(
                .untrusted,
                "the archive is not encrypted, but identities were given to open it: refusing a plain archive where an encrypted one is expected",
                offset: 0)
        }
        if !sealed, major == EnvelopeRecord.majorVersion {
            throw CairnError(
                .untrusted, "the archive is encrypted (format \(major).\(minor)): give an identity (--identity FILE) to read it",
                offset: 8)
        }
        return FormatVersion(major: major, minor: minor)
    }
}

/// An archive's format version, from its prelude (§2).
public struct FormatVersion: Sendable, Hashable, CustomStringConvertible {
    public var major: UInt16
    public var minor: UInt16
    public init(major: UInt16, minor: UInt16) {
        self.major = major
        self.minor = minor
    }
    /// The version this library writes.
    public static let current = FormatVersion(major: Prelude.majorVersion, minor: Prelude.minorVersion)
    /// Format 1.x: no packs, 1.x entries, the byte chain, the 1.x manifest tables.
    package var isVersion1: Bool { major == 1 }
    public var description: String { "\(major).\(minor)" }
}
