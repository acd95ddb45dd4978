/// The payload of an age v1 file (`Spec/0004-trusted-archives.md §6.4.1`): a 16-byte nonce, then
/// the plaintext in chunks of 64 KiB, each sealed with ChaCha20-Poly1305 under
/// HKDF-SHA-256(ikm = file key, salt = nonce, info = "payload") and the nonce
/// `counter (11 bytes, big-endian) ‖ final flag (0x01 for the last chunk, else 0x00)` (STREAM).
///
/// The last chunk may be shorter than 64 KiB, and is empty only when the whole plaintext is.
package enum AgePayload {
    /// The plaintext bytes of every chunk but the last.
    package static let chunkByteCount = 64 << 10
    /// The bytes of a sealed full chunk.
    package static let sealedChunkByteCount = chunkByteCount + ChaCha20Poly1305.tagByteCount
    /// The bytes of the payload nonce.
    package static let nonceByteCount = 16

    /// The payload of `plaintext` under `fileKey` and `nonce` (16 bytes): the nonce, then the
    /// sealed chunks.
    ///
    /// - Throws: ``CairnError`` with code `.invalidArgument` for a file key or nonce of the wrong
    ///   length, `.io` when libcrypto or libsodium fail.
    package static func seal(_ plaintext: [UInt8], fileKey: [UInt8], nonce: [UInt8]) throws(CairnError) -> [UInt8] {
        let key = try payloadKey(fileKey: fileKey, nonce: nonce)
        let chunkCount = max(1, (plaintext.count + chunkByteCount - 1) / chunkByteCount)
        var output = nonce
        output.reserveCapacity(nonceByteCount + plaintext.count + chunkCount * ChaCha20Poly1305.tagByteCount)
        for index in 0..<chunkCount {
            let start = index * chunkByteCount
            let chunk = plaintext[start..<min(start + chunkByteCount, plaintext.count)]
            output += try ChaCha20Poly1305.seal(chunk, key: key, nonce: chunkNonce(index, final: index == chunkCount - 1))
        }
        return output
    }

    /// The plaintext of the payload that starts at `offset` in `bytes` and runs to their end.
    ///
    /// - Throws: ``CairnError`` naming the offset (in `bytes`) and chunk: `.truncated` when the
    ///   bytes end inside the nonce or a chunk's tag, or after a whole chunk that is not the final
    ///   one; `.corrupted` for an empty final chunk after others; `.checksumMismatch` when a chunk
    ///   does not authenticate (it was changed, or the file key is not this file's).
    package static func open(_ bytes: [UInt8], at offset: Int, fileKey: [UInt8]) throws(CairnError) -> [UInt8] {
        guard offset >= 0, bytes.count - offset >= nonceByteCount else {
            throw CairnError(.truncated, "the age payload ends inside its \(nonceByteCount)-byte nonce", offset: UInt64(bytes.count))
        }
        let key = try payloadKey(fileKey: fileKey, nonce: Array(bytes[offset..<(offset + nonceByteCount)]))
        let start = offset + nonceByteCount
        let sealedCount = bytes.count - start
        let chunkCount = max(1, (sealedCount + sealedChunkByteCount - 1) / sealedChunkByteCount)
        let lastCount = sealedCount - (chunkCount - 1) * sealedChunkByteCount
        let lastStart = start + (chunkCount - 1) * sealedChunkByteCount
        guard lastCount >= ChaCha20Poly1305.tagByteCount else {
            throw CairnError(.truncated, "the age payload ends inside chunk \(chunkCount - 1), before its tag", offset: UInt64(bytes.count))
        }
        guard chunkCount == 1 || lastCount > ChaCha20Poly1305.tagByteCount else {
            throw CairnError(.corrupted, "the age payload's final chunk \(chunkCount - 1) is empty, which only an empty payload may have", offset: UInt64(lastStart))
        }
        var plaintext: [UInt8] = []
        plaintext.reserveCapacity(sealedCount - chunkCount * ChaCha20Poly1305.tagByteCount)
        for index in 0..<chunkCount {
            let chunkStart = start + index * sealedChunkByteCount
            let chunk = bytes[chunkStart..<min(chunkStart + sealedChunkByteCount, bytes.count)]
            let final = index == chunkCount - 1
            guard let opened = try ChaCha20Poly1305.open(chunk, key: key, nonce: chunkNonce(index, final: final)) else {
                // A whole chunk that opens as a non-final one: the bytes stop at a chunk boundary.
                if final, chunk.count == sealedChunkByteCount,
                    try ChaCha20Poly1305.open(chunk, key: key, nonce: chunkNonce(index, final: false)) != nil
                {
                    throw CairnError(.truncated, "the age payload ends after chunk \(index), which is not its final chunk", offset: UInt64(bytes.count))
                }
                throw CairnError(
                    .checksumMismatch, "the age payload's chunk \(index) does not authenticate: it was changed", offset: UInt64(chunkStart))
            }
            plaintext += opened
        }
        return plaintext
    }

    /// HKDF-SHA-256(ikm = file key, salt = nonce, info = "payload").
    private static func payloadKey(fileKey: [UInt8], nonce: [UInt8]) throws(CairnError) -> [UInt8] {
        guard fileKey.count == AgeFile.fileKeyByteCount, nonce.count == nonceByteCount else {
            throw CairnError(.invalidArgument, "an age payload takes a \(AgeFile.fileKeyByteCount)-byte file key and a \(nonceByteCount)-byte nonce")
        }
        return try HKDF.sha256(inputKeyMaterial: fileKey, salt: nonce, info: Array("payload".utf8))
    }

    /// The 12-byte nonce of chunk `index`: the index as 11 big-endian bytes, then the final flag.
    private static func chunkNonce(_ index: Int, final: Bool) -> [UInt8] {
        var nonce = [UInt8](repeating: 0, count: ChaCha20Poly1305.nonceByteCount)
        var value = UInt64(index)
        for position in stride(from: 10, through: 3, by: -1) {
            nonce[position] = UInt8(value & 0xFF)
            value >>= 8
        }
        nonce[11] = final ? 1 : 0
        return nonce
    }
}
