/// One item in an archive: a file, directory, symlink, hard link, FIFO or device node, with its
/// metadata (`Spec/0001-container-format.md §6`).
public struct ArchiveEntry: Sendable, Equatable {
    /// The type of an entry. New kinds may be added; do not `switch` exhaustively.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        /// The on-disk kind byte.
        public let rawValue: UInt8
        package init(rawValue: UInt8) { self.rawValue = rawValue }

        public static let file = Kind(rawValue: 1)
        public static let directory = Kind(rawValue: 2)
        public static let symlink = Kind(rawValue: 3)
        /// A hard link to an earlier file entry of the same archive; ``ArchiveEntry/linkTarget``
        /// is that entry's path.
        public static let hardLink = Kind(rawValue: 4)
        /// A named pipe (format 2.0).
        public static let fifo = Kind(rawValue: 5)
        /// A character device node, with ``ArchiveEntry/device`` (format 2.0).
        public static let characterDevice = Kind(rawValue: 6)
        /// A block device node, with ``ArchiveEntry/device`` (format 2.0).
        public static let blockDevice = Kind(rawValue: 7)

        /// Whether the kind exists in format 2.0.
        package var isKnown: Bool { (1...7).contains(rawValue) }
        /// Whether the kind exists in format 1.x (files, directories, symlinks, hard links).
        package var isKnownInVersion1: Bool { (1...4).contains(rawValue) }
        /// Device nodes carry device numbers.
        package var isDevice: Bool { self == .characterDevice || self == .blockDevice }
        /// FIFOs and device nodes: entries with neither content nor a link target.
        package var isSpecial: Bool { self == .fifo || isDevice }

        /// The kind in words, for messages: "file", "hard link".
        package var noun: String {
            switch rawValue {
            case 4: "hard link"
            case 5: "FIFO"
            case 6: "character device"
            case 7: "block device"
            default: description
            }
        }

        /// ``noun`` with an article: "a file", "a hard link".
        package var words: String { isKnown ? "a \(noun)" : "an entry of kind \(rawValue)" }

        public var description: String {
            switch rawValue {
            case 1: "file"
            case 2: "directory"
            case 3: "symlink"
            case 4: "hardlink"
            case 5: "fifo"
            case 6: "chardev"
            case 7: "blockdev"
            default: "kind-\(rawValue)"
            }
        }
    }

    /// An extended attribute: a name and a value, both raw bytes.
    public struct ExtendedAttribute: Sendable, Equatable {
        public var name: [UInt8]
        public var value: [UInt8]
        public init(name: [UInt8], value: [UInt8]) {
            self.name = name
            self.value = value
        }
    }

    /// The path in the archive as raw bytes, components separated by `/`.
    public var pathBytes: [UInt8]
    public var kind: Kind
    /// Permission bits (`mode & 0o7777`).
    public var permissions: UInt32
    /// Modification time, seconds and nanoseconds since the Unix epoch.
    public var modificationTime: Timestamp
    /// Content length in bytes for files; 0 for other kinds.
    public var size: UInt64
    /// Owner and group as numeric ids (informational; extraction does not apply them).
    public var userID: UInt32
    public var groupID: UInt32
    /// The symlink's target, or the hard link's target path in archive; empty otherwise.
    public var linkTarget: [UInt8]
    public var extendedAttributes: [ExtendedAttribute]
    /// For device nodes: the device number's major and minor parts (`major(3)`, `minor(3)`);
    /// nil for other kinds.
    public var device: Device?

    /// A device number split as Linux does (`makedev(3)`).
    public struct Device: Sendable, Equatable {
        public var major: UInt32
        public var minor: UInt32
        public init(major: UInt32, minor: UInt32) {
            self.major = major
            self.minor = minor
        }
    }
    /// For files in a read archive: SHA-256 over the concatenation of the file's chunk ids
    /// (`Spec/0001-container-format.md §8`); nil otherwise.
    public var contentDigest: Digest?
    /// For files in a read archive: the number of chunk references.
    public var chunkCount: Int

    public init(
        pathBytes: [UInt8], kind: Kind, permissions: UInt32, modificationTime: Timestamp, size: UInt64 = 0,
        userID: UInt32 = 0, groupID: UInt32 = 0, linkTarget: [UInt8] = [],
        extendedAttributes: [ExtendedAttribute] = [], device: Device? = nil
    ) {
        self.device = device
        self.pathBytes = pathBytes
        self.kind = kind
        self.permissions = permissions
        self.modificationTime = modificationTime
        self.size = size
        self.userID = userID
        self.groupID = groupID
        self.linkTarget = linkTarget
        self.extendedAttributes = extendedAttributes
        self.contentDigest = nil
        self.chunkCount = 0
    }

    /// The path for display: UTF-8 as is, other bytes escaped reversibly as `\xHH`
    /// (`Spec/0001-container-format.md §6`).
    public var path: String { PathBytes.escaped(pathBytes) }

    /// The link target for display, escaped like ``path``.
    public var linkTargetDisplay: String { PathBytes.escaped(linkTarget) }

    /// Decodes a format 1.x entry payload, checking every length against its limit; the path's
    /// safety is checked by the extractor, not here, so `list` can show hostile names.
    package static func decodeVersion1(_ r: inout ByteReader) throws(CairnError) -> ArchiveEntry {
        let kind = Kind(rawValue: try r.u8("entry kind"))
        guard try r.raw(3, "reserved") == [0, 0, 0] else { throw r.error("reserved bytes are not zero") }
        let permissions = try r.u32("mode")
        let uid = try r.u32("uid")
        let gid = try r.u32("gid")
        let mtime = try r.i64("mtime")
        let size = try r.u64("size")
        let path = try r.string16("path", limit: FormatLimits.maximumPathLength)
        let target = try r.string16("link target", limit: FormatLimits.maximumLinkTargetLength)
        let xattrCount = Int(try r.u16("xattr count"))
        guard xattrCount <= FormatLimits.maximumExtendedAttributes else {
            throw r.error("\(xattrCount) extended attributes, over the limit of \(FormatLimits.maximumExtendedAttributes)")
        }
        var xattrs: [ExtendedAttribute] = []
        for _ in 0..<xattrCount {
            let name = try r.string16("xattr name", limit: FormatLimits.maximumExtendedAttributeNameLength)
            let value = try r.string32("xattr value", limit: FormatLimits.maximumExtendedAttributeValueLength)
            xattrs.append(ExtendedAttribute(name: name, value: value))
        }
        guard kind.isKnownInVersion1 else { throw r.error("unknown entry kind \(kind.rawValue)") }
        guard permissions <= 0o7777 else { throw r.error("mode \(String(permissions, radix: 8)) has bits outside 0o7777") }
        guard kind == .file || size == 0 else { throw r.error("a \(kind) entry declares a size") }
        return ArchiveEntry(
            pathBytes: path, kind: kind, permissions: permissions, modificationTime: Timestamp(nanosecondsSinceEpoch: mtime), size: size,
            userID: uid, groupID: gid, linkTarget: target, extendedAttributes: xattrs)
    }
}
