internal import CCrypto

/// SHA-256 (FIPS 180-4 §6.2) computed by libcrypto's `EVP_Digest*` API, which uses the CPU's
/// SHA extensions where present.
///
/// One hasher per worker: feed it with ``update(_:)-(UnsafeRawBufferPointer)`` and read the
/// digest with ``finalize()``, which also resets it for the next message. The class is not
/// `Sendable`; it owns one `EVP_MD_CTX`, freed exactly once in `deinit`.
///
/// Failure: with OpenSSL 3's default provider, SHA-256 can only fail when libcrypto cannot
/// allocate its context or fetch the algorithm (out of memory, a broken provider configuration).
/// The hasher then never makes up a digest: ``finalize()`` and ``hash(_:)`` throw
/// ``CairnError`` with code `.io`, and the next message retries creating the context.
package final class SHA256 {
    /// The number of bytes in a SHA-256 digest.
    package static let digestByteCount = 32

    /// SHA-256 fetched from libcrypto's default provider once: `EVP_sha256()` makes every
    /// initialisation look the algorithm up again (OpenSSL 3's implicit fetch), a cost of about
    /// a fifth of hashing 1 KiB, paid per chunk. Nil if the fetch failed; `EVP_sha256()` is used
    /// then. Never freed (it lives as long as the process) and only read.
    nonisolated(unsafe) private static let algorithm: OpaquePointer? = EVP_MD_fetch(nil, "SHA256", nil)

    /// The algorithm to initialise a context with.
    private static var sha256: OpaquePointer? { algorithm ?? EVP_sha256() }

    /// The `EVP_MD_CTX`, initialised for SHA-256 and ready for `EVP_DigestUpdate`; `nil` when
    /// creating or initialising it failed (it is retried at the start of the next message).
    private var context: OpaquePointer?
    /// Whether a call into libcrypto failed since the current message began.
    private var failed = false

    /// Creates a hasher ready for a first message.
    package init() {
        context = Self.makeContext()
        failed = context == nil
    }

    deinit {
        EVP_MD_CTX_free(context)
    }

    /// Returns a new `EVP_MD_CTX` initialised for SHA-256, or `nil` on failure.
    private static func makeContext() -> OpaquePointer? {
        guard let context = EVP_MD_CTX_new() else { return nil }
        guard EVP_DigestInit_ex(context, Self.sha256, nil) == 1 else {
            EVP_MD_CTX_free(context)
            return nil
        }
        return context
    }

    /// A hasher holding the same message so far (`EVP_MD_CTX_copy_ex`), to be continued apart.
    package func copy() -> SHA256 {
        let twin = SHA256()
        if failed || context == nil || twin.context == nil || EVP_MD_CTX_copy_ex(twin.context, context) != 1 {
            twin.failed = true
        }
        return twin
    }

    /// Adds bytes to the current message.
    ///
    /// - Parameter buffer: The next bytes of the message; may be empty.
    /// - Complexity: O(n); about 1.7 GB/s on a core with SHA extensions.
    package func update(_ buffer: UnsafeRawBufferPointer) {
        guard !failed, let context, let base = buffer.baseAddress, !buffer.isEmpty else { return }
        if EVP_DigestUpdate(context, base, buffer.count) != 1 {
            failed = true
        }
    }

    /// Adds bytes to the current message.
    package func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// Returns the digest of the bytes given since the last `finalize()` (or `init()`), and
    /// starts a new, empty message.
    ///
    /// - Throws: ``CairnError`` with code `.io` when libcrypto failed during this message (see
    ///   the type's documentation). The hasher is reset and usable either way.
    package func finalize() throws(CairnError) -> Digest {
        defer { reset() }
        guard !failed, let context else { throw Self.failure() }
        var bytes = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        let result = withUnsafeMutableBytes(of: &bytes) { output -> Digest? in
            guard let base = output.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
                return nil
            }
            var length: UInt32 = 0
            guard EVP_DigestFinal_ex(context, base, &length) == 1,
                length == UInt32(Self.digestByteCount)
            else { return nil }
            return Digest(bytes: UnsafeRawBufferPointer(output))
        }
        guard let result else { throw Self.failure() }
        return result
    }

    /// Prepares the context for a new message, recreating it if it was lost.
    private func reset() {
        if let context, EVP_DigestInit_ex(context, Self.sha256, nil) == 1 {
            failed = false
            return
        }
        EVP_MD_CTX_free(context)
        context = Self.makeContext()
        failed = context == nil
    }

    /// Returns the SHA-256 digest of `buffer` in one call (`EVP_Digest`).
    ///
    /// - Throws: ``CairnError`` with code `.io` when libcrypto fails (see the type's
    ///   documentation).
    package static func hash(_ buffer: UnsafeRawBufferPointer) throws(CairnError) -> Digest {
        var bytes = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        let result = withUnsafeMutableBytes(of: &bytes) { output -> Digest? in
            guard let base = output.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
                return nil
            }
            var length: UInt32 = 0
            // `EVP_Digest` accepts a null pointer for an empty message.
            guard EVP_Digest(buffer.baseAddress, buffer.count, base, &length, sha256, nil) == 1,
                length == UInt32(digestByteCount)
            else { return nil }
            return Digest(bytes: UnsafeRawBufferPointer(output))
        }
        guard let result else { throw failure() }
        return result
    }

    /// Returns the SHA-256 digest of `bytes` in one call.
    package static func hash(_ bytes: [UInt8]) throws(CairnError) -> Digest {
        let result = bytes.withUnsafeBytes { buffer in Result { () throws(CairnError) in try hash(buffer) } }
        return try result.get()
    }

    private static func failure() -> CairnError {
        CairnError(.io, "libcrypto could not compute a SHA-256 digest", cause: "EVP_Digest failed")
    }
}
