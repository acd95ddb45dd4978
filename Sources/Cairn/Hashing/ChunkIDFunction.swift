internal import CCrypto

/// The rule that names a chunk by its content: SHA-256 (FIPS 180-4) of the chunk's uncompressed
/// bytes in a plain archive (`Spec/0001-container-format.md §7.1`), HMAC-SHA-256 (RFC 2104)
/// under the archive's id key in a keyed one (`Spec/0004-trusted-archives.md §6.6`).
///
/// The one place a chunk id is computed, by the writer and by every reader that checks one (the
/// chunk record decoder, the pack content check, zero chunks, reuse of local chunks, `diff`), so
/// no path can check ids by another rule than the writer's. A reader given the wrong rule fails
/// at the first chunk it checks, with `.checksumMismatch`.
///
/// The value holds the key; it prints nothing of it.
package struct ChunkIDFunction: Sendable, Hashable {
    /// The HMAC key; nil for plain SHA-256.
    private let key: [UInt8]?

    private init(key: [UInt8]?) { self.key = key }

    /// SHA-256 of the content: plain archives.
    package static let sha256 = ChunkIDFunction(key: nil)

    /// HMAC-SHA-256 of the content under `key` (`Spec/0004 §6.6`).
    ///
    /// - Parameter key: the archive's id key; ``ChunkKeying`` makes sure it has 32 bytes.
    package static func keyed(_ key: [UInt8]) -> ChunkIDFunction { ChunkIDFunction(key: key) }

    /// Whether ids are keyed.
    package var isKeyed: Bool { key != nil }

    /// The id of a chunk whose uncompressed bytes are `bytes`.
    ///
    /// - Parameter bytes: 0 to 8 MiB (a chunk; any length works).
    /// - Returns: the 32-byte id.
    /// - Throws: ``CairnError`` with code `.io` when libcrypto fails (it cannot allocate its
    ///   context): an id is never made up.
    /// - Complexity: O(n): the HMAC adds two SHA-256 compressions of fixed size to the digest of
    ///   the content.
    package func id(of bytes: UnsafeRawBufferPointer) throws(CairnError) -> Digest {
        guard let key else { return try SHA256.hash(bytes) }
        var output = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        let digest = key.withUnsafeBufferPointer { keyBuffer in
            withUnsafeMutableBytes(of: &output) { out -> Digest? in
                guard let base = out.baseAddress?.assumingMemoryBound(to: UInt8.self),
                    let keyLength = Int32(exactly: keyBuffer.count)
                else { return nil }
                var length: UInt32 = 0
                // libcrypto is given a valid address even for an empty message.
                let produced = withUnsafeBytes(of: UInt8(0)) { empty in
                    CCrypto.HMAC(
                        EVP_sha256(), keyBuffer.baseAddress, keyLength,
                        (bytes.baseAddress ?? empty.baseAddress)?.assumingMemoryBound(to: UInt8.self), bytes.count,
                        base, &length) != nil
                }
                guard produced, length == UInt32(Digest.byteCount) else { return nil }
                return Digest(bytes: UnsafeRawBufferPointer(out))
            }
        }
        guard let digest else {
            throw CairnError(.io, "libcrypto could not compute a keyed chunk id", cause: "HMAC failed")
        }
        return digest
    }

    /// The id of a chunk whose uncompressed bytes are `bytes`.
    package func id(of bytes: [UInt8]) throws(CairnError) -> Digest {
        try bytes.withUnsafeBytes { raw in Result { () throws(CairnError) in try id(of: raw) } }.get()
    }
}
