/// The keys of an encrypted archive (`Spec/0004-trusted-archives.md §6.4`): the plaintext of its
/// key block, which only its recipients can open.
///
/// Layout, 97 bytes: `version u8 = 1 | blockKey[32] | idKey[32] | chunkerKey[32]`.
/// - `blockKey` seals the archive's blocks (``BlockSealer``).
/// - `idKey` keys chunk ids: an id is HMAC-SHA256(idKey, content) instead of SHA-256(content).
/// - `chunkerKey` derives the FastCDC gear table.
/// The reference writer derives `idKey` and `chunkerKey` from its maker's secret, so two exports
/// of one maker share chunk ids and boundaries (`Spec/0004 §6.5`).
package struct ArchiveSecrets: Sendable, Equatable {
    package static let version: UInt8 = 1
    package static let keyByteCount = 32
    package static let encodedLength = 1 + 3 * keyByteCount

    package var blockKey: [UInt8]
    package var idKey: [UInt8]
    package var chunkerKey: [UInt8]

    package init(blockKey: [UInt8], idKey: [UInt8], chunkerKey: [UInt8]) {
        self.blockKey = blockKey
        self.idKey = idKey
        self.chunkerKey = chunkerKey
    }

    package func encoded() -> [UInt8] {
        [Self.version] + blockKey + idKey + chunkerKey
    }

    /// - Throws: `.corrupted` for another length or version (the bytes were authenticated by
    ///   the key block, so this is a writer's fault or a newer format).
    package static func decode(_ bytes: [UInt8]) throws(CairnError) -> ArchiveSecrets {
        guard bytes.count == encodedLength, bytes.first == version else {
            throw CairnError(
                .corrupted,
                "the key block holds \(bytes.count) bytes of version \(bytes.first.map(String.init) ?? "none"); version 1 has \(encodedLength)")
        }
        let k = keyByteCount
        return ArchiveSecrets(
            blockKey: Array(bytes[1..<(1 + k)]), idKey: Array(bytes[(1 + k)..<(1 + 2 * k)]),
            chunkerKey: Array(bytes[(1 + 2 * k)..<(1 + 3 * k)]))
    }
}
