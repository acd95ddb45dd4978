/// Appends little-endian fixed-width integers and length-prefixed byte strings to a `[UInt8]`.
///
/// The encoding rules are those of `Spec/0001-container-format.md §1.3`.
package struct ByteWriter {
    package var bytes: [UInt8]

    package init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    @inline(__always) package mutating func u8(_ v: UInt8) { bytes.append(v) }
    @inline(__always) package mutating func u16(_ v: UInt16) { append(littleEndian: v) }
    @inline(__always) package mutating func u32(_ v: UInt32) { append(littleEndian: v) }
    @inline(__always) package mutating func u64(_ v: UInt64) { append(littleEndian: v) }
    @inline(__always) package mutating func i64(_ v: Int64) { append(littleEndian: UInt64(bitPattern: v)) }

    @inline(__always) package mutating func zeros(_ count: Int) {
        bytes.append(contentsOf: repeatElement(0, count: count))
    }

    package mutating func raw(_ v: [UInt8]) { bytes.append(contentsOf: v) }

    package mutating func digest(_ d: Digest) { d.append(to: &bytes) }

    /// A byte string with a `u16` length prefix. The caller has checked the length limit.
    package mutating func string16(_ v: [UInt8]) {
        u16(UInt16(truncatingIfNeeded: v.count))
        bytes.append(contentsOf: v)
    }

    /// A byte string with a `u32` length prefix. The caller has checked the length limit.
    package mutating func string32(_ v: [UInt8]) {
        u32(UInt32(truncatingIfNeeded: v.count))
        bytes.append(contentsOf: v)
    }

    @inline(__always) private mutating func append<T: FixedWidthInteger>(littleEndian v: T) {
        withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) }
    }
}

extension ByteWriter {
    /// An unsigned LEB128 varint: 7 bits per byte, least significant first, high bit set on every
    /// byte but the last; 1 to 10 bytes (`Spec/0001-container-format.md §1.3`).
    @inline(__always) package mutating func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(truncatingIfNeeded: v))
    }

    /// A signed value as a zigzag varint: `0, -1, 1, -2, ...` become `0, 1, 2, 3, ...`.
    @inline(__always) package mutating func signedVarint(_ value: Int64) {
        varint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    /// A byte string with a varint length prefix. The caller has checked the length limit.
    package mutating func varintBytes(_ v: [UInt8]) {
        varint(UInt64(v.count))
        bytes.append(contentsOf: v)
    }
}
