internal import CCrypto

/// HMAC-SHA-256 (RFC 2104) under one fixed key, prepared once: libcrypto's `EVP_MAC` context is
/// keyed when the value is made, and each message is computed on a copy of it
/// (`EVP_MAC_CTX_dup`). The one-shot `HMAC()` looks the algorithm up and hashes the key again on
/// every call, which costs as much as hashing a 1 KiB chunk; a keyed archive of many small files
/// makes one id per chunk, so that cost would be paid per chunk.
///
/// The prepared context is only ever read (copied), never updated, so one value serves every
/// thread. Failure: when libcrypto cannot allocate or fetch, ``mac(_:)`` throws; no code is
/// made up.
package final class KeyedMAC: @unchecked Sendable {
    /// The context keyed with the key and ready for a message; nil when preparing it failed.
    private let template: OpaquePointer?

    /// Prepares HMAC-SHA-256 under `key`.
    ///
    /// - Parameter key: any length (RFC 2104 hashes keys longer than 64 bytes first); may be empty.
    package init(key: [UInt8]) {
        template = Self.prepare(key: key)
    }

    deinit {
        EVP_MAC_CTX_free(template)
    }

    private static func prepare(key: [UInt8]) -> OpaquePointer? {
        guard let algorithm = EVP_MAC_fetch(nil, "HMAC", nil) else { return nil }
        defer { EVP_MAC_free(algorithm) }
        guard let context = EVP_MAC_CTX_new(algorithm) else { return nil }
        let keyBytes = key.isEmpty ? [0] : key
        let initialised = "digest".withCString { name in
            "SHA256".withCString { digest in
                var parameters = [
                    OSSL_PARAM_construct_utf8_string(name, UnsafeMutablePointer(mutating: digest), 0),
                    OSSL_PARAM_construct_end(),
                ]
                return keyBytes.withUnsafeBufferPointer { keyBuffer in
                    EVP_MAC_init(context, keyBuffer.baseAddress, key.count, &parameters) == 1
                }
            }
        }
        guard initialised else {
            EVP_MAC_CTX_free(context)
            return nil
        }
        return context
    }

    /// HMAC-SHA-256 of `message` under the key.
    ///
    /// - Parameter message: any length; may be empty.
    /// - Returns: the 32-byte code.
    /// - Throws: ``CairnError`` with code `.io` when libcrypto fails (it cannot allocate its
    ///   context).
    package func mac(_ message: UnsafeRawBufferPointer) throws(CairnError) -> Digest {
        guard let template, let context = EVP_MAC_CTX_dup(template) else { throw Self.failure() }
        defer { EVP_MAC_CTX_free(context) }
        var output = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        let digest = withUnsafeMutableBytes(of: &output) { out -> Digest? in
            guard let base = out.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return nil }
            if let bytes = message.baseAddress, !message.isEmpty {
                guard EVP_MAC_update(context, bytes.assumingMemoryBound(to: UInt8.self), message.count) == 1 else { return nil }
            }
            var length = 0
            guard EVP_MAC_final(context, base, &length, out.count) == 1, length == Digest.byteCount else { return nil }
            return Digest(bytes: UnsafeRawBufferPointer(out))
        }
        guard let digest else { throw Self.failure() }
        return digest
    }

    private static func failure() -> CairnError {
        CairnError(.io, "libcrypto could not compute a keyed chunk id", cause: "HMAC failed")
    }
}
