/// The signature record (record type 14, format 2.2, `Spec/0004-trusted-archives.md §3`): an
/// Ed25519 signature by the archive's maker over the prefix that ends at a commit record, or, as
/// the root signature, over that prefix and the manifest and footer.
///
/// Payload (82 bytes; framed 94, with the skippable flag so that a 2.0 or 2.1 reader skips it):
/// `kind u8 | algorithm u8 | keyID[8] | signedLength u64 | signature[64]`.
///
/// What is signed (``message(kind:signedLength:headerChainDigest:commitDigest:footer:)``):
/// ```
/// "Cairn archive signature" 0x00 ‖ kind u8 ‖ signedLength u64 ‖ C_0 ‖ d(c) [‖ footer bytes 0..<88]
/// ```
/// where `c` is the commit record that ends at `signedLength`, `d(c)` its record digest (which
/// holds its chain digest, so every byte before it is covered), `C_0` the chain digest of commit 0
/// (which binds the prelude and header for a reader that does not walk the chain), and, for the
/// root kind, the footer's payload up to its chain digest (manifest offset, length and digest, and
/// the counts).
package struct SignatureRecord: Sendable, Equatable {
    /// What a signature covers.
    package enum Kind: UInt8, Sendable {
        /// The prefix that ends at a commit record.
        case prefix = 0
        /// The prefix that ends at the last commit before the manifest, and the manifest and
        /// footer: written once, at the end of the body.
        case root = 1
    }

    /// The signature algorithm: 1 is Ed25519 (RFC 8032), the only one defined.
    package static let ed25519: UInt8 = 1

    package var kind: Kind
    package var algorithm: UInt8
    package var keyID: SigningKeyID
    /// The archive offset just after the commit record this signature covers.
    package var signedLength: UInt64
    /// The 64-byte Ed25519 signature of ``message(kind:signedLength:headerChainDigest:commitDigest:footer:)``.
    package var signature: [UInt8]

    package static let payloadLength = 2 + SigningKeyID.byteCount + 8 + PublicKey.signatureByteCount
    package static let framedLength = payloadLength + RecordFraming.overhead
    /// The domain-separation prefix of every signed message: "Cairn archive signature" and a NUL.
    package static let domain: [UInt8] = Array("Cairn archive signature".utf8) + [0]
    /// How many footer payload bytes a root signature covers: everything before its chain digest.
    package static let footerPrefixLength = 88

    /// The bytes a signature of `kind` signs.
    ///
    /// - Parameters:
    ///   - signedLength: the offset just after the commit record `c`.
    ///   - headerChainDigest: `C_0`, the chain digest stored in commit 0.
    ///   - commitDigest: `d(c)`, the SHA-256 of the 100 framed bytes of `c`.
    ///   - footer: the footer, for the root kind (ignored for a prefix).
    package static func message(
        kind: Kind, signedLength: UInt64, headerChainDigest: Digest, commitDigest: Digest, footer: Footer?
    ) -> [UInt8] {
        var w = ByteWriter(capacity: domain.count + 1 + 8 + 64 + footerPrefixLength)
        w.raw(domain)
        w.u8(kind.rawValue)
        w.u64(signedLength)
        w.digest(headerChainDigest)
        w.digest(commitDigest)
        if kind == .root, let footer {
            w.raw(Array(footer.encoded().prefix(footerPrefixLength)))
        }
        return w.bytes
    }

    /// A signature record made with `key`.
    package init(
        signing kind: Kind, with key: SigningKey, signedLength: UInt64, headerChainDigest: Digest,
        commitDigest: Digest, footer: Footer?
    ) {
        self.kind = kind
        self.algorithm = Self.ed25519
        self.keyID = key.keyID
        self.signedLength = signedLength
        self.signature = key.signature(
            of: Self.message(
                kind: kind, signedLength: signedLength, headerChainDigest: headerChainDigest,
                commitDigest: commitDigest, footer: footer))
    }

    package init(kind: Kind, algorithm: UInt8, keyID: SigningKeyID, signedLength: UInt64, signature: [UInt8]) {
        self.kind = kind
        self.algorithm = algorithm
        self.keyID = keyID
        self.signedLength = signedLength
        self.signature = signature
    }

    /// Whether `key` made this signature over the prefix and (root) the footer given.
    ///
    /// False for another algorithm, another key id, or a signature that does not verify.
    package func isValid(
        for key: PublicKey, headerChainDigest: Digest, commitDigest: Digest, footer: Footer?
    ) -> Bool {
        guard algorithm == Self.ed25519, key.keyID == keyID, kind == .prefix || footer != nil else { return false }
        return key.isValidSignature(
            signature,
            of: Self.message(
                kind: kind, signedLength: signedLength, headerChainDigest: headerChainDigest,
                commitDigest: commitDigest, footer: footer))
    }

    package func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: Self.payloadLength)
        w.u8(kind.rawValue)
        w.u8(algorithm)
        w.raw(keyID.bytes)
        w.u64(signedLength)
        w.raw(signature)
        return w.bytes
    }

    /// The framed record: type 14 with the skippable flag (§3.3 of `Spec/0001`).
    package func framed() -> [UInt8] {
        var out: [UInt8] = []
        RecordCodec.append(.signature, payload: encoded(), flags: RecordFraming.skippableFlag, to: &out)
        return out
    }

    /// Decodes a payload.
    ///
    /// - Parameter offset: the payload's archive offset, for messages.
    /// - Throws: `.corrupted` for a payload that is not 82 bytes or an unknown kind.
    package static func decode(_ payload: [UInt8], offset: UInt64) throws(CairnError) -> SignatureRecord {
        var r = ByteReader(payload, baseOffset: offset, what: "signature record")
        guard payload.count == payloadLength else {
            throw r.error("a payload of \(payload.count) bytes, not \(payloadLength)")
        }
        let kindByte = try r.u8("kind")
        guard let kind = Kind(rawValue: kindByte) else { throw r.error("unknown signature kind \(kindByte)") }
        let algorithm = try r.u8("algorithm")
        let keyID = try SigningKeyID(bytes: r.raw(SigningKeyID.byteCount, "key id"))
        let signedLength = try r.u64("signed length")
        let signature = try r.raw(PublicKey.signatureByteCount, "signature")
        return SignatureRecord(
            kind: kind, algorithm: algorithm, keyID: keyID, signedLength: signedLength, signature: signature)
    }
}
