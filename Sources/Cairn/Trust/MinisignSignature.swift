/// A minisign detached signature (`FILE.minisig`), as `minisign -S` writes it and `minisign -V`
/// checks it (jedisct1/minisign, `src/minisign.c`; `Spec/0004-trusted-archives.md §2.4`).
///
/// The file has four lines: `untrusted comment: …`; base64 of the algorithm (`ED`: the file's
/// BLAKE2b-512 is signed; legacy `Ed`: the file itself is), the signer's 8-byte key id and the
/// 64-byte Ed25519 signature; `trusted comment: …`; base64 of the global signature, an Ed25519
/// signature of the signature's 64 bytes followed by the trusted comment's text.
public struct MinisignSignature: Sendable {
    /// The id of the key that made the signature.
    public let keyID: SigningKeyID
    /// Whether the signature covers the file's BLAKE2b-512 (`ED`) rather than the file's bytes
    /// (the legacy `Ed`).
    public let isPrehashed: Bool
    /// The signed comment (without `trusted comment: `), as `minisign -V` prints it.
    public let trustedComment: String
    /// The comment on the first line (without `untrusted comment: `): anyone may change it.
    public let untrustedComment: String
    let signature: [UInt8]
    let globalSignature: [UInt8]

    static let prehashedAlgorithm: [UInt8] = Array("ED".utf8)
    static let trustedCommentPrefix = "trusted comment: "
    /// The bytes of the signature line: algorithm, key id, signature.
    static let signatureLineByteCount = 2 + SigningKeyID.byteCount + PublicKey.signatureByteCount
    /// The longest trusted comment, in bytes: minisign's 8192-byte buffer less the prefix, the
    /// line end and the terminating NUL.
    static let trustedCommentByteLimit = 8192 - 19
    /// The largest signature file read, in bytes.
    package static let fileByteLimit = 16 << 10
    /// The number of bytes in the prehash: BLAKE2b-512.
    package static let prehashByteCount = 64
    /// The untrusted comment `minisign -S` writes.
    static let defaultUntrustedComment = "signature from minisign secret key"

    /// The signature of `message` by `key`, with `trustedComment` signed beside it.
    ///
    /// - Parameters:
    ///   - message: the file's BLAKE2b-512 when `prehashed` (what Cairn writes), else the file.
    ///   - trustedComment: one line of printable text (tabs allowed), at most 8173 bytes.
    /// - Throws: ``CairnError`` `.invalidArgument` for a comment minisign would refuse.
    package init(signing message: [UInt8], prehashed: Bool, trustedComment: String, with key: SigningKey) throws(CairnError) {
        guard Self.isPrintable(trustedComment), trustedComment.utf8.count <= Self.trustedCommentByteLimit else {
            throw CairnError(.invalidArgument, "a trusted comment is one printable line of at most \(Self.trustedCommentByteLimit) bytes")
        }
        keyID = key.keyID
        isPrehashed = prehashed
        self.trustedComment = trustedComment
        untrustedComment = Self.defaultUntrustedComment
        signature = key.signature(of: message)
        globalSignature = key.signature(of: signature + Array(trustedComment.utf8))
    }

    /// Parses a signature file's bytes as `minisign -V` does.
    ///
    /// - Parameter path: the file's name, for errors.
    /// - Throws: ``CairnError`` `.invalidArgument` naming `path` and the line at fault.
    package init(parsing text: [UInt8], path: String) throws(CairnError) {
        // minisign's `trim` ends a line at its first carriage return or line feed.
        let lines = text.split(separator: UInt8(ascii: "\n"), maxSplits: 4, omittingEmptySubsequences: false)
            .map { Array($0.prefix { $0 != UInt8(ascii: "\r") }) }
        func refuse(_ what: String) -> CairnError {
            CairnError(.invalidArgument, "not a minisign signature: \(what)", path: path)
        }
        guard lines.count >= 4 else { throw refuse("it has fewer than 4 lines") }
        guard lines[0].starts(with: PublicKey.untrustedCommentPrefix.utf8) else {
            throw refuse("line 1 does not start with 'untrusted comment: '")
        }
        guard let bytes = Base64.decode(Substring(decoding: lines[1], as: UTF8.self), count: Self.signatureLineByteCount) else {
            throw refuse("line 2 is not base64 of \(Self.signatureLineByteCount) bytes")
        }
        let algorithm = Array(bytes[0..<2])
        guard algorithm == Self.prehashedAlgorithm || algorithm == PublicKey.minisignAlgorithm else {
            throw refuse("unsupported signature algorithm (neither ED nor Ed)")
        }
        guard lines[2].starts(with: Self.trustedCommentPrefix.utf8) else { throw refuse("line 3 does not start with 'trusted comment: '") }
        guard let comment = String(validating: lines[2].dropFirst(Self.trustedCommentPrefix.utf8.count), as: UTF8.self),
            Self.isPrintable(comment), comment.utf8.count <= Self.trustedCommentByteLimit
        else {
            throw refuse("the trusted comment holds unprintable characters or is too long")
        }
        guard let global = Base64.decode(Substring(decoding: lines[3], as: UTF8.self), count: PublicKey.signatureByteCount) else {
            throw refuse("line 4 is not base64 of \(PublicKey.signatureByteCount) bytes")
        }
        keyID = try SigningKeyID(bytes: Array(bytes[2..<10]))
        isPrehashed = algorithm == Self.prehashedAlgorithm
        signature = Array(bytes[10...])
        trustedComment = comment
        untrustedComment = String(decoding: lines[0].dropFirst(PublicKey.untrustedCommentPrefix.utf8.count), as: UTF8.self)
        globalSignature = global
    }

    /// The signature file's text, as `minisign -S` writes it.
    package var fileText: String {
        let line = Base64.encode((isPrehashed ? Self.prehashedAlgorithm : PublicKey.minisignAlgorithm) + keyID.bytes + signature)
        return "\(PublicKey.untrustedCommentPrefix)\(untrustedComment)\n\(line)\n\(Self.trustedCommentPrefix)\(trustedComment)\n"
            + "\(Base64.encode(globalSignature))\n"
    }

    /// Checks the signature as `minisign -V` does: made by one of `keys`, over `message`, and
    /// the trusted comment signed with it.
    ///
    /// - Parameters:
    ///   - message: the file's BLAKE2b-512 when ``isPrehashed``, else the file.
    ///   - path: the signature file, for errors.
    /// - Returns: the key that made it.
    /// - Throws: ``CairnError`` naming `path`: `.untrusted` naming the signature's key id and the
    ///   ids of `keys` when none of them made it; `.checksumMismatch` when it does not verify
    ///   (the file or the signature changed) or the trusted comment's signature does not.
    @discardableResult
    package func check(message: [UInt8], against keys: [PublicKey], path: String) throws(CairnError) -> PublicKey {
        let key = try signer(among: keys, path: path)
        guard key.isValidSignature(signature, of: message) else {
            throw CairnError(.checksumMismatch, "the signature by key \(keyID) does not match the file: the file or the signature changed", path: path)
        }
        guard key.isValidSignature(globalSignature, of: signature + Array(trustedComment.utf8)) else {
            throw CairnError(.checksumMismatch, "the trusted comment's signature by key \(keyID) does not verify: the comment changed", path: path)
        }
        return key
    }

    /// The key among `keys` whose id the signature carries.
    ///
    /// - Throws: ``CairnError`` `.untrusted` naming `path`, the signature's key id and the ids of
    ///   `keys` when none has it.
    package func signer(among keys: [PublicKey], path: String) throws(CairnError) -> PublicKey {
        guard let key = keys.first(where: { $0.keyID == keyID }) else {
            let trusted = keys.map(\.keyID.description).joined(separator: ", ")
            throw CairnError(
                .untrusted, "signed by key \(keyID), not by the trusted key\(keys.count == 1 ? "" : "s") \(trusted)", path: path)
        }
        return key
    }

    /// minisign's default trusted comment: `timestamp:<seconds since 1970>`, a tab,
    /// `file:<name>`, a tab, `hashed`. Characters minisign would refuse in the name (control
    /// characters, tabs, bytes that are not UTF-8) become `?`.
    package static func defaultTrustedComment(timestamp: UInt64, fileName: [UInt8]) -> String {
        let name = String(decoding: fileName, as: UTF8.self).unicodeScalars.map { scalar in
            scalar == "\u{FFFD}" || scalar == "\t" || !isPrintable(scalar) ? "?" : String(scalar)
        }.joined()
        return "timestamp:\(timestamp)\tfile:\(name)\thashed"
    }

    /// minisign's `is_printable`: tabs and printable characters, no C0 or C1 control, no DEL.
    static func isPrintable(_ text: some StringProtocol) -> Bool {
        text.unicodeScalars.allSatisfy { $0 == "\t" || isPrintable($0) }
    }

    private static func isPrintable(_ scalar: Unicode.Scalar) -> Bool {
        !(scalar.value < 0x20 || (scalar.value >= 0x7F && scalar.value <= 0x9F))
    }
}
