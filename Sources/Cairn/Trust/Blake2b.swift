internal import CSodium

/// BLAKE2b (RFC 7693), unkeyed, through libsodium's `crypto_generichash` streaming API: minisign's
/// prehash of a signed file (64-byte output) and the checksum of its secret keys (32-byte output).
///
/// libsodium's state has an address and a 64-byte alignment, so it lives in memory this class
/// owns and frees exactly once.
package final class Blake2b {
    private let state: UnsafeMutableRawPointer
    private let outputByteCount: Int

    /// A hash that will give `outputByteCount` bytes (16 to 64).
    package init(outputByteCount: Int) throws(CairnError) {
        try Sodium.ready()
        precondition(
            outputByteCount >= Int(crypto_generichash_BYTES_MIN) && outputByteCount <= Int(crypto_generichash_BYTES_MAX),
            "BLAKE2b output length out of range")
        self.outputByteCount = outputByteCount
        state = UnsafeMutableRawPointer.allocate(byteCount: crypto_generichash_statebytes(), alignment: 64)
        _ = crypto_generichash_init(OpaquePointer(state), nil, 0, outputByteCount)
    }

    deinit { state.deallocate() }

    /// Adds `bytes` to the hashed input.
    package func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress else { return }
        _ = crypto_generichash_update(
            OpaquePointer(state), base.assumingMemoryBound(to: UInt8.self),
            UInt64(bytes.count))
    }

    /// Adds `bytes` to the hashed input.
    package func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The digest of everything added; the hash must not be used afterwards.
    package func finish() -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: outputByteCount)
        _ = crypto_generichash_final(OpaquePointer(state), &digest, outputByteCount)
        return digest
    }

    /// The `outputByteCount`-byte digest of the concatenation of `parts`.
    package static func hash(_ parts: [UInt8]..., outputByteCount: Int) throws(CairnError) -> [UInt8] {
        let hash = try Blake2b(outputByteCount: outputByteCount)
        for part in parts { hash.update(part) }
        return hash.finish()
    }
}
