/// The two secrets that key an archive's content (`Spec/0004-trusted-archives.md §6.6–§6.7`):
/// `idKey` names chunks by HMAC-SHA-256 instead of SHA-256, and `chunkerKey` derives the FastCDC
/// gear table, so that neither the ids nor the boundaries of a keyed archive can be computed
/// from known content without the keys.
///
/// The writer (`Archiver.Configuration.keying`) and every reader of the archive (the seekable
/// reader, the stream checker and extractor, the verifier, fetch's seeds and rebuild, `diff`)
/// must be given the same value; a reader given another one (or none) fails at the first chunk
/// id it checks, with `.checksumMismatch`. Nil everywhere means a plain archive: SHA-256 ids and
/// the published gear table (`Spec/0002-chunking.md §3`).
///
/// The value holds secrets and prints nothing of them.
package struct ChunkKeying: Sendable, Equatable {
    /// The length of each key, in bytes.
    package static let keyByteCount = 32

    /// The HMAC-SHA-256 key of the chunk ids.
    package let idKey: [UInt8]
    /// The key the gear table is derived from.
    package let chunkerKey: [UInt8]
    /// The 256 gear values derived from ``chunkerKey`` (`Spec/0004 §6.7`), computed once.
    package let gearValues: [UInt64]

    /// - Parameters:
    ///   - idKey: 32 bytes.
    ///   - chunkerKey: 32 bytes.
    /// - Throws: ``CairnError`` with code `.invalidArgument` when a key is not 32 bytes; `.io`
    ///   when libsodium cannot initialize.
    package init(idKey: [UInt8], chunkerKey: [UInt8]) throws(CairnError) {
        guard idKey.count == Self.keyByteCount, chunkerKey.count == Self.keyByteCount else {
            throw CairnError(
                .invalidArgument,
                "chunk keys have \(Self.keyByteCount) bytes each, not \(idKey.count) (id key) and \(chunkerKey.count) (chunker key)")
        }
        self.idKey = idKey
        self.chunkerKey = chunkerKey
        self.gearValues = try GearTable.keyedValues(chunkerKey: chunkerKey)
    }

    /// The chunk id rule of an archive keyed by ``idKey``.
    package var idFunction: ChunkIDFunction { .keyed(idKey) }
}

extension ChunkIDFunction {
    /// The chunk id rule for an archive with these keys: keyed by `keying.idKey`, or SHA-256
    /// when `keying` is nil (a plain archive).
    package init(keying: ChunkKeying?) {
        self = keying?.idFunction ?? .sha256
    }
}
