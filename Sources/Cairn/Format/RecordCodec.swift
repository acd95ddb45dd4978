/// Frames and unframes records (`Spec/0001-container-format.md §3`):
///
/// ```
/// type u8 | flags u8 | reserved u16 = 0 | length u32 | payload[length] | crc32 u32
/// ```
/// The CRC-32 (zlib's, RFC 1952) covers the 8 header bytes and the payload.
package enum RecordCodec {
    /// The decoded fixed part of a record.
    package struct Header: Sendable {
        package var typeByte: UInt8
        package var flags: UInt8
        package var length: Int
        package var type: RecordType? { RecordType(rawValue: typeByte) }
        package var isSkippable: Bool { flags & RecordFraming.skippableFlag != 0 }
        /// Total framed size: header, payload and CRC.
        package var framedLength: Int { RecordFraming.overhead + length }
    }

    /// Appends a record header with a zero length to `out` and returns where it starts;
    /// finish with ``endRecord(startingAt:in:)``.
    package static func beginRecord(_ type: RecordType, flags: UInt8 = 0, in out: inout [UInt8]) -> Int {
        let start = out.count
        out.append(type.rawValue)
        out.append(flags)
        out.append(contentsOf: [0, 0, 0, 0, 0, 0])
        return start
    }

    /// Patches the length of the record begun at `start` and appends its CRC-32.
    package static func endRecord(startingAt start: Int, in out: inout [UInt8]) {
        let length = UInt32(truncatingIfNeeded: out.count - start - RecordFraming.headerLength)
        out[start + 4] = UInt8(truncatingIfNeeded: length)
        out[start + 5] = UInt8(truncatingIfNeeded: length >> 8)
        out[start + 6] = UInt8(truncatingIfNeeded: length >> 16)
        out[start + 7] = UInt8(truncatingIfNeeded: length >> 24)
        let crc = out.withUnsafeBytes { CRC32.checksum(UnsafeRawBufferPointer(rebasing: $0[start...])) }
        withUnsafeBytes(of: crc.littleEndian) { out.append(contentsOf: $0) }
    }

    /// Appends a whole record with `payload`.
    package static func append(_ type: RecordType, payload: [UInt8], flags: UInt8 = 0, to out: inout [UInt8]) {
        let start = beginRecord(type, flags: flags, in: &out)
        out.append(contentsOf: payload)
        endRecord(startingAt: start, in: &out)
    }

    /// Parses and checks the 8-byte record header at `bytes[at...]`.
    ///
    /// - Throws: `.corrupted` for a non-zero reserved field or a length over
    ///   ``FormatLimits/maximumRecordPayload``, naming `offset`.
    package static func parseHeader(_ bytes: UnsafeRawBufferPointer, offset: UInt64) throws(CairnError) -> Header {
        guard bytes.count >= RecordFraming.headerLength else {
            throw CairnError(.truncated, "record header is cut off", offset: offset)
        }
        let type = bytes[0]
        let flags = bytes[1]
        let reserved = UInt16(bytes[2]) | UInt16(bytes[3]) << 8
        let length = UInt32(bytes[4]) | UInt32(bytes[5]) << 8 | UInt32(bytes[6]) << 16 | UInt32(bytes[7]) << 24
        guard type != 0 else { throw CairnError(.corrupted, "record type 0 is not valid", offset: offset) }
        guard reserved == 0, flags & ~RecordFraming.skippableFlag == 0 else {
            throw CairnError(.corrupted, "record header has reserved bits set", offset: offset)
        }
        guard length <= UInt32(FormatLimits.maximumRecordPayload) else {
            throw CairnError(
                .limitExceeded, "record declares \(length) payload bytes, over the limit of \(FormatLimits.maximumRecordPayload)",
                offset: offset)
        }
        return Header(typeByte: type, flags: flags, length: Int(length))
    }

    /// Checks the CRC-32 of a whole framed record in `bytes` (header, payload, CRC).
    package static func checkCRC(_ bytes: UnsafeRawBufferPointer, offset: UInt64) throws(CairnError) {
        let bodyLength = bytes.count - RecordFraming.trailerLength
        guard bodyLength >= RecordFraming.headerLength else {
            throw CairnError(.truncated, "record is cut off", offset: offset)
        }
        let computed = CRC32.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<bodyLength]))
        let stored =
            UInt32(bytes[bodyLength]) | UInt32(bytes[bodyLength + 1]) << 8 | UInt32(bytes[bodyLength + 2]) << 16
            | UInt32(bytes[bodyLength + 3]) << 24
        guard computed == stored else {
            let type = RecordType(rawValue: bytes[0])?.name ?? "type-\(bytes[0])"
            throw CairnError(.checksumMismatch, "\(type) record fails its CRC-32 check (torn or corrupted)", offset: offset)
        }
    }
}
