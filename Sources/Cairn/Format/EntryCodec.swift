/// The format 2.0 encoding of a list of entries (`Spec/0001-container-format.md §6.1`): one
/// column per field, so similar values sit together and compress well, with varints and paths
/// front-coded against the previous entry of the list.
///
/// The same encoding is used by an entry record (a list of one), by a pack's item table (§7.5)
/// and by the manifest's entry table (§11), so an entry means the same wherever it is read.
///
/// Columns, each `count` values long unless said otherwise, in this order:
/// 1. `kind` u8;
/// 2. path: `shared` varint (bytes shared with the previous path of the list, 0 for the first),
///    `suffix` varint-prefixed bytes;
/// 3. `mode` varint (≤ 0o7777); 4. `uid` varint; 5. `gid` varint (each ≤ 2³² − 1);
/// 6. `mtimeSeconds` zigzag varint, the difference from the previous entry's seconds (wrapping
///    64-bit arithmetic; the first is taken from 0); 7. `mtimeNanoseconds` varint (< 10⁹);
/// 8. for file entries only: `size` varint;
/// 9. for symlinks and hard links only: `linkTarget` varint-prefixed bytes;
/// 10. for device entries only: `major` varint, `minor` varint (each ≤ 2³² − 1);
/// 11. `xattrCount` varint (≤ 128), then that many `name`, `value` varint-prefixed bytes.
package enum EntryCodec {
    /// Appends the encoding of `entries` to `w`. The caller has checked the limits
    /// (``ArchiveWriter/checkLimits(_:)``).
    ///
    /// - Complexity: one pass over `entries` (each element read once, so a collection that
    ///   decodes its elements on access, ``Manifest/EntryTable``, decodes each once); the columns
    ///   after the first are gathered in their own buffers and appended in order.
    package static func encode(_ entries: some Collection<ArchiveEntry>, into w: inout ByteWriter) {
        w.varint(UInt64(entries.count))
        var paths = ByteWriter(capacity: 0)
        var modes = ByteWriter(capacity: 0)
        var users = ByteWriter(capacity: 0)
        var groups = ByteWriter(capacity: 0)
        var secondsColumn = ByteWriter(capacity: 0)
        var nanoseconds = ByteWriter(capacity: 0)
        var sizes = ByteWriter(capacity: 0)
        var targets = ByteWriter(capacity: 0)
        var devices = ByteWriter(capacity: 0)
        var attributes = ByteWriter(capacity: 0)
        var previous: [UInt8] = []
        var seconds: Int64 = 0
        for e in entries {
            w.u8(e.kind.rawValue)
            let shared = sharedPrefixLength(previous, e.pathBytes)
            paths.varint(UInt64(shared))
            paths.varint(UInt64(e.pathBytes.count - shared))
            paths.bytes.append(contentsOf: e.pathBytes[shared...])
            previous = e.pathBytes
            modes.varint(UInt64(e.permissions))
            users.varint(UInt64(e.userID))
            groups.varint(UInt64(e.groupID))
            secondsColumn.signedVarint(e.modificationTime.seconds &- seconds)
            seconds = e.modificationTime.seconds
            nanoseconds.varint(UInt64(e.modificationTime.nanoseconds))
            if e.kind == .file { sizes.varint(e.size) }
            if e.kind == .symlink || e.kind == .hardLink { targets.varintBytes(e.linkTarget) }
            if e.kind.isDevice {
                devices.varint(UInt64(e.device?.major ?? 0))
                devices.varint(UInt64(e.device?.minor ?? 0))
            }
            attributes.varint(UInt64(e.extendedAttributes.count))
            for attribute in e.extendedAttributes {
                attributes.varintBytes(attribute.name)
                attributes.varintBytes(attribute.value)
            }
        }
        for column in [paths, modes, users, groups, secondsColumn, nanoseconds, sizes, targets, devices, attributes] {
            w.bytes.append(contentsOf: column.bytes)
        }
    }

    /// The encoding of one entry: an entry record's payload.
    package static func encode(_ entry: ArchiveEntry) -> [UInt8] {
        var w = ByteWriter(capacity: 32 + entry.pathBytes.count + entry.linkTarget.count)
        encode(CollectionOfOne(entry), into: &w)
        return w.bytes
    }

    /// Decodes a list, checking every field against its limit before allocating for it.
    ///
    /// - Parameter maximumCount: the most entries the caller accepts (1 for an entry record).
    /// - Throws: `.corrupted` naming the field and its offset: unknown kind, a mode outside
    ///   0o7777, an id over 32 bits, nanoseconds of a second or more, a path or target over its
    ///   limit, an empty path, an empty link target, a shared prefix longer than the previous path.
    package static func decode(_ r: inout ByteReader, maximumCount: Int = Int.max) throws(CairnError) -> [ArchiveEntry] {
        // Every entry takes at least one byte per column, so the count is bounded by the bytes left.
        let count = try r.count("entry count", limit: min(maximumCount, r.remaining))
        var kinds: [ArchiveEntry.Kind] = []
        kinds.reserveCapacity(count)
        for _ in 0..<count {
            let kind = ArchiveEntry.Kind(rawValue: try r.u8("entry kind"))
            guard kind.isKnown else { throw r.error("unknown entry kind \(kind.rawValue)") }
            kinds.append(kind)
        }
        var entries: [ArchiveEntry] = []
        entries.reserveCapacity(count)
        var previous: [UInt8] = []
        for kind in kinds {
            let shared = try r.count("path shared prefix", limit: previous.count)
            let suffix = try r.varintBytes("path", limit: FormatLimits.maximumPathLength - shared)
            var path = Array(previous[..<shared])
            path.append(contentsOf: suffix)
            guard !path.isEmpty else { throw r.error("empty path") }
            entries.append(ArchiveEntry(pathBytes: path, kind: kind, permissions: 0, modificationTime: 0))
            previous = path
        }
        for i in entries.indices { entries[i].permissions = UInt32(try r.varint("mode", limit: 0o7777)) }
        for i in entries.indices { entries[i].userID = UInt32(try r.varint("uid", limit: UInt64(UInt32.max))) }
        for i in entries.indices { entries[i].groupID = UInt32(try r.varint("gid", limit: UInt64(UInt32.max))) }
        var seconds: Int64 = 0
        for i in entries.indices {
            seconds = seconds &+ (try r.signedVarint("mtime seconds"))
            entries[i].modificationTime.seconds = seconds
        }
        for i in entries.indices {
            entries[i].modificationTime.nanoseconds = UInt32(try r.varint("mtime nanoseconds", limit: 999_999_999))
        }
        for i in entries.indices where entries[i].kind == .file { entries[i].size = try r.varint("size") }
        for i in entries.indices where entries[i].kind == .symlink || entries[i].kind == .hardLink {
            let target = try r.varintBytes("link target", limit: FormatLimits.maximumLinkTargetLength)
            guard !target.isEmpty else { throw r.error("empty link target of \(entries[i].path)") }
            entries[i].linkTarget = target
        }
        for i in entries.indices where entries[i].kind.isDevice {
            let major = UInt32(try r.varint("device major", limit: UInt64(UInt32.max)))
            let minor = UInt32(try r.varint("device minor", limit: UInt64(UInt32.max)))
            entries[i].device = ArchiveEntry.Device(major: major, minor: minor)
        }
        for i in entries.indices {
            let n = try r.count("xattr count", limit: FormatLimits.maximumExtendedAttributes)
            var attributes: [ArchiveEntry.ExtendedAttribute] = []
            for _ in 0..<n {
                let name = try r.varintBytes("xattr name", limit: FormatLimits.maximumExtendedAttributeNameLength)
                guard !name.isEmpty else { throw r.error("empty extended attribute name") }
                let value = try r.varintBytes("xattr value", limit: FormatLimits.maximumExtendedAttributeValueLength)
                attributes.append(ArchiveEntry.ExtendedAttribute(name: name, value: value))
            }
            entries[i].extendedAttributes = attributes
        }
        return entries
    }

    /// Decodes an entry record's payload: a list of exactly one entry and nothing after it.
    package static func decodeRecord(_ r: inout ByteReader) throws(CairnError) -> ArchiveEntry {
        let entries = try decode(&r, maximumCount: 1)
        guard let entry = entries.first, entries.count == 1 else { throw r.error("an entry record holds no entry") }
        guard r.isAtEnd else { throw r.error("\(r.remaining) byte\(r.remaining == 1 ? "" : "s") after the last field") }
        return entry
    }

    private static func sharedPrefixLength(_ a: [UInt8], _ b: [UInt8]) -> Int {
        let n = min(a.count, b.count)
        var i = 0
        while i < n, a[i] == b[i] { i += 1 }
        return i
    }
}
