internal import CSodium

/// Standard base64 (RFC 4648 §4, with `=` padding), the text form of minisign's keys and
/// signatures, through libsodium's `sodium_bin2base64` and `sodium_base642bin`.
package enum Base64 {
    /// `bytes` as padded standard base64.
    package static func encode(_ bytes: [UInt8]) -> String {
        encode(bytes, variant: Int32(sodium_base64_VARIANT_ORIGINAL))
    }

    /// `bytes` in libsodium's base64 `variant` (padded or not, standard or URL-safe alphabet).
    static func encode(_ bytes: [UInt8], variant: Int32) -> String {
        let length = sodium_base64_encoded_len(bytes.count, variant)
        var text = [CChar](repeating: 0, count: length)
        _ = bytes.withUnsafeBufferPointer { source in
            sodium_bin2base64(&text, length, source.baseAddress, source.count, variant)
        }
        // `length` counts the terminating NUL.
        return String(decoding: text.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The bytes `text` encodes, only when it is padded standard base64 of exactly `count` bytes
    /// with nothing else in it (no spaces, no line breaks); nil otherwise.
    ///
    /// At most `count` bytes are allocated, whatever `text` holds.
    package static func decode(_ text: Substring, count: Int) -> [UInt8]? {
        let characters = Array(text.utf8)
        // 4 characters per 3 bytes, padded: anything longer cannot decode to `count` bytes.
        guard characters.count == (count + 2) / 3 * 4, (try? Sodium.ready()) != nil else { return nil }
        var bytes = [UInt8](repeating: 0, count: count)
        var decoded = 0
        var end: UnsafePointer<CChar>?
        let status = characters.withUnsafeBufferPointer { source in
            source.withMemoryRebound(to: CChar.self) { chars in
                sodium_base642bin(
                    &bytes, count, chars.baseAddress, chars.count, nil, &decoded, &end,
                    Int32(sodium_base64_VARIANT_ORIGINAL))
            }
        }
        guard status == 0, decoded == count else { return nil }
        return bytes
    }
}
