/// Reads little-endian fields from a byte buffer, checking every length against the bytes that
/// remain before anything is copied or allocated.
///
/// Errors are `CairnError.corrupted` naming `what` and the absolute archive offset of the field.
package struct ByteReader {
    private let bytes: [UInt8]
    private(set) package var position: Int
    private let end: Int
    /// The archive offset of `bytes[0]`, for error messages.
    private let baseOffset: UInt64
    /// What is being read, for error messages ("entry record", ...).
    private let what: String

    package init(_ bytes: [UInt8], range: Range<Int>? = nil, baseOffset: UInt64, what: String) {
        self.bytes = bytes
        let r = range ?? 0..<bytes.count
        self.position = r.lowerBound
        self.end = r.upperBound
        self.baseOffset = baseOffset
        self.what = what
    }

    package var remaining: Int { end - position }
    package var isAtEnd: Bool { position >= end }

    package func error(_ message: String) -> CairnError {
        CairnError(.corrupted, "\(what): \(message)", offset: baseOffset &+ UInt64(position))
    }

    private mutating func need(_ n: Int, _ field: String) throws(CairnError) {
        guard n >= 0, remaining >= n else {
            throw error("\(field) runs past the end of the record (\(n) bytes needed, \(remaining) left)")
        }
    }

    package mutating func u8(_ field: String) throws(CairnError) -> UInt8 {
        try need(1, field)
        defer { position += 1 }
        return bytes[position]
    }

    package mutating func u16(_ field: String) throws(CairnError) -> UInt16 {
        UInt16(truncatingIfNeeded: try integer(2, field))
    }

    package mutating func u32(_ field: String) throws(CairnError) -> UInt32 {
        UInt32(truncatingIfNeeded: try integer(4, field))
    }

    package mutating func u64(_ field: String) throws(CairnError) -> UInt64 {
        try integer(8, field)
    }

    package mutating func i64(_ field: String) throws(CairnError) -> Int64 {
        Int64(bitPattern: try integer(8, field))
    }

    private mutating func integer(_ width: Int, _ field: String) throws(CairnError) -> UInt64 {
        try need(width, field)
        var value: UInt64 = 0
        for i in 0..<width {
            value |= UInt64(bytes[position + i]) << (8 * UInt64(i))
        }
        position += width
        return value
    }

    package mutating func skip(_ n: Int, _ field: String) throws(CairnError) {
        try need(n, field)
        position += n
    }

    package mutating func raw(_ n: Int, _ field: String) throws(CairnError) -> [UInt8] {
        try need(n, field)
        defer { position += n }
        return Array(bytes[position..<(position + n)])
    }

    package mutating func digest(_ field: String) throws(CairnError) -> Digest {
        try need(32, field)
        let value = bytes.withUnsafeBytes { Digest(bytes: UnsafeRawBufferPointer(rebasing: $0[position..<(position + 32)])) }
        guard let value else { throw error("\(field) is not 32 bytes") }
        position += 32
        return value
    }

    /// A `u16`-prefixed byte string of at most `limit` bytes.
    package mutating func string16(_ field: String, limit: Int) throws(CairnError) -> [UInt8] {
        let n = Int(try u16(field))
        guard n <= limit else { throw error("\(field) is \(n) bytes, over the limit of \(limit)") }
        return try raw(n, field)
    }

    /// A `u32`-prefixed byte string of at most `limit` bytes.
    package mutating func string32(_ field: String, limit: Int) throws(CairnError) -> [UInt8] {
        let n = UInt64(try u32(field))
        guard n <= UInt64(limit) else { throw error("\(field) is \(n) bytes, over the limit of \(limit)") }
        return try raw(Int(n), field)
    }
}

extension ByteReader {
    /// An unsigned LEB128 varint (§1.3): at most 10 bytes and 64 bits, in its shortest form (a
    /// last byte of zero after the first is `corrupted`, so every value has one encoding).
    package mutating func varint(_ field: String) throws(CairnError) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let byte = try u8(field)
            if shift == 63, byte > 1 { throw error("\(field) does not fit 64 bits") }
            value |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 {
                if byte == 0, shift > 0 { throw error("\(field) is not in its shortest form") }
                return value
            }
            shift += 7
        }
    }

    /// A varint of at most `limit`.
    package mutating func varint(_ field: String, limit: UInt64) throws(CairnError) -> UInt64 {
        let value = try varint(field)
        guard value <= limit else { throw error("\(field) is \(value), over the limit of \(limit)") }
        return value
    }

    /// A varint that is an `Int` of at most `limit`.
    package mutating func count(_ field: String, limit: Int) throws(CairnError) -> Int {
        Int(try varint(field, limit: UInt64(max(0, limit))))
    }

    /// A zigzag varint (§1.3).
    package mutating func signedVarint(_ field: String) throws(CairnError) -> Int64 {
        let v = try varint(field)
        return Int64(bitPattern: v >> 1) ^ -Int64(bitPattern: v & 1)
    }

    /// A varint-prefixed byte string of at most `limit` bytes.
    package mutating func varintBytes(_ field: String, limit: Int) throws(CairnError) -> [UInt8] {
        let n = try count(field, limit: limit)
        return try raw(n, field)
    }
}
