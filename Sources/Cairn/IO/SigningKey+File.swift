import Glibc

/// Reading and writing minisign secret key files (`Spec/0004-trusted-archives.md §2.2`).
extension SigningKey {
    /// The key in a minisign secret key file, as `minisign -G` or `cairn key generate` writes it.
    ///
    /// - Parameters:
    ///   - path: the file; at most 64 KiB.
    ///   - password: the password (UTF-8 bytes, no line end) when the key is encrypted; see
    ///     ``secretKeyFileNeedsPassword(_:)``. Deriving the key takes scrypt with minisign's
    ///     limits: about 1 GiB of memory and a few seconds.
    /// - Throws: ``CairnError`` naming `path`: `.notFound` / `.io` when it cannot be read;
    ///   `.invalidArgument` when its group or others may read it (mode 0600 is asked for, as
    ///   ssh does; a pipe is taken), when it is not a minisign Ed25519 secret key, is damaged, or the
    ///   password is missing or wrong ("wrong password for secret key"); `.limitExceeded` when it
    ///   is too large or asks scrypt for more than minisign's limits.
    public static func read(secretKeyFile path: String, password: [UInt8]?) throws(CairnError) -> SigningKey {
        let text = try SmallFile.read(path, limit: keyFileByteLimit, what: "secret key file", ownerOnly: true)
        return try SigningKey(minisignSecretKeyText: text, password: password, path: path)
    }

    /// Whether the minisign secret key file at `path` is encrypted, so that
    /// ``read(secretKeyFile:password:)`` needs a password.
    ///
    /// - Throws: ``CairnError`` as ``read(secretKeyFile:password:)`` does for a file that cannot
    ///   be read or is not a minisign secret key.
    public static func secretKeyFileNeedsPassword(_ path: String) throws(CairnError) -> Bool {
        let text = try SmallFile.read(path, limit: keyFileByteLimit, what: "secret key file", ownerOnly: true)
        return try minisignSecretKeyNeedsPassword(text, path: path)
    }

    /// Writes this key as a minisign key pair, as `minisign -G` does: the secret key file (mode
    /// 0600) at `secretKeyFile`, then the public key file at `publicKeyFile`, each through a
    /// temporary file and a rename.
    ///
    /// - Parameters:
    ///   - publicKeyFile: where the public key file goes.
    ///   - secretKeyFile: where the secret key file goes.
    ///   - password: encrypt the secret key with scrypt under it (UTF-8 bytes; about 1 GiB of
    ///     memory and a few seconds, minisign's limits); nil stores it unencrypted (`-W`).
    ///   - replacing: whether existing files may be replaced (`-f`).
    /// - Throws: ``CairnError`` naming the file: `.alreadyExists` when either exists and not
    ///   `replacing` (nothing is written), `.io` when writing fails.
    public func writeKeyPair(publicKeyFile: String, secretKeyFile: String, password: [UInt8]?, replacing: Bool) throws(CairnError) {
        if !replacing {
            for path in [publicKeyFile, secretKeyFile] where access(path, F_OK) == 0 {
                throw CairnError(.alreadyExists, "already exists; refusing to replace it", path: path)
            }
        }
        let secret = try minisignSecretKeyText(password: password)
        try SmallFile.write(Array(secret.utf8), to: secretKeyFile, mode: 0o600, replacing: replacing)
        try SmallFile.write(Array(publicKey.minisignFileText.utf8), to: publicKeyFile, mode: 0o644, replacing: replacing)
    }
}
