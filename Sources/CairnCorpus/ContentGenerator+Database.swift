import Cairn
import Glibc

/// SQLite-like database files: 4 KiB pages laid out like SQLite's (a 100-byte file header on page
/// 1, b-tree leaf and interior page headers, cell pointer arrays, records packed from the end of
/// the page), and a write-ahead log whose frames are slightly edited copies of the database's
/// pages. Not openable by SQLite; shaped like it, which is what matters to chunking and
/// compression.
extension ContentGenerator {
    static let pageSize = 4096
    static let walHeaderSize = 32
    static let walFrameHeaderSize = 24

    private static let kinds: [StaticString] = [
        "com.example.notes.item", "com.example.notes.attachment", "com.example.sync.change",
        "com.example.media.asset",
    ]

    /// Fills the current file with database pages (the last one cut short if the size is not a
    /// multiple of 4 KiB).
    func database(_ rng: inout SplitMix64, table: StaticString) {
        let pageCount = (writer.remaining + Self.pageSize - 1) / Self.pageSize
        let page = PageBuffer()
        var rowid: UInt64 = 1
        for number in 1...max(1, pageCount) {
            page.clear()
            if number == 1 {
                headerPage(page, pageCount: pageCount, table: table, &rng)
            } else if number % 64 == 2 {
                interiorPage(page, firstRowid: rowid, &rng)
            } else if rng.below(32) == 0 {
                // A free page: all zeros.
            } else {
                rowid = leafPage(page, start: 0, firstRowid: rowid, &rng)
            }
            writer.append(page.bytes)
        }
    }

    /// Fills the current file with a write-ahead log of `frames` frames, each a copy of a random
    /// page of the database at `databasePath` (already written) with a few bytes changed.
    func writeAheadLog(_ rng: inout SplitMix64, databasePath: String, databasePages: Int) throws(CairnError) {
        let fd = open(databasePath, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Errno.current.error("cannot open", path: databasePath) }
        defer { close(fd) }
        let page = PageBuffer()
        let salt1 = UInt32(truncatingIfNeeded: rng.next())
        let salt2 = UInt32(truncatingIfNeeded: rng.next())
        page.clear()
        page.put32(0x377F_0682, at: 0)
        page.put32(3_007_000, at: 4)
        page.put32(UInt32(Self.pageSize), at: 8)
        page.put32(0, at: 12)
        page.put32(salt1, at: 16)
        page.put32(salt2, at: 20)
        page.put32(UInt32(truncatingIfNeeded: rng.next()), at: 24)
        page.put32(UInt32(truncatingIfNeeded: rng.next()), at: 28)
        writer.append(UnsafeRawBufferPointer(rebasing: page.bytes[0..<Self.walHeaderSize]))
        var frame = 0
        while writer.remaining > 0 {
            frame += 1
            let number = 1 + rng.below(max(1, databasePages))
            page.clear()
            page.put32(UInt32(number), at: 0)
            page.put32(frame % 8 == 0 ? UInt32(databasePages) : 0, at: 4)
            page.put32(salt1, at: 8)
            page.put32(salt2, at: 12)
            page.put32(UInt32(truncatingIfNeeded: rng.next()), at: 16)
            page.put32(UInt32(truncatingIfNeeded: rng.next()), at: 20)
            writer.append(UnsafeRawBufferPointer(rebasing: page.bytes[0..<Self.walFrameHeaderSize]))
            let n = pread(fd, page.pointer, Self.pageSize, off_t((number - 1) * Self.pageSize))
            guard n >= 0 else { throw Errno.current.error("cannot read", path: databasePath) }
            // An updated row: a few bytes in the cell area change.
            for _ in 0..<3 {
                let offset = 2048 + rng.below(2040)
                page.put32(UInt32(truncatingIfNeeded: rng.next()), at: offset)
            }
            writer.append(page.bytes)
        }
    }

    // MARK: - Pages

    private func headerPage(_ page: PageBuffer, pageCount: Int, table: StaticString, _ rng: inout SplitMix64) {
        page.put("SQLite format 3\0", at: 0)
        page.put16(UInt16(Self.pageSize), at: 16)
        page.put8(1, at: 18)
        page.put8(1, at: 19)
        page.put8(0, at: 20)
        page.put8(64, at: 21)
        page.put8(32, at: 22)
        page.put8(32, at: 23)
        let changes = UInt32(1 + rng.below(5000))
        page.put32(changes, at: 24)
        page.put32(UInt32(pageCount), at: 28)
        page.put32(UInt32(1 + rng.below(40)), at: 40)
        page.put32(4, at: 44)
        page.put32(1, at: 56)
        page.put32(changes, at: 92)
        page.put32(3_042_000, at: 96)
        // The schema table: a leaf page (after the file header) holding CREATE statements.
        var cells: [[UInt8]] = []
        for (i, name) in [table, "sync_state", "attachments"].enumerated() {
            var sql = Array("CREATE TABLE ".utf8)
            name.withUTF8Buffer { sql += $0 }
            sql += Array(
                "(id INTEGER PRIMARY KEY, owner_id INTEGER, kind TEXT, title TEXT, body TEXT, modified REAL, status INTEGER)"
                    .utf8)
            var payload: [UInt8] = []
            let types: [UInt64] = [23, 23, 23, 1, UInt64(13 + 2 * sql.count)]
            var header: [UInt8] = []
            for t in types { header += Self.varint(t) }
            payload += Self.varint(UInt64(header.count + 1)) + header
            payload += Array("table".utf8)
            payload += Array("table".utf8)
            name.withUTF8Buffer { payload += $0.prefix(5) }
            payload.append(UInt8(i + 2))
            payload += sql
            cells.append(Self.varint(UInt64(payload.count)) + Self.varint(UInt64(i + 1)) + payload)
        }
        var contentStart = Self.pageSize
        for (i, cell) in cells.enumerated() {
            contentStart -= cell.count
            cell.withUnsafeBytes { page.pointer.advanced(by: contentStart).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            page.put16(UInt16(contentStart), at: 108 + 2 * i)
        }
        page.put8(0x0D, at: 100)
        page.put16(UInt16(cells.count), at: 103)
        page.put16(UInt16(contentStart), at: 105)
    }

    /// An interior table page: child page numbers and separating rowids.
    private func interiorPage(_ page: PageBuffer, firstRowid: UInt64, _ rng: inout SplitMix64) {
        var pointerEnd = 12
        var contentStart = Self.pageSize
        var rowid = firstRowid
        var child = UInt32(3 + rng.below(64))
        var count = 0
        while count < 200 {
            var cell = [UInt8](repeating: 0, count: 4)
            cell[0] = UInt8(child >> 24)
            cell[1] = UInt8(truncatingIfNeeded: child >> 16)
            cell[2] = UInt8(truncatingIfNeeded: child >> 8)
            cell[3] = UInt8(truncatingIfNeeded: child)
            cell += Self.varint(rowid)
            guard pointerEnd + 2 + cell.count <= contentStart else { break }
            contentStart -= cell.count
            cell.withUnsafeBytes { page.pointer.advanced(by: contentStart).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            page.put16(UInt16(contentStart), at: pointerEnd)
            pointerEnd += 2
            count += 1
            rowid += UInt64(8 + rng.below(24))
            child += 1
        }
        page.put8(0x05, at: 0)
        page.put16(UInt16(count), at: 3)
        page.put16(UInt16(contentStart), at: 5)
        page.put32(child, at: 8)
    }

    /// A leaf table page full of rows; returns the next rowid.
    private func leafPage(_ page: PageBuffer, start: Int, firstRowid: UInt64, _ rng: inout SplitMix64) -> UInt64 {
        var pointerEnd = start + 8
        var contentStart = Self.pageSize
        var rowid = firstRowid
        var count = 0
        let cell = page.scratch
        while true {
            let (start, length) = row(into: cell, rowid: rowid, &rng)
            guard pointerEnd + 2 + length <= contentStart else { break }
            contentStart -= length
            page.pointer.advanced(by: contentStart).copyMemory(from: cell + start, byteCount: length)
            page.put16(UInt16(contentStart), at: pointerEnd)
            pointerEnd += 2
            count += 1
            rowid += 1
        }
        page.put8(0x0D, at: start)
        page.put16(UInt16(count), at: start + 3)
        page.put16(UInt16(contentStart), at: start + 5)
        return rowid
    }

    /// Encodes one row as a table b-tree leaf cell in `cell`; returns where it starts and its
    /// length (< 1024).
    private func row(into cell: UnsafeMutableRawPointer, rowid: UInt64, _ rng: inout SplitMix64) -> (start: Int, length: Int) {
        // The columns go at a fixed offset, then the cell header in front of them.
        let body = cell + 64
        var length = 0
        @inline(__always) func put(_ word: UnsafeRawBufferPointer) {
            // Words are at most 16 bytes with 16 readable: two 8-byte copies.
            let source = word.baseAddress!
            (body + length).storeBytes(of: source.loadUnaligned(as: UInt64.self), as: UInt64.self)
            (body + length + 8).storeBytes(of: source.loadUnaligned(fromByteOffset: 8, as: UInt64.self), as: UInt64.self)
            length += word.count
        }
        @inline(__always) func space() {
            body.storeBytes(of: 0x20, toByteOffset: length, as: UInt8.self)
            length += 1
        }
        let kind = Self.kinds[rng.below(Self.kinds.count)]
        kind.withUTF8Buffer { (body + length).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        length += kind.utf8CodeUnitCount
        let kindLength = length
        // title: 2 to 6 words
        var bits = rng.next()
        let titleWords = 2 + Int(bits & 3) + Int((bits >> 2) & 1)
        bits >>= 3
        for i in 0..<titleWords {
            if i > 0 { space() }
            put(vocabulary.word(Vocabulary.skewedIndex(bits), capitalised: i == 0))
            bits >>= 14
        }
        let titleLength = length - kindLength
        // body: 0 to 23 words
        let bodyWords = rng.below(24)
        bits = rng.next()
        for i in 0..<bodyWords {
            if i % 4 == 3 { bits = rng.next() }
            if i > 0 { space() }
            put(vocabulary.word(Vocabulary.skewedIndex(bits)))
            bits >>= 14
        }
        let bodyLength = length - kindLength - titleLength
        // owner_id (4 bytes), modified (8 bytes), status (1 byte), big-endian as in SQLite
        body.storeBytes(of: UInt32(1 + rng.below(40)).bigEndian, toByteOffset: length, as: UInt32.self)
        length += 4
        let modified = (1_600_000_000.0 + Double(rng.below(100_000_000)) + rng.unit()).bitPattern
        body.storeBytes(of: modified.bigEndian, toByteOffset: length, as: UInt64.self)
        length += 8
        body.storeBytes(of: UInt8(rng.below(4)), toByteOffset: length, as: UInt8.self)
        length += 1
        // The record header: size, then serial types NULL (rowid alias), int32, kind, title, body,
        // real, int8. (The column bytes above are in a different order; a look-alike is enough.)
        let kindType = UInt64(13 + 2 * kindLength)
        let titleType = UInt64(13 + 2 * titleLength)
        let bodyType = UInt64(13 + 2 * bodyLength)
        let headerSize = 1 + 4 + Self.varintLength(kindType) + Self.varintLength(titleType) + Self.varintLength(bodyType)
        let payloadLength = UInt64(headerSize + length)
        let prefixLength = Self.varintLength(payloadLength) + Self.varintLength(rowid) + headerSize
        let start = 64 - prefixLength
        var p = cell + start
        p += Self.putVarint(payloadLength, at: p)
        p += Self.putVarint(rowid, at: p)
        p += Self.putVarint(UInt64(headerSize), at: p)
        p.storeBytes(of: 0, toByteOffset: 0, as: UInt8.self)
        p.storeBytes(of: 4, toByteOffset: 1, as: UInt8.self)
        p += 2
        p += Self.putVarint(kindType, at: p)
        p += Self.putVarint(titleType, at: p)
        p += Self.putVarint(bodyType, at: p)
        p.storeBytes(of: 7, toByteOffset: 0, as: UInt8.self)
        p.storeBytes(of: 1, toByteOffset: 1, as: UInt8.self)
        return (start, prefixLength + length)
    }

    static func varintLength(_ value: UInt64) -> Int {
        var n = 1
        var v = value >> 7
        while v > 0 {
            n += 1
            v >>= 7
        }
        return n
    }

    /// Writes `value` as a varint at `p`; returns its length.
    static func putVarint(_ value: UInt64, at p: UnsafeMutableRawPointer) -> Int {
        let n = varintLength(value)
        for i in 0..<n {
            let group = UInt8(truncatingIfNeeded: value >> (7 * UInt64(n - 1 - i))) & 0x7F
            p.storeBytes(of: i < n - 1 ? group | 0x80 : group, toByteOffset: i, as: UInt8.self)
        }
        return n
    }

    /// SQLite's varint: big-endian groups of 7 bits, high bit set on all but the last byte.
    static func varint(_ value: UInt64) -> [UInt8] {
        var groups: [UInt8] = [UInt8(value & 0x7F)]
        var v = value >> 7
        while v > 0 {
            groups.append(UInt8(v & 0x7F) | 0x80)
            v >>= 7
        }
        return groups.reversed()
    }
}

/// One 4 KiB page, plus a scratch area for building a cell, in memory owned by this class.
final class PageBuffer {
    let pointer = UnsafeMutableRawPointer.allocate(byteCount: ContentGenerator.pageSize, alignment: 16)
    let scratch = UnsafeMutableRawPointer.allocate(byteCount: 2048, alignment: 16)

    deinit {
        pointer.deallocate()
        scratch.deallocate()
    }

    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: pointer, count: ContentGenerator.pageSize) }

    func clear() { pointer.initializeMemory(as: UInt8.self, repeating: 0, count: ContentGenerator.pageSize) }

    func put8(_ value: UInt8, at offset: Int) { pointer.storeBytes(of: value, toByteOffset: offset, as: UInt8.self) }

    /// Big-endian, as SQLite stores integers.
    func put16(_ value: UInt16, at offset: Int) { pointer.storeBytes(of: value.bigEndian, toByteOffset: offset, as: UInt16.self) }

    func put32(_ value: UInt32, at offset: Int) { pointer.storeBytes(of: value.bigEndian, toByteOffset: offset, as: UInt32.self) }

    func put(_ text: StaticString, at offset: Int) {
        text.withUTF8Buffer { (pointer + offset).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
    }
}
