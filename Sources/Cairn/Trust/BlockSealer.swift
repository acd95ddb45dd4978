internal import CSodium

/// Seals and opens the blocks of an encrypted archive (`Spec/0004-trusted-archives.md §6.3`) with
/// XChaCha20-Poly1305 (libsodium's `crypto_aead_xchacha20poly1305_ietf`, the construction of
/// draft-irtf-cfrg-xchacha): a 256-bit key, a 192-bit nonce drawn at random for every block, a
/// 128-bit tag.
///
/// A sealed block is `nonce[24] ‖ ciphertext[n] ‖ tag[16]`. Its associated data binds it to its
/// archive, its position and whether it ends the archive:
/// ```
/// "cairn-block-v1" ‖ archiveID[16] ‖ index u64 LE ‖ final u8
/// ```
/// so a block copied to another archive, moved to another index, or presented as the last block
/// when it was not (a truncation at a block boundary) fails to open.
package struct BlockSealer: Sendable {
    /// Bytes a sealed block adds to its plaintext: the nonce and the tag.
    package static let overhead = nonceByteCount + tagByteCount
    package static let nonceByteCount = 24
    package static let tagByteCount = 16
    package static let keyByteCount = 32
    /// The associated data's domain prefix, ASCII.
    package static let domain: [UInt8] = Array("cairn-block-v1".utf8)

    /// The block key; wiped when the last copy of the sealer goes.
    private let key: SecretBytes
    /// `domain ‖ archiveID`, the part of every block's associated data that does not change.
    private let associatedPrefix: [UInt8]

    /// - Parameters:
    ///   - key: the 32-byte block key of the archive's secret header.
    ///   - archiveID: the 16 bytes of the envelope record.
    /// - Throws: `.invalidArgument` for a key or archive id of the wrong length; `.io` when
    ///   libsodium cannot initialize.
    package init(key: [UInt8], archiveID: [UInt8]) throws(CairnError) {
        try Sodium.ready()
        guard key.count == Self.keyByteCount, archiveID.count == 16 else {
            throw CairnError(.invalidArgument, "a block key has 32 bytes and an archive id 16")
        }
        self.key = SecretBytes(copying: key)
        associatedPrefix = Self.domain + archiveID
    }

    /// The associated data of block `index`.
    package func associatedData(index: UInt64, isFinal: Bool) -> [UInt8] {
        withAssociatedData(index: index, isFinal: isFinal) { Array($0) }
    }

    /// Calls `body` with the associated data of block `index`, built on the stack: sealing and
    /// opening run once per block, and an array per block would be an allocation per 16 KiB.
    private func withAssociatedData<R>(index: UInt64, isFinal: Bool, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        let count = associatedPrefix.count + 9
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: count) { data in
            _ = data.initialize(fromContentsOf: associatedPrefix)
            withUnsafeBytes(of: index.littleEndian) { bytes in
                for (offset, byte) in bytes.enumerated() { data[associatedPrefix.count + offset] = byte }
            }
            data[count - 1] = isFinal ? 1 : 0
            return body(UnsafeBufferPointer(data))
        }
    }

    /// Seals `plaintext` as block `index` under a fresh random nonce.
    ///
    /// - Returns: `nonce ‖ ciphertext ‖ tag`, `plaintext.count + overhead` bytes.
    package func seal(_ plaintext: UnsafeRawBufferPointer, index: UInt64, isFinal: Bool) -> [UInt8] {
        var sealed = [UInt8](repeating: 0, count: plaintext.count + Self.overhead)
        sealed.withUnsafeMutableBytes { seal(plaintext, index: index, isFinal: isFinal, into: $0) }
        return sealed
    }

    /// Seals `plaintext` as block `index` into `sealed`, which must hold exactly
    /// `plaintext.count + overhead` bytes (several threads may seal blocks at once, each into
    /// its own region).
    package func seal(_ plaintext: UnsafeRawBufferPointer, index: UInt64, isFinal: Bool, into sealed: UnsafeMutableRawBufferPointer) {
        guard sealed.count == plaintext.count + Self.overhead, let base = sealed.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            return
        }
        randombytes_buf(base, Self.nonceByteCount)
        let message = plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self)
        withAssociatedData(index: index, isFinal: isFinal) { data in
            key.withPointer { key in
                _ = crypto_aead_xchacha20poly1305_ietf_encrypt_detached(
                    base + Self.nonceByteCount, base + Self.nonceByteCount + plaintext.count, nil,
                    message, UInt64(plaintext.count), data.baseAddress, UInt64(data.count), nil, base, key)
            }
        }
    }

    /// The keystream block that ciphertext bytes are counted in: 64 bytes (ChaCha20's block).
    package static let keystreamBlock = 64

    /// Decrypts part of a block's ciphertext **without checking its tag**: a seeded fetch that
    /// needs a few hundred bytes of a block downloads only those (`Spec/0004-trusted-archives.md
    /// §6.10.3`), and what it decrypts is authenticated by the inner archive's own checks
    /// instead (keyed chunk ids, CRCs, and the chain digest of the footer, which was read from
    /// opened blocks). Nothing else may use it.
    ///
    /// XChaCha20-Poly1305 (draft-irtf-cfrg-xchacha §2, RFC 8439 §2.8) encrypts with the XChaCha20
    /// keystream of the block's nonce from block counter 1 (counter 0 keys Poly1305), so the
    /// ciphertext byte at `offset` within the block is the plaintext byte XOR keystream byte
    /// `64 + offset`: libsodium's `crypto_stream_xchacha20_xor_ic` from counter `1 + offset / 64`.
    ///
    /// - Parameters:
    ///   - ciphertext: ciphertext bytes of one block starting at `offset`.
    ///   - nonce: the block's 24-byte nonce.
    ///   - offset: where `ciphertext` starts within the block's ciphertext, a multiple of
    ///     ``keystreamBlock``.
    /// - Returns: the bytes decrypted, `ciphertext.count` of them; nil for a nonce of another
    ///   length or an offset that is not a multiple of 64.
    package func decryptUnauthenticated(_ ciphertext: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer, at offset: Int) -> [UInt8]? {
        guard nonce.count == Self.nonceByteCount, offset >= 0, offset % Self.keystreamBlock == 0,
            let noncePointer = nonce.baseAddress?.assumingMemoryBound(to: UInt8.self)
        else { return nil }
        var plaintext = [UInt8](repeating: 0, count: ciphertext.count)
        guard let input = ciphertext.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return plaintext }
        let counter = 1 + UInt64(offset / Self.keystreamBlock)
        plaintext.withUnsafeMutableBufferPointer { output in
            guard let output = output.baseAddress else { return }
            key.withPointer { key in
                _ = crypto_stream_xchacha20_xor_ic(
                    output, input, UInt64(ciphertext.count), noncePointer, counter, key)
            }
        }
        return plaintext
    }

    /// Opens a sealed block into `plaintext`, which must hold `sealed.count - overhead` bytes.
    ///
    /// - Returns: false when the tag does not verify (a flipped byte, another archive's block,
    ///   a block moved to another index, a non-final block read as final or the other way round);
    ///   `plaintext` then holds no released bytes (it is zeroed).
    package func open(
        _ sealed: UnsafeRawBufferPointer, index: UInt64, isFinal: Bool, into plaintext: UnsafeMutableRawBufferPointer
    ) -> Bool {
        guard sealed.count >= Self.overhead, plaintext.count == sealed.count - Self.overhead,
            let input = sealed.baseAddress?.assumingMemoryBound(to: UInt8.self)
        else { return false }
        let length = sealed.count - Self.overhead
        let output = plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self)
        let status = withAssociatedData(index: index, isFinal: isFinal) { data in
            key.withPointer { key in
                crypto_aead_xchacha20poly1305_ietf_decrypt_detached(
                    output, nil, input + Self.nonceByteCount, UInt64(length), input + Self.nonceByteCount + length,
                    data.baseAddress, UInt64(data.count), input, key)
            }
        }
        guard status == 0 else {
            plaintext.initializeMemory(as: UInt8.self, repeating: 0)
            return false
        }
        return true
    }
}
