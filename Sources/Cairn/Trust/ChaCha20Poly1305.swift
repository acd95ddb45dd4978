internal import CSodium

/// ChaCha20-Poly1305 (RFC 8439, the IETF variant with a 96-bit nonce), through libsodium's
/// `crypto_aead_chacha20poly1305_ietf_encrypt` and `_decrypt`, with no associated data: the
/// AEAD of age v1's stanzas and payload chunks (`Spec/0004-trusted-archives.md §6.4.1`).
package enum ChaCha20Poly1305 {
    /// The number of bytes in a key.
    package static let keyByteCount = 32
    /// The number of bytes in a nonce.
    package static let nonceByteCount = 12
    /// The number of bytes the tag adds to a plaintext.
    package static let tagByteCount = 16

    /// `plaintext` encrypted and authenticated: the ciphertext followed by the 16-byte tag.
    ///
    /// - Throws: ``CairnError`` with code `.invalidArgument` for a key or nonce of the wrong
    ///   length, `.io` when libsodium cannot initialize.
    package static func seal(_ plaintext: ArraySlice<UInt8>, key: [UInt8], nonce: [UInt8]) throws(CairnError) -> [UInt8] {
        try checkSizes(key: key, nonce: nonce)
        try Sodium.ready()
        var output = [UInt8](repeating: 0, count: plaintext.count + tagByteCount)
        var length: UInt64 = 0
        // libsodium is given a valid address even for an empty plaintext.
        let input = plaintext.isEmpty ? [0][...] : plaintext
        _ = input.withUnsafeBufferPointer { source in
            crypto_aead_chacha20poly1305_ietf_encrypt(
                &output, &length, source.baseAddress, UInt64(plaintext.count), nil, 0, nil, nonce, key)
        }
        return output
    }

    /// The plaintext of `sealed` (ciphertext then tag), or nil when it does not authenticate
    /// under `key` and `nonce` (or is shorter than a tag).
    ///
    /// - Throws: ``CairnError`` with code `.invalidArgument` for a key or nonce of the wrong
    ///   length, `.io` when libsodium cannot initialize.
    package static func open(_ sealed: ArraySlice<UInt8>, key: [UInt8], nonce: [UInt8]) throws(CairnError) -> [UInt8]? {
        try checkSizes(key: key, nonce: nonce)
        try Sodium.ready()
        guard sealed.count >= tagByteCount else { return nil }
        let count = sealed.count - tagByteCount
        // libsodium is given a valid address even for an empty plaintext.
        var output = [UInt8](repeating: 0, count: max(count, 1))
        var length: UInt64 = 0
        let status = sealed.withUnsafeBufferPointer { source in
            // `sealed` holds at least a tag, so it has an address.
            guard let base = source.baseAddress else { return Int32(-1) }
            return crypto_aead_chacha20poly1305_ietf_decrypt(
                &output, &length, nil, base, UInt64(source.count), nil, 0, nonce, key)
        }
        guard status == 0, length == UInt64(count) else { return nil }
        return Array(output.prefix(count))
    }

    private static func checkSizes(key: [UInt8], nonce: [UInt8]) throws(CairnError) {
        guard key.count == keyByteCount, nonce.count == nonceByteCount else {
            throw CairnError(.invalidArgument, "ChaCha20-Poly1305 takes a \(keyByteCount)-byte key and a \(nonceByteCount)-byte nonce")
        }
    }
}
