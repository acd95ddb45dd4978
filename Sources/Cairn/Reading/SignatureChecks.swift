/// The signature rules of a front-to-back read (`Spec/0004-trusted-archives.md §3.3`, §4.2): where
/// signature records may stand, checked for every 2.x archive, and, when the reader trusts keys,
/// which prefix a verified signature covers. ``ArchiveScanner`` holds one and calls it for every
/// record, so every reader that walks an archive applies the same rules.
///
/// A synchronous state machine: each method takes the next record's facts and answers with what
/// the scanner may release, or throws.
struct SignatureChecks {
    /// The keys the reader trusts; empty: placement only (§4.4).
    let trustedKeys: [PublicKey]

    /// A commit record read, with what a signature of it needs.
    struct Commit {
        var record: CommitRecord
        /// The offset just after it.
        var end: UInt64
        /// `d(c)`: the SHA-256 of its framed bytes.
        var digest: Digest
        /// The chain digest at it (its verified or stored `chainDigest`).
        var chainDigest: Digest
    }

    /// A root signature read, verified at the footer.
    struct Root {
        var signature: SignatureRecord
        var offset: UInt64
        var commit: Commit
    }

    /// Whether the archive is signed (§3.3 rule 5): nil until the record after commit 0 is read.
    private(set) var isSigned: Bool?
    /// The key id and algorithm of the archive's signatures, from the first one.
    private(set) var signer: (keyID: SigningKeyID, algorithm: UInt8)?
    /// `C_0`: the chain digest at commit 0.
    private var headerChainDigest: Digest?
    private var lastCommit: Commit?
    /// Whether only signature records were read since ``lastCommit``.
    private var onlySignaturesSinceCommit = false
    /// Whether a prefix signature already follows ``lastCommit``.
    private var prefixFollowsCommit = false
    private(set) var root: Root?
    /// Commits read after the root signature: one, the final commit, at most.
    private var commitsAfterRoot = 0
    /// When trusting keys: commits read since the last verified prefix signature, held back
    /// until a signature covering them verifies: the last one read, and the last one at an entry
    /// boundary (no open entry). A signature covers every commit before the one it signs, and a
    /// reader that resumes needs the last boundary (a writer signs a commit inside a large file
    /// as readily as one between files, `Spec/0004 §3.4` rule 2). Two, so memory stays bounded
    /// however many commits an archive writes between its signatures.
    private var heldCommit: Commit?
    private var heldBoundaryCommit: Commit?

    init(trustedKeys: [PublicKey]) { self.trustedKeys = trustedKeys }

    var isTrusting: Bool { !trustedKeys.isEmpty }

    /// Whether a root signature directly after the last commit (only signature records between)
    /// was read and the final commit not yet: in an archive of no item, or a resumed write with
    /// nothing after its resume point, that commit follows the signed commit with only the root
    /// signature and the manifest index between (`Spec/0004 §3.3` rule 6), an exception to the
    /// order of `Spec/0001 §9`.
    var awaitsFinalCommit: Bool { rootFollowsCommit && commitsAfterRoot == 0 }
    /// Whether the root signature was read with only signature records since the last commit.
    private var rootFollowsCommit = false

    /// The trusted key ids, for messages: "X" or "X, Y".
    var trustedKeyList: String { trustedKeys.map(\.keyID.description).joined(separator: ", ") }

    /// A commit record was read and checked.
    ///
    /// - Returns: the commit to release now (every commit when no key is trusted), or nil when
    ///   it waits for a signature.
    /// - Throws: `.corrupted` for a second commit after the root signature.
    mutating func commitRead(_ commit: Commit, offset: UInt64) throws(CairnError) -> Commit? {
        if commit.record.sequence == 0 { headerChainDigest = commit.chainDigest }
        if let root {
            commitsAfterRoot += 1
            guard commitsAfterRoot == 1 else {
                throw CairnError(
                    .corrupted, "a second commit record after the root signature at offset \(root.offset)", offset: offset)
            }
        }
        lastCommit = commit
        onlySignaturesSinceCommit = true
        prefixFollowsCommit = false
        guard isTrusting else { return commit }
        heldCommit = commit
        if commit.record.openEntry == CommitRecord.noOpenEntry { heldBoundaryCommit = commit }
        return nil
    }

    /// Any record but a signature (`type` nil for an unknown one), before it is
    /// interpreted: it decides that an archive is unsigned when it follows commit 0 (§3.3 rule 5),
    /// and after the root signature only the manifest index, the final commit and the manifest
    /// may come (rule 3).
    ///
    /// - Throws: `.untrusted` for an unsigned archive when keys are trusted (§4.1); `.corrupted`.
    mutating func otherRecord(_ type: RecordType?, offset: UInt64) throws(CairnError) {
        if isSigned == nil, let lastCommit, lastCommit.record.sequence == 0 {
            isSigned = false
            if isTrusting {
                throw notSigned(offset: offset)
            }
        }
        if let root {
            let allowed: Bool
            switch type {
            case .manifestIndex?: allowed = commitsAfterRoot == 0
            case .commit?, .manifest?, .footer?: allowed = true
            default: allowed = false
            }
            guard allowed else {
                let what = type.map { RecordType.withArticle($0.name) + " record" } ?? "a record of an unknown type"
                throw CairnError(.corrupted, "\(what) after the root signature at offset \(root.offset)", offset: offset)
            }
        }
        if type != .commit { onlySignaturesSinceCommit = false }
    }

    /// A signature record (§3.2), framed as read at `offset`.
    ///
    /// - Returns: the commits a verified prefix signature releases, in archive order: the last
    ///   commit at an entry boundary it covers, when that is not the one it signs, then the one
    ///   it signs; empty when it releases none.
    /// - Throws: `.corrupted` for a record out of place (§3.3); `.untrusted` for an archive signed
    ///   by a key not trusted, `.checksumMismatch` at `offset` for one that does not verify (§4.1).
    mutating func signatureRead(_ record: RecordStream.Record) throws(CairnError) -> [Commit] {
        let offset = record.offset
        guard record.header.isSkippable else {
            throw CairnError(.corrupted, "a signature record without the skippable flag", offset: offset)
        }
        let signature = try SignatureRecord.decode(record.payload, offset: offset + UInt64(RecordFraming.headerLength))
        guard signature.algorithm == SignatureRecord.ed25519 else {
            throw CairnError(.corrupted, "unknown signature algorithm \(signature.algorithm)", offset: offset)
        }
        // A prefix signature directly follows its commit; the root one signs the last commit
        // before it, with the final link's records between (§3.3 rule 2).
        guard let commit = lastCommit, onlySignaturesSinceCommit || signature.kind == .root,
            signature.signedLength == commit.end
        else {
            throw CairnError(.corrupted, "the signature record at offset \(offset) does not follow the commit it signs", offset: offset)
        }
        if isSigned == nil {
            guard signature.kind == .prefix, commit.record.sequence == 0 else {
                throw CairnError(.corrupted, "a signature record in an archive that is not signed after commit 0", offset: offset)
            }
            isSigned = true
        } else if isSigned == false {
            throw CairnError(
                .corrupted, "a signature record in an archive that is not signed (no prefix signature follows commit 0)",
                offset: offset)
        }
        if let root {
            throw CairnError(.corrupted, "a signature record after the root signature at offset \(root.offset)", offset: offset)
        }
        if signature.kind == .prefix {
            guard !prefixFollowsCommit else {
                throw CairnError(.corrupted, "a second prefix signature of commit \(commit.record.sequence)", offset: offset)
            }
            prefixFollowsCommit = true
        }
        if let signer {
            guard signer.keyID == signature.keyID, signer.algorithm == signature.algorithm else {
                throw CairnError(
                    .corrupted, "signed by two keys: \(signer.keyID) and \(signature.keyID)", offset: offset)
            }
        } else {
            signer = (signature.keyID, signature.algorithm)
        }
        if signature.kind == .root { rootFollowsCommit = onlySignaturesSinceCommit }
        guard isTrusting else {
            if signature.kind == .root { root = Root(signature: signature, offset: offset, commit: commit) }
            return []
        }
        let key = try trustedKey(for: signature, offset: offset)
        if signature.kind == .root {
            root = Root(signature: signature, offset: offset, commit: commit)
            return []
        }
        guard let headerChainDigest,
            signature.isValid(for: key, headerChainDigest: headerChainDigest, commitDigest: commit.digest, footer: nil)
        else {
            throw Self.doesNotVerify(signature, offset: offset)
        }
        defer { (heldCommit, heldBoundaryCommit) = (nil, nil) }
        let released = [heldBoundaryCommit, heldCommit].compactMap { $0 }
        return released.count == 2 && released[0].end == released[1].end ? [released[1]] : released
    }

    /// The footer was read and checked (§12): a signed archive has a root signature (§3.3 rule 3),
    /// and a trusting reader verifies it with this footer (§4.2).
    ///
    /// - Throws: `.corrupted` for a signed archive without a root signature; `.checksumMismatch`
    ///   at the root signature's offset when it does not verify.
    mutating func footerRead(_ footer: Footer, offset: UInt64) throws(CairnError) {
        guard isSigned == true else { return }
        guard let root else {
            throw CairnError(.corrupted, "a signed archive without a root signature", offset: offset)
        }
        guard isTrusting else { return }
        try Self.verifyRoot(root, footer: footer, headerChainDigest: headerChainDigest, trustedKeys: trustedKeys)
    }

    /// The one check of a root signature (§4.2, §4.3), for the streaming and the seekable reader.
    ///
    /// - Throws: `.untrusted` when its key is not trusted; `.checksumMismatch` at its offset when
    ///   it does not verify.
    static func verifyRoot(_ root: Root, footer: Footer, headerChainDigest: Digest?, trustedKeys: [PublicKey]) throws(CairnError) {
        let checks = SignatureChecks(trustedKeys: trustedKeys)
        let key = try checks.trustedKey(for: root.signature, offset: root.offset)
        guard let headerChainDigest, root.signature.kind == .root,
            root.signature.isValid(for: key, headerChainDigest: headerChainDigest, commitDigest: root.commit.digest, footer: footer)
        else {
            throw doesNotVerify(root.signature, offset: root.offset)
        }
    }

    /// The trusted key that made `signature`.
    ///
    /// - Throws: `.untrusted` "signed by key Y, not by a trusted key (X)".
    func trustedKey(for signature: SignatureRecord, offset: UInt64) throws(CairnError) -> PublicKey {
        guard let key = trustedKeys.first(where: { $0.keyID == signature.keyID }) else {
            throw CairnError(
                .untrusted, "the archive is signed by key \(signature.keyID), not by a trusted key (\(trustedKeyList))",
                offset: offset)
        }
        return key
    }

    /// The refusal of an unsigned archive when keys are trusted (§4.1), for the streaming and
    /// the seekable reader alike: `offset` is where the signature after commit 0 should be.
    func notSigned(offset: UInt64) -> CairnError {
        CairnError(.untrusted, "the archive is not signed; wanted a signature by key \(trustedKeyList)", offset: offset)
    }

    static func doesNotVerify(_ signature: SignatureRecord, offset: UInt64) -> CairnError {
        CairnError(
            .checksumMismatch, "the signature by key \(signature.keyID) at offset \(offset) does not verify", offset: offset)
    }
}
