internal import CZlib

/// CRC-32/ISO-HDLC (polynomial 0x04C11DB7 reflected, initial and final XOR 0xFFFFFFFF), the
/// checksum of RFC 1952 (gzip) and ISO 3309, computed by zlib's `crc32_z`.
package enum CRC32 {
    /// Returns the CRC-32 of `buffer`, continuing from the CRC of the bytes before it.
    ///
    /// `checksum(b, continuing: checksum(a))` equals the checksum of `a` followed by `b`.
    ///
    /// - Parameters:
    ///   - buffer: The bytes to add; may be empty.
    ///   - crc: The CRC-32 of the preceding bytes; 0 to start.
    /// - Returns: The CRC-32 of the preceding bytes followed by `buffer`.
    /// - Complexity: O(n); about 4 GB/s.
    package static func checksum(_ buffer: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        // zlib answers 0 for a null buffer, which would lose `crc`.
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return crc }
        let result = crc32_z(uLong(crc), base.assumingMemoryBound(to: Bytef.self), z_size_t(buffer.count))
        return UInt32(truncatingIfNeeded: result)
    }

    /// Returns the CRC-32 of `bytes`, continuing from `crc`.
    package static func checksum(_ bytes: [UInt8], continuing crc: UInt32 = 0) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0, continuing: crc) }
    }
}
