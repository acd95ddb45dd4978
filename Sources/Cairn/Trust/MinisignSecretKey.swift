internal import CSodium

/// The 158 bytes of a minisign secret key file's base64 line (jedisct1/minisign,
/// `src/minisign.h` `SeckeyStruct`; `Spec/0004-trusted-archives.md §2.2`):
///
/// | bytes | field |
/// |---|---|
/// | 2 | signature algorithm `Ed` |
/// | 2 | KDF: `Sc` (scrypt) or two zero bytes (no password) |
/// | 2 | checksum algorithm `B2` (BLAKE2b-256) |
/// | 32 | scrypt salt |
/// | 8 | scrypt opslimit, little-endian |
/// | 8 | scrypt memlimit in bytes, little-endian |
/// | 104 | key id (8), libsodium secret key (64), checksum (32); XORed with the scrypt output when `Sc` |
///
/// The checksum is BLAKE2b-256 of the algorithm, the key id and the secret key: after
/// decryption it tells a wrong password from the right one.
package struct MinisignSecretKey {
    static let byteCount = 158
    static let kdfScrypt: [UInt8] = Array("Sc".utf8)
    static let kdfNone: [UInt8] = [0, 0]
    static let checksumBlake2b: [UInt8] = Array("B2".utf8)
    static let saltByteCount = 32
    static let checksumByteCount = 32
    static let sealedByteCount = SigningKeyID.byteCount + SigningKey.secretKeyByteCount + checksumByteCount
    /// What minisign asks of scrypt (libsodium's `..._SENSITIVE` limits: 2^25 operations,
    /// 1 GiB), and the most a key file may ask of this reader.
    package static let opsLimit = UInt64(crypto_pwhash_scryptsalsa208sha256_OPSLIMIT_SENSITIVE)
    package static let memoryLimit = UInt64(crypto_pwhash_scryptsalsa208sha256_MEMLIMIT_SENSITIVE)
    /// The comment line minisign writes above every secret key, with or without a password.
    static let comment = "minisign encrypted secret key"

    var kdf: [UInt8]
    var salt: [UInt8]
    package var opsLimit: UInt64
    package var memoryLimit: UInt64
    /// Key id, secret key, checksum; encrypted when `kdf` is `Sc`.
    var sealed: [UInt8]

    /// Whether the key is encrypted with a password.
    package var needsPassword: Bool { kdf == Self.kdfScrypt }

    /// Parses the 158 bytes; `path` names the file in errors.
    ///
    /// - Throws: `.invalidArgument` for another length, algorithm, KDF or checksum function, and
    ///   `.limitExceeded` when the scrypt limits ask more than `opsLimit` / `memoryLimit`.
    package init(decoding bytes: [UInt8], path: String) throws(CairnError) {
        guard bytes.count == Self.byteCount else {
            throw CairnError(.invalidArgument, "not a minisign secret key: \(bytes.count) bytes, not \(Self.byteCount)", path: path)
        }
        guard Array(bytes[0..<2]) == PublicKey.minisignAlgorithm else {
            throw CairnError(.invalidArgument, "not an Ed25519 minisign secret key (algorithm is not Ed)", path: path)
        }
        guard Array(bytes[4..<6]) == Self.checksumBlake2b else {
            throw CairnError(.invalidArgument, "unsupported checksum function in the minisign secret key (not B2)", path: path)
        }
        kdf = Array(bytes[2..<4])
        guard kdf == Self.kdfScrypt || kdf == Self.kdfNone else {
            throw CairnError(.invalidArgument, "unsupported key derivation function in the minisign secret key (not Sc)", path: path)
        }
        salt = Array(bytes[6..<38])
        opsLimit = Self.littleEndian(bytes[38..<46])
        memoryLimit = Self.littleEndian(bytes[46..<54])
        sealed = Array(bytes[54...])
        guard !needsPassword || (opsLimit <= Self.opsLimit && memoryLimit <= Self.memoryLimit) else {
            throw CairnError(
                .limitExceeded,
                "the secret key asks scrypt for \(opsLimit) operations and \(memoryLimit) bytes; at most \(Self.opsLimit) and \(Self.memoryLimit) are allowed",
                path: path)
        }
    }

    /// `key` as a minisign secret key: encrypted with `password` (scrypt with a random salt and
    /// the given limits) or, when `password` is nil, stored as `minisign -G -W` stores it (no
    /// KDF, zero salt, limits and checksum).
    init(sealing key: SigningKey, password: [UInt8]?, opsLimit: UInt64 = Self.opsLimit, memoryLimit: UInt64 = Self.memoryLimit)
        throws(CairnError)
    {
        guard let password else {
            (kdf, salt, self.opsLimit, self.memoryLimit) = (Self.kdfNone, [UInt8](repeating: 0, count: Self.saltByteCount), 0, 0)
            sealed = key.secretKey.withUnsafeBytes { key.keyID.bytes + Array($0) + [UInt8](repeating: 0, count: Self.checksumByteCount) }
            return
        }
        (kdf, salt, self.opsLimit, self.memoryLimit) = (Self.kdfScrypt, try Sodium.randomBytes(Self.saltByteCount), opsLimit, memoryLimit)
        var secret = key.secretKey.withUnsafeBytes { Array($0) }
        var plain = key.keyID.bytes + secret + (try Self.checksum(keyID: key.keyID.bytes, secretKey: secret))
        var stream = try Self.stream(password: password, salt: salt, opsLimit: opsLimit, memoryLimit: memoryLimit, path: "<new secret key>")
        sealed = Self.xor(plain, stream)
        SecretBytes.wipe(&secret)
        SecretBytes.wipe(&plain)
        SecretBytes.wipe(&stream)
    }

    /// The 158 bytes.
    func encoded() -> [UInt8] {
        PublicKey.minisignAlgorithm + kdf + Self.checksumBlake2b + salt + Self.littleEndianBytes(opsLimit)
            + Self.littleEndianBytes(memoryLimit) + sealed
    }

    /// The signing key, decrypted with `password` when the file is encrypted.
    ///
    /// - Throws: `.invalidArgument` "wrong password for secret key" naming `path` when the
    ///   checksum does not match after decryption (or "needs a password" when none is given),
    ///   and when the secret key's halves disagree (a damaged file).
    package func signingKey(password: [UInt8]?, path: String) throws(CairnError) -> SigningKey {
        var plain = sealed
        defer { SecretBytes.wipe(&plain) }
        if needsPassword {
            guard let password else {
                throw CairnError(.invalidArgument, "the secret key is encrypted: a password is needed", path: path)
            }
            var stream = try Self.stream(password: password, salt: salt, opsLimit: opsLimit, memoryLimit: memoryLimit, path: path)
            plain = Self.xor(sealed, stream)
            SecretBytes.wipe(&stream)
        }
        let keyID = Array(plain[0..<8])
        var secret = Array(plain[8..<72])
        defer { SecretBytes.wipe(&secret) }
        let checksum = Array(plain[72...])
        // minisign writes no checksum without a password (`-W`), and checks none then.
        if needsPassword || checksum != [UInt8](repeating: 0, count: Self.checksumByteCount) {
            guard try Self.checksum(keyID: keyID, secretKey: secret) == checksum else {
                throw CairnError(
                    .invalidArgument,
                    needsPassword ? "wrong password for secret key" : "the secret key's checksum does not match: it is damaged",
                    path: path)
            }
        }
        do throws(CairnError) {
            return try SigningKey(keyID: SigningKeyID(bytes: keyID), secretKey: secret)
        } catch {
            throw error.withPath(path)
        }
    }

    /// scrypt (`crypto_pwhash_scryptsalsa208sha256`) of `password` with `salt` and the limits,
    /// as long as the sealed part.
    private static func stream(password: [UInt8], salt: [UInt8], opsLimit: UInt64, memoryLimit: UInt64, path: String)
        throws(CairnError) -> [UInt8]
    {
        try Sodium.ready()
        var output = [UInt8](repeating: 0, count: sealedByteCount)
        // NUL-terminated so that an empty password still has an address.
        let characters = password.map { CChar(bitPattern: $0) } + [0]
        let status = crypto_pwhash_scryptsalsa208sha256(
            &output, UInt64(output.count), characters, UInt64(password.count), salt, opsLimit, Int(memoryLimit))
        guard status == 0 else {
            throw CairnError(.io, "scrypt could not derive the key from the password (out of memory?)", path: path)
        }
        return output
    }

    /// BLAKE2b-256 of `Ed`, the key id and the secret key: minisign's `seckey_compute_chk`.
    private static func checksum(keyID: [UInt8], secretKey: [UInt8]) throws(CairnError) -> [UInt8] {
        try Blake2b.hash(PublicKey.minisignAlgorithm, keyID, secretKey, outputByteCount: checksumByteCount)
    }

    private static func xor(_ a: [UInt8], _ b: [UInt8]) -> [UInt8] {
        zip(a, b).map { $0 ^ $1 }
    }

    private static func littleEndian(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        bytes.reversed().reduce(0) { ($0 << 8) | UInt64($1) }
    }

    private static func littleEndianBytes(_ value: UInt64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
    }
}
