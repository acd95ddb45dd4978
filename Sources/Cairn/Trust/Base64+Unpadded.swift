internal import CSodium

/// Standard base64 without `=` padding (RFC 4648 §4 and §3.2), as age v1 writes it
/// (`Spec/0004-trusted-archives.md §6.4.1`), through libsodium's
/// `sodium_base64_VARIANT_ORIGINAL_NO_PADDING`.
extension Base64 {
    /// `bytes` as unpadded standard base64 (canonical: unused low bits of the last character
    /// are zero).
    package static func encodeUnpadded(_ bytes: [UInt8]) -> String {
        encode(bytes, variant: Int32(sodium_base64_VARIANT_ORIGINAL_NO_PADDING))
    }

    /// The bytes `characters` encode, only when they are canonical unpadded standard base64
    /// (RFC 4648 §3.5: no `=`, no character outside the alphabet, unused low bits zero, no
    /// length of 1 modulo 4); nil otherwise.
    ///
    /// - Parameter count: the number of bytes expected, or nil for any. Nothing larger than
    ///   `characters.count * 3 / 4` bytes is allocated.
    package static func decodeUnpadded(_ characters: ArraySlice<UInt8>, count: Int? = nil) -> [UInt8]? {
        // Every 4 characters are 3 bytes; 2 or 3 characters left over are 1 or 2 bytes.
        let remainder = characters.count % 4
        guard remainder != 1 else { return nil }
        let expected = characters.count / 4 * 3 + (remainder == 0 ? 0 : remainder - 1)
        if let count, count != expected { return nil }
        guard expected > 0 else { return [] }
        guard (try? Sodium.ready()) != nil else { return nil }
        var bytes = [UInt8](repeating: 0, count: expected)
        var decoded = 0
        // With no `end` pointer libsodium fails on any character outside the alphabet, and
        // it fails on non-zero leftover bits.
        let status = characters.withUnsafeBufferPointer { source in
            source.withMemoryRebound(to: CChar.self) { chars in
                sodium_base642bin(
                    &bytes, expected, chars.baseAddress, chars.count, nil, &decoded, nil,
                    Int32(sodium_base64_VARIANT_ORIGINAL_NO_PADDING))
            }
        }
        guard status == 0, decoded == expected else { return nil }
        return bytes
    }
}
