internal import CSodium

extension Sodium {
    /// The first `count` bytes of the ChaCha20 keystream (RFC 8439's IETF variant: 96-bit nonce,
    /// 32-bit block counter from 0) under `key` with the all-zero nonce, from libsodium's
    /// `crypto_stream_chacha20_ietf`.
    ///
    /// Only for a key that is used for nothing else (the keyed gear table,
    /// `Spec/0004-trusted-archives.md §6.7`): the zero nonce is safe because nothing is ever
    /// encrypted with this keystream.
    ///
    /// - Parameters:
    ///   - key: 32 bytes.
    ///   - count: bytes wanted, at most 256 GiB (the counter's range); the callers ask for 2 KiB.
    /// - Throws: ``CairnError`` with code `.invalidArgument` for a key of another length, `.io`
    ///   when libsodium cannot initialize or fails.
    package static func chaCha20Keystream(key: [UInt8], count: Int) throws(CairnError) -> [UInt8] {
        try ready()
        guard key.count == Int(crypto_stream_chacha20_ietf_KEYBYTES) else {
            throw CairnError(.invalidArgument, "a ChaCha20 key has 32 bytes, not \(key.count)")
        }
        guard count > 0 else { return [] }
        var output = [UInt8](repeating: 0, count: count)
        let nonce = [UInt8](repeating: 0, count: Int(crypto_stream_chacha20_ietf_NONCEBYTES))
        let status = crypto_stream_chacha20_ietf(&output, UInt64(count), nonce, key)
        guard status == 0 else {
            throw CairnError(.io, "libsodium could not compute a ChaCha20 keystream", cause: "crypto_stream_chacha20_ietf returned \(status)")
        }
        return output
    }
}
