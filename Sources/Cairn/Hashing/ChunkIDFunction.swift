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
    /// The HMAC key; nil for plain SHA-256. Equality and hashing are the key's.
    private let key: [UInt8]?
    /// HMAC-SHA-256 prepared under `key` once, not per chunk.
    private let mac: KeyedMAC?

    private init(key: [UInt8]?) {
        self.key = key
        mac = key.map(KeyedMAC.init(key:))
    }

    package static func == (lhs: ChunkIDFunction, rhs: ChunkIDFunction) -> Bool { lhs.key == rhs.key }

    package func hash(into hasher: inout Hasher) { hasher.combine(key) }

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
        guard let mac else { return try SHA256.hash(bytes) }
        return try mac.mac(bytes)
    }

    /// The id of a chunk whose uncompressed bytes are `bytes`.
    package func id(of bytes: [UInt8]) throws(CairnError) -> Digest {
        try bytes.withUnsafeBytes { raw in Result { () throws(CairnError) in try id(of: raw) } }.get()
    }
}
