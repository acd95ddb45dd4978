extension Manifest {
    /// The entry table held in memory: every ``Manifest/EntryRow`` packed into one byte buffer
    /// (varints, the path and link target inline), so 100,000 rows take a few MiB instead of
    /// one 200-byte struct plus one heap block per path each (issue 9's 80 MiB peak RSS for
    /// 100,000 files). An in-memory representation only: nothing here is written to an archive.
    ///
    /// It is a random-access, mutable, range-replaceable collection of rows: reading a row
    /// decodes it (allocating its path), writing one re-encodes it — in place when its encoding
    /// keeps its length, else at the end of the buffer, the old bytes counted as unused and the
    /// buffer compacted once they are more than half of it.
    ///
    /// - Complexity: O(1) amortized ``append(_:)``, reads and writes, O(row length) each;
    ///   O(*n*) to replace rows other than the last ones.
    package struct EntryTable: Sendable, Equatable, RandomAccessCollection, MutableCollection,
        RangeReplaceableCollection, ExpressibleByArrayLiteral
    {
        /// The encoded rows; ``starts`` says where each begins.
        private var bytes: [UInt8] = []
        /// The offset in ``bytes`` of each row's encoding, by index.
        private var starts: [Int] = []
        /// Bytes of ``bytes`` no row uses any more (rows re-encoded elsewhere).
        private var unused = 0

        package init() {}

        package init(arrayLiteral rows: EntryRow...) {
            self.init(rows)
        }

        package var startIndex: Int { 0 }
        package var endIndex: Int { starts.count }

        package subscript(position: Int) -> EntryRow {
            get { Self.decode(bytes, at: starts[position]).row }
            set { replaceRow(at: position, with: newValue) }
        }

        package mutating func reserveCapacity(_ n: Int) {
            starts.reserveCapacity(n)
        }

        package mutating func append(_ row: EntryRow) {
            starts.append(bytes.count)
            Self.encode(row, into: &bytes)
        }

        package mutating func append<S: Sequence>(contentsOf rows: S) where S.Element == EntryRow {
            for row in rows { append(row) }
        }

        package mutating func replaceSubrange<C: Collection>(_ subrange: Range<Int>, with rows: C)
        where C.Element == EntryRow {
            if subrange.upperBound == starts.count {
                // The tail: drop its bytes (when every row lies in order) and append.
                if unused > 0 { compact() }
                let cut = subrange.lowerBound < starts.count ? starts[subrange.lowerBound] : bytes.count
                starts.removeSubrange(subrange)
                bytes.removeSubrange(cut...)
                for row in rows { append(row) }
                return
            }
            var rebuilt = EntryTable()
            rebuilt.reserveCapacity(starts.count - subrange.count + rows.count)
            for index in 0..<subrange.lowerBound { rebuilt.append(self[index]) }
            for row in rows { rebuilt.append(row) }
            for index in subrange.upperBound..<starts.count { rebuilt.append(self[index]) }
            self = rebuilt
        }

        package static func == (lhs: EntryTable, rhs: EntryTable) -> Bool {
            lhs.count == rhs.count && lhs.elementsEqual(rhs)
        }

        /// Gives back the buffers' unused capacity (after the last row of a decoded table: a
        /// buffer grown by doubling may be half empty).
        package mutating func shrinkToFit() {
            if unused > 0 { compact() }
            bytes = bytes.withoutSpareCapacity()
            starts = starts.withoutSpareCapacity()
        }

        /// Bytes held for the rows (the buffer's length and the row index), for tests and
        /// measurements.
        package var storedByteCount: Int { bytes.count + starts.count * MemoryLayout<Int>.stride }

        private mutating func replaceRow(at position: Int, with row: EntryRow) {
            let start = starts[position]
            let oldEnd = Self.decode(bytes, at: start).end
            var encoded: [UInt8] = []
            encoded.reserveCapacity(oldEnd - start + 16)
            Self.encode(row, into: &encoded)
            if encoded.count == oldEnd - start {
                bytes.replaceSubrange(start..<oldEnd, with: encoded)
            } else if oldEnd == bytes.count {
                bytes.removeSubrange(start...)
                bytes.append(contentsOf: encoded)
            } else {
                unused += oldEnd - start
                starts[position] = bytes.count
                bytes.append(contentsOf: encoded)
                if unused > 4096 && unused > bytes.count / 2 { compact() }
            }
        }

        /// Rewrites the buffer with the rows in order and nothing unused.
        private mutating func compact() {
            var packed: [UInt8] = []
            packed.reserveCapacity(bytes.count - unused)
            var newStarts: [Int] = []
            newStarts.reserveCapacity(starts.count)
            for start in starts {
                let end = Self.decode(bytes, at: start).end
                newStarts.append(packed.count)
                packed.append(contentsOf: bytes[start..<end])
            }
            bytes = packed
            starts = newStarts
            unused = 0
        }

        // MARK: The row encoding (in memory only)

        private enum Flag {
            static let rowDigest: UInt8 = 1 << 0
            static let entryDigest: UInt8 = 1 << 1
            /// The entry's digest equals the row's (stored once).
            static let entryDigestIsRowDigest: UInt8 = 1 << 2
            static let device: UInt8 = 1 << 3
            static let pack: UInt8 = 1 << 4
        }

        /// `flags u8 | recordOffset | firstReference | referenceCount | [rowDigest[32]] | [pack] |
        /// kind u8 | permissions | mtime seconds (zigzag) | nanoseconds | size | uid | gid |
        /// chunkCount (zigzag) | path | linkTarget | xattrCount, (name, value)… | [entryDigest[32]]
        /// | [major | minor]`, numbers as LEB128 varints, byte strings varint-prefixed.
        private static func encode(_ row: EntryRow, into out: inout [UInt8]) {
            let entry = row.entry
            var flags: UInt8 = 0
            if row.contentDigest != .zero { flags |= Flag.rowDigest }
            if let digest = entry.contentDigest {
                flags |= Flag.entryDigest
                if digest == row.contentDigest { flags |= Flag.entryDigestIsRowDigest }
            }
            if entry.device != nil { flags |= Flag.device }
            if row.pack != nil { flags |= Flag.pack }
            out.append(flags)
            varint(row.recordOffset, into: &out)
            varint(row.firstReference, into: &out)
            varint(row.referenceCount, into: &out)
            if row.contentDigest != .zero { row.contentDigest.append(to: &out) }
            if let pack = row.pack { signed(Int64(truncatingIfNeeded: pack), into: &out) }
            out.append(entry.kind.rawValue)
            varint(UInt64(entry.permissions), into: &out)
            signed(entry.modificationTime.seconds, into: &out)
            varint(UInt64(entry.modificationTime.nanoseconds), into: &out)
            varint(entry.size, into: &out)
            varint(UInt64(entry.userID), into: &out)
            varint(UInt64(entry.groupID), into: &out)
            signed(Int64(truncatingIfNeeded: entry.chunkCount), into: &out)
            bytes(entry.pathBytes, into: &out)
            bytes(entry.linkTarget, into: &out)
            varint(UInt64(entry.extendedAttributes.count), into: &out)
            for attribute in entry.extendedAttributes {
                bytes(attribute.name, into: &out)
                bytes(attribute.value, into: &out)
            }
            if let digest = entry.contentDigest, digest != row.contentDigest { digest.append(to: &out) }
            if let device = entry.device {
                varint(UInt64(device.major), into: &out)
                varint(UInt64(device.minor), into: &out)
            }
        }

        @inline(__always) private static func varint(_ value: UInt64, into out: inout [UInt8]) {
            var v = value
            while v >= 0x80 {
                out.append(UInt8(truncatingIfNeeded: v) | 0x80)
                v >>= 7
            }
            out.append(UInt8(truncatingIfNeeded: v))
        }

        @inline(__always) private static func signed(_ value: Int64, into out: inout [UInt8]) {
            varint(UInt64(bitPattern: (value << 1) ^ (value >> 63)), into: &out)
        }

        private static func bytes(_ value: [UInt8], into out: inout [UInt8]) {
            varint(UInt64(value.count), into: &out)
            out.append(contentsOf: value)
        }

        /// The row encoded at `start` and the offset just after it. The bytes were written by
        /// ``encode(_:into:)``; reads past the end (which that never leaves) yield zeros.
        private static func decode(_ bytes: [UInt8], at start: Int) -> (row: EntryRow, end: Int) {
            bytes.withUnsafeBytes { raw in
                var c = Cursor(raw: raw, position: start)
                let flags = c.u8()
                let recordOffset = c.varint()
                let firstReference = c.varint()
                let referenceCount = c.varint()
                let rowDigest = flags & Flag.rowDigest != 0 ? c.digest() : .zero
                let pack = flags & Flag.pack != 0 ? Int(truncatingIfNeeded: c.signed()) : nil
                let kind = ArchiveEntry.Kind(rawValue: c.u8())
                let permissions = UInt32(truncatingIfNeeded: c.varint())
                let seconds = c.signed()
                let nanoseconds = UInt32(truncatingIfNeeded: c.varint())
                let size = c.varint()
                let userID = UInt32(truncatingIfNeeded: c.varint())
                let groupID = UInt32(truncatingIfNeeded: c.varint())
                let chunkCount = Int(truncatingIfNeeded: c.signed())
                let path = c.bytes()
                let linkTarget = c.bytes()
                let attributeCount = Int(truncatingIfNeeded: c.varint())
                var attributes: [ArchiveEntry.ExtendedAttribute] = []
                if attributeCount > 0 {
                    attributes.reserveCapacity(Swift.min(attributeCount, FormatLimits.maximumExtendedAttributes))
                    for _ in 0..<attributeCount where !c.isAtEnd {
                        let name = c.bytes()
                        attributes.append(ArchiveEntry.ExtendedAttribute(name: name, value: c.bytes()))
                    }
                }
                var entryDigest: Digest?
                if flags & Flag.entryDigest != 0 {
                    entryDigest = flags & Flag.entryDigestIsRowDigest != 0 ? rowDigest : c.digest()
                }
                var device: ArchiveEntry.Device?
                if flags & Flag.device != 0 {
                    let major = UInt32(truncatingIfNeeded: c.varint())
                    device = ArchiveEntry.Device(major: major, minor: UInt32(truncatingIfNeeded: c.varint()))
                }
                var time = Timestamp(seconds: seconds)
                time.nanoseconds = nanoseconds
                var entry = ArchiveEntry(
                    pathBytes: path, kind: kind, permissions: permissions, modificationTime: time, size: size, userID: userID,
                    groupID: groupID, linkTarget: linkTarget, extendedAttributes: attributes, device: device)
                entry.contentDigest = entryDigest
                entry.chunkCount = chunkCount
                let row = EntryRow(
                    recordOffset: recordOffset, firstReference: firstReference, referenceCount: referenceCount,
                    contentDigest: rowDigest, entry: entry, pack: pack)
                return (row, c.position)
            }
        }

        /// Reads what ``encode(_:into:)`` wrote; never past the buffer.
        private struct Cursor {
            let raw: UnsafeRawBufferPointer
            var position: Int

            var isAtEnd: Bool { position >= raw.count }

            @inline(__always) mutating func u8() -> UInt8 {
                guard position < raw.count else { return 0 }
                defer { position += 1 }
                return raw[position]
            }

            @inline(__always) mutating func varint() -> UInt64 {
                var value: UInt64 = 0
                var shift: UInt64 = 0
                while position < raw.count, shift < 64 {
                    let byte = raw[position]
                    position += 1
                    value |= UInt64(byte & 0x7F) << shift
                    if byte < 0x80 { break }
                    shift += 7
                }
                return value
            }

            @inline(__always) mutating func signed() -> Int64 {
                let v = varint()
                return Int64(bitPattern: (v >> 1) ^ (0 &- (v & 1)))
            }

            mutating func bytes() -> [UInt8] {
                let length = Int(truncatingIfNeeded: varint())
                guard length > 0 else { return [] }
                let end = Swift.min(raw.count, position + Swift.min(length, raw.count))
                defer { position = end }
                return Array(UnsafeRawBufferPointer(rebasing: raw[position..<end]))
            }

            mutating func digest() -> Digest {
                let end = Swift.min(raw.count, position + Digest.byteCount)
                defer { position = end }
                return Digest(bytes: UnsafeRawBufferPointer(rebasing: raw[position..<end])) ?? .zero
            }
        }
    }
}

extension Array {
    /// A copy with no spare capacity, or the array itself when it has none (`Array(_:)` of an
    /// array shares its buffer): for a table grown by doubling that stays in memory.
    package func withoutSpareCapacity() -> [Element] {
        guard capacity > count else { return self }
        var copy: [Element] = []
        copy.reserveCapacity(count)
        copy.append(contentsOf: self)
        return copy
    }
}
