/// minisign's secret key file (jedisct1/minisign; `Spec/0004-trusted-archives.md §2.2`): an
/// `untrusted comment:` line, then base64 of the 158 bytes `MinisignSecretKey` describes.
extension SigningKey {
    /// The largest secret key file read, in bytes (minisign's is 266).
    package static let keyFileByteLimit = 64 << 10

    /// The key in the text of a minisign secret key file.
    ///
    /// - Parameters:
    ///   - text: the file's bytes: a comment line, then the base64 line.
    ///   - password: the password for an encrypted key (its UTF-8 bytes, without a line end);
    ///     ignored for a key stored without one.
    ///   - path: the file's name, for errors.
    /// - Throws: ``CairnError`` naming `path`: `.invalidArgument` for text that is not a minisign
    ///   Ed25519 secret key, a wrong or missing password ("wrong password for secret key"), or a
    ///   damaged key; `.limitExceeded` when its scrypt limits exceed minisign's.
    package init(minisignSecretKeyText text: [UInt8], password: [UInt8]?, path: String) throws(CairnError) {
        self = try Self.minisignSecretKey(in: text, path: path).signingKey(password: password, path: path)
    }

    /// Whether the minisign secret key in `text` is encrypted with a password.
    ///
    /// - Throws: ``CairnError`` naming `path` when `text` is not a minisign secret key.
    package static func minisignSecretKeyNeedsPassword(_ text: [UInt8], path: String) throws(CairnError) -> Bool {
        try minisignSecretKey(in: text, path: path).needsPassword
    }

    /// The key as the text of a minisign secret key file, as `minisign -G` writes it: the comment
    /// line `untrusted comment: minisign encrypted secret key` (minisign writes it also without
    /// a password), then the base64 line.
    ///
    /// - Parameters:
    ///   - password: encrypt with scrypt under this password (its UTF-8 bytes); nil stores the
    ///     key unencrypted, as `minisign -G -W` does.
    ///   - opsLimit: scrypt's operations limit; minisign's by default.
    ///   - memoryLimit: scrypt's memory limit in bytes (1 GiB by default, as minisign).
    package func minisignSecretKeyText(
        password: [UInt8]?, opsLimit: UInt64 = MinisignSecretKey.opsLimit, memoryLimit: UInt64 = MinisignSecretKey.memoryLimit
    ) throws(CairnError) -> String {
        let sealed = try MinisignSecretKey(sealing: self, password: password, opsLimit: opsLimit, memoryLimit: memoryLimit)
        return "\(PublicKey.untrustedCommentPrefix)\(MinisignSecretKey.comment)\n\(Base64.encode(sealed.encoded()))\n"
    }

    /// The structure in a secret key file's text: its second line, as minisign reads it.
    private static func minisignSecretKey(in text: [UInt8], path: String) throws(CairnError) -> MinisignSecretKey {
        let lines = text.split(separator: UInt8(ascii: "\n"), maxSplits: 2, omittingEmptySubsequences: false)
        guard lines.count >= 2, lines[0].starts(with: PublicKey.untrustedCommentPrefix.utf8) else {
            throw CairnError(
                .invalidArgument, "not a minisign secret key file: it does not start with 'untrusted comment:' and a key line",
                path: path)
        }
        let line = String(decoding: lines[1], as: UTF8.self).trimmingMinisignSpace()
        guard let bytes = Base64.decode(line, count: MinisignSecretKey.byteCount) else {
            throw CairnError(
                .invalidArgument, "not a minisign secret key file: its second line is not base64 of \(MinisignSecretKey.byteCount) bytes",
                path: path)
        }
        return try MinisignSecretKey(decoding: bytes, path: path)
    }
}
