/// Bech32 (BIP 173), the text form of age's X25519 recipients (`age1…`) and identities
/// (`AGE-SECRET-KEY-1…`) (`Spec/0004-trusted-archives.md §6.4.2`).
///
/// As age uses it, without BIP 173's limit of 90 characters: a string is all lowercase or all
/// uppercase, and its checksum is computed over the lowercase form. The checksum is BCH code
/// arithmetic on 5-bit values, not a cryptographic primitive.
package enum Bech32 {
    /// The 32 characters of the data part, by value.
    private static let alphabet: [UInt8] = Array("qpzry9x8gf2tvdw0s3jn54khce6mua7l".utf8)
    /// The generator of BIP 173's checksum.
    private static let generator: [UInt32] = [0x3b6a_57b2, 0x2650_8e6d, 0x1ea1_19fa, 0x3d42_33dd, 0x2a14_62b3]
    /// The number of characters of the checksum.
    private static let checksumCount = 6

    /// A decoded string: its human-readable part as written (upper- or lowercase) and its data
    /// as 5-bit values, the checksum removed.
    package struct Decoded: Equatable, Sendable {
        package var humanReadablePart: String
        package var values: [UInt8]
    }

    /// `hrp`, `1`, `values` (5-bit, each below 32) and the checksum, lowercase, or uppercase
    /// when `uppercase`.
    package static func encode(humanReadablePart hrp: String, values: [UInt8], uppercase: Bool) -> String {
        let lowerHRP = hrp.lowercased()
        let checksum = polymod(expand(Array(lowerHRP.utf8)) + values + [UInt8](repeating: 0, count: checksumCount)) ^ 1
        let checkValues = (0..<checksumCount).map { UInt8((checksum >> (5 * (5 - $0))) & 31) }
        let text = lowerHRP + "1" + String(decoding: (values + checkValues).map { alphabet[Int($0 & 31)] }, as: UTF8.self)
        return uppercase ? text.uppercased() : text
    }

    /// `bytes` with their bits regrouped into 5-bit values (the last one padded with zero bits),
    /// then encoded: what age writes for a key.
    package static func encode(humanReadablePart hrp: String, bytes: [UInt8], uppercase: Bool) -> String {
        encode(humanReadablePart: hrp, values: regroup(bytes), uppercase: uppercase)
    }

    /// The human-readable part and 5-bit values of a Bech32 string, checksum verified.
    ///
    /// - Throws: ``CairnError`` with code `.invalidArgument` saying why: mixed case, a character
    ///   outside US-ASCII 33–126, no `1` separator, an empty human-readable part, fewer than 6
    ///   data characters, a character outside the data alphabet, or a checksum that does not match.
    package static func decode(_ text: String) throws(CairnError) -> Decoded {
        let characters = Array(text.utf8)
        guard characters.allSatisfy({ (33...126).contains($0) }) else {
            throw CairnError(.invalidArgument, "not Bech32: a character outside US-ASCII 33-126")
        }
        let hasLower = characters.contains { (97...122).contains($0) }
        let hasUpper = characters.contains { (65...90).contains($0) }
        guard !(hasLower && hasUpper) else { throw CairnError(.invalidArgument, "not Bech32: mixed upper and lower case") }
        let lower = characters.map { (65...90).contains($0) ? $0 + 32 : $0 }
        guard let separator = lower.lastIndex(of: UInt8(ascii: "1")) else {
            throw CairnError(.invalidArgument, "not Bech32: no separator '1'")
        }
        guard separator > 0 else { throw CairnError(.invalidArgument, "not Bech32: empty human-readable part") }
        guard lower.count - separator - 1 >= checksumCount else {
            throw CairnError(.invalidArgument, "not Bech32: the data part is shorter than the 6-character checksum")
        }
        var values: [UInt8] = []
        values.reserveCapacity(lower.count - separator - 1)
        for character in lower[(separator + 1)...] {
            guard let value = alphabet.firstIndex(of: character) else {
                // The character is not named: the text may be a secret key.
                throw CairnError(.invalidArgument, "not Bech32: a character after the '1' is outside the data alphabet")
            }
            values.append(UInt8(value))
        }
        guard polymod(expand(Array(lower[..<separator])) + values) == 1 else {
            throw CairnError(.invalidArgument, "not Bech32: the checksum does not match (a character was mistyped or lost)")
        }
        return Decoded(
            humanReadablePart: String(decoding: characters[..<separator], as: UTF8.self),
            values: Array(values.dropLast(checksumCount)))
    }

    /// 5-bit values regrouped into bytes, or nil when more than 4 bits are left over or the
    /// left-over bits are not zero (BIP 173's `convertbits` without padding).
    package static func bytes(fromValues values: [UInt8]) -> [UInt8]? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(values.count * 5 / 8)
        var accumulator: UInt32 = 0
        var bitCount = 0
        for value in values {
            guard value < 32 else { return nil }
            accumulator = (accumulator << 5 | UInt32(value)) & 0xFFF
            bitCount += 5
            if bitCount >= 8 {
                bitCount -= 8
                bytes.append(UInt8((accumulator >> UInt32(bitCount)) & 0xFF))
            }
        }
        guard bitCount < 5, accumulator & ((1 << UInt32(bitCount)) - 1) == 0 else { return nil }
        return bytes
    }

    /// Bytes regrouped into 5-bit values, the last padded with zero bits.
    private static func regroup(_ bytes: [UInt8]) -> [UInt8] {
        var values: [UInt8] = []
        values.reserveCapacity((bytes.count * 8 + 4) / 5)
        var accumulator: UInt32 = 0
        var bitCount = 0
        for byte in bytes {
            accumulator = (accumulator << 8 | UInt32(byte)) & 0xFFF
            bitCount += 8
            while bitCount >= 5 {
                bitCount -= 5
                values.append(UInt8((accumulator >> UInt32(bitCount)) & 31))
            }
        }
        if bitCount > 0 { values.append(UInt8((accumulator << UInt32(5 - bitCount)) & 31)) }
        return values
    }

    /// BIP 173's `bech32_hrp_expand`: the high bits of each character, a zero, the low bits.
    private static func expand(_ hrp: [UInt8]) -> [UInt8] {
        hrp.map { $0 >> 5 } + [0] + hrp.map { $0 & 31 }
    }

    /// BIP 173's `bech32_polymod` over 5-bit values.
    private static func polymod(_ values: [UInt8]) -> UInt32 {
        var checksum: UInt32 = 1
        for value in values {
            let top = checksum >> 25
            checksum = (checksum & 0x1FF_FFFF) << 5 ^ UInt32(value)
            for bit in 0..<5 where (top >> UInt32(bit)) & 1 == 1 {
                checksum ^= generator[bit]
            }
        }
        return checksum
    }
}
