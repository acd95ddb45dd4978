internal import CCrypto

/// HKDF (RFC 5869) with SHA-256 (FIPS 180-4): HKDF-Extract with `salt`, then HKDF-Expand with
/// `info`, computed by libcrypto's `EVP_PKEY_HKDF`.
///
/// Used by the age v1 layer (`Spec/0004-trusted-archives.md §6.4.1`) for the header MAC key, the
/// payload key and the X25519 wrap key. Checked against RFC 5869's SHA-256 test cases.
package enum HKDF {
    /// The most bytes HKDF-SHA-256 can produce (255 blocks of 32 bytes, RFC 5869 §2.3).
    package static let maximumOutputByteCount = 255 * 32

    /// Returns `outputByteCount` bytes of HKDF-SHA-256 output keying material.
    ///
    /// - Parameters:
    ///   - inputKeyMaterial: the IKM; at least one byte.
    ///   - salt: the salt; may be empty (RFC 5869 then uses 32 zero bytes, which HMAC treats as
    ///     the same key as an empty one).
    ///   - info: the context string; may be empty.
    ///   - outputByteCount: the length of the output, 1 through 8160 bytes.
    /// - Returns: the output keying material.
    /// - Throws: ``CairnError`` with code `.invalidArgument` for an empty IKM or an output length
    ///   out of range, `.limitExceeded` for an input of 2 GiB or more (libcrypto takes lengths as
    ///   `int`), and `.io` when libcrypto fails (it cannot allocate its context).
    package static func sha256(
        inputKeyMaterial: [UInt8], salt: [UInt8], info: [UInt8], outputByteCount: Int = 32
    ) throws(CairnError) -> [UInt8] {
        guard !inputKeyMaterial.isEmpty, (1...maximumOutputByteCount).contains(outputByteCount) else {
            throw CairnError(.invalidArgument, "HKDF-SHA-256 needs input keying material and an output of 1 to \(maximumOutputByteCount) bytes")
        }
        guard let keyLength = Int32(exactly: inputKeyMaterial.count), let saltLength = Int32(exactly: salt.count),
            let infoLength = Int32(exactly: info.count)
        else {
            throw CairnError(.limitExceeded, "an HKDF input must be shorter than 2 GiB")
        }
        guard let context = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nil) else {
            throw CairnError(.io, "libcrypto could not compute HKDF-SHA-256", cause: "EVP_PKEY_CTX_new_id failed")
        }
        defer { EVP_PKEY_CTX_free(context) }
        var output = [UInt8](repeating: 0, count: outputByteCount)
        var length = outputByteCount
        // libcrypto copies each input (`set1`, `add1`); an empty salt or info is not passed at all.
        let derived =
            EVP_PKEY_derive_init(context) == 1
            && EVP_PKEY_CTX_set_hkdf_md(context, EVP_sha256()) == 1
            && EVP_PKEY_CTX_set1_hkdf_key(context, inputKeyMaterial, keyLength) == 1
            && (salt.isEmpty || EVP_PKEY_CTX_set1_hkdf_salt(context, salt, saltLength) == 1)
            && (info.isEmpty || EVP_PKEY_CTX_add1_hkdf_info(context, info, infoLength) == 1)
            && EVP_PKEY_derive(context, &output, &length) == 1
        guard derived, length == outputByteCount else {
            throw CairnError(.io, "libcrypto could not compute HKDF-SHA-256", cause: "EVP_PKEY_derive failed")
        }
        return output
    }
}
