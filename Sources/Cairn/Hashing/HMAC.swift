internal import CCrypto

/// HMAC (RFC 2104) with SHA-256 (FIPS 180-4), computed by libcrypto's one-shot `HMAC()`.
///
/// Used by ``SigV4Signer`` for AWS Signature Version 4's key derivation and signature. Checked
/// against RFC 4231's test cases.
package enum HMAC {
    /// The number of bytes in an HMAC-SHA-256 value.
    package static let sha256ByteCount = 32

    /// Returns HMAC-SHA-256 of `message` under `key`.
    ///
    /// - Parameters:
    ///   - key: The key, any length (RFC 2104 hashes keys longer than the 64-byte block first);
    ///     may be empty.
    ///   - message: The message; may be empty.
    /// - Returns: The 32-byte authentication code.
    /// - Throws: ``CairnError`` with code `.limitExceeded` for a key of 2 GiB or more (libcrypto
    ///   takes its length as an `int`), and `.io` when libcrypto fails (it cannot allocate its
    ///   context): a code is never made up.
    package static func sha256(key: [UInt8], message: [UInt8]) throws(CairnError) -> [UInt8] {
        guard let keyLength = Int32(exactly: key.count) else {
            throw CairnError(.limitExceeded, "an HMAC key must be shorter than 2 GiB")
        }
        // libcrypto is given a valid address even for an empty key or message.
        let keyBytes = key.isEmpty ? [0] : key
        let messageBytes = message.isEmpty ? [0] : message
        var output = [UInt8](repeating: 0, count: sha256ByteCount)
        var length: UInt32 = 0
        let produced = keyBytes.withUnsafeBufferPointer { keyBuffer in
            messageBytes.withUnsafeBufferPointer { messageBuffer in
                output.withUnsafeMutableBufferPointer { outputBuffer in
                    CCrypto.HMAC(
                        EVP_sha256(), keyBuffer.baseAddress, keyLength, messageBuffer.baseAddress, message.count,
                        outputBuffer.baseAddress, &length) != nil
                }
            }
        }
        guard produced, length == UInt32(sha256ByteCount) else {
            throw CairnError(.io, "libcrypto could not compute an HMAC-SHA-256", cause: "HMAC failed")
        }
        return output
    }
}
