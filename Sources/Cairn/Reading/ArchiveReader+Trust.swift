/// The random-access reader's signature check (`Spec/0004-trusted-archives.md §4.3`): before a
/// seekable reader, local or remote, uses the manifest, it verifies the root signature from the
/// archive's tail, reading a few small records and no body.
extension ArchiveReader {
    /// Verifies the root signature of the archive `source` serves.
    ///
    /// Finds the final commit (the record that ends where the manifest begins), the root signature
    /// before it (or before the manifest index there), the commit record `c` that ends at the
    /// root's `signedLength` (the last commit before the final link, §3.3 rule 2), computes `C_0`
    /// from `start`, and verifies the message with `footer`.
    ///
    /// - Parameters:
    ///   - start: the prelude and the framed header record, the very bytes the caller decoded
    ///     the header from: `C_0` is computed from them, not from a second read, so a source that
    ///     answers two reads differently (a hostile server) cannot pair a forged header with a
    ///     genuine signature.
    ///   - trustedKeys: not empty.
    /// - Returns: the key id of the signature that verified.
    /// - Throws: `.untrusted` for an archive that is not signed, or signed by another key;
    ///   `.checksumMismatch` at the root signature's offset when it does not verify; `.corrupted`
    ///   for a signed archive whose tail holds no root signature; what reading `source` throws.
    static func verifyRootSignature(
        of source: any ArchiveSource, footer: Footer, start: [UInt8], trustedKeys: [PublicKey]
    ) throws(CairnError) -> SigningKeyID {
        let size = source.size
        guard start.count > Prelude.length else {
            throw CairnError(.truncated, "the archive ends in its header", offset: UInt64(start.count))
        }
        let headerEnd = UInt64(start.count)
        let checks = SignatureChecks(trustedKeys: trustedKeys)
        guard let (root, rootOffset) = try findRootSignature(in: source, footer: footer, headerEnd: headerEnd) else {
            // No root: a signed archive has a prefix signature right after commit 0 (§3.3 rule 5).
            if let first = try signerAfterCommitZero(of: source, headerEnd: headerEnd) {
                _ = try checks.trustedKey(for: first, offset: headerEnd + UInt64(CommitRecord.framedLength))
                throw CairnError(.corrupted, "a signed archive without a root signature before its manifest", offset: footer.manifestOffset)
            }
            throw checks.notSigned(offset: headerEnd + UInt64(CommitRecord.framedLength))
        }
        _ = try checks.trustedKey(for: root, offset: rootOffset)
        let commitLength = UInt64(CommitRecord.framedLength)
        // The root signs the last commit before it (`Spec/0004 §3.3` rule 2): commit 0 or a later one.
        guard root.kind == .root, root.signedLength <= rootOffset, root.signedLength >= headerEnd + commitLength else {
            throw CairnError(.corrupted, "the signature record at offset \(rootOffset) does not follow the commit it signs", offset: rootOffset)
        }
        let commitOffset = root.signedLength - commitLength
        let (commit, _) = try source.readRecord(at: commitOffset, fileSize: size)
        guard commit.type == .commit else {
            throw CairnError(.corrupted, "the signature record at offset \(rootOffset) does not follow the commit it signs", offset: rootOffset)
        }
        let chain = RecordChain()
        try chain.add(recordBytes: Array(start[0..<Prelude.length]))
        try chain.add(recordBytes: Array(start[Prelude.length...]))
        let headerChainDigest = try chain.finalize()
        let signed = SignatureChecks.Commit(
            record: try decodeCommit(commit.payload, at: commitOffset), end: root.signedLength, digest: try SHA256.hash(commit.framed),
            chainDigest: .zero)
        try SignatureChecks.verifyRoot(
            .init(signature: root, offset: rootOffset, commit: signed), footer: footer, headerChainDigest: headerChainDigest,
            trustedKeys: trustedKeys)
        return root.keyID
    }

    /// The key id of the prefix signature right after commit 0, if there is one (§3.3 rule 5):
    /// whether the archive is signed, and by whom (`info` without trusted keys, §4.4).
    ///
    /// - Throws: what reading `source` throws.
    static func signerAfterCommitZero(of source: any ArchiveSource, headerEnd: UInt64) throws(CairnError) -> SignatureRecord? {
        let offset = headerEnd + UInt64(CommitRecord.framedLength)
        guard let (record, _) = try? source.readRecord(at: offset, fileSize: source.size), record.type == .signature,
            let signature = try? SignatureRecord.decode(record.payload, offset: offset + UInt64(RecordFraming.headerLength)),
            signature.kind == .prefix, signature.signedLength == offset
        else { return nil }
        return signature
    }

    /// The root signature and its offset: the record before the final commit, or before the
    /// manifest index that precedes the final commit (§4.3); nil when neither is one.
    private static func findRootSignature(
        in source: any ArchiveSource, footer: Footer, headerEnd: UInt64
    ) throws(CairnError) -> (SignatureRecord, UInt64)? {
        let size = source.size
        let commitLength = UInt64(CommitRecord.framedLength)
        let signatureLength = UInt64(SignatureRecord.framedLength)
        let lowest = headerEnd + commitLength
        guard footer.manifestOffset >= lowest + commitLength + signatureLength else { return nil }
        let finalCommit = footer.manifestOffset - commitLength
        var candidates = [finalCommit - signatureLength]
        // An index ends with its count (`Spec/0001 §11.8`), which gives its length.
        let countBytes = try source.read(ranges: [(finalCommit - 8)..<(finalCommit - 4)])[0]
        let count = countBytes.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self)) }
        let indexLength = ManifestIndex.framedLength(count: count)
        if finalCommit >= lowest + indexLength + signatureLength {
            candidates.append(finalCommit - indexLength - signatureLength)
        }
        for offset in candidates {
            guard let (record, _) = try? source.readRecord(at: offset, fileSize: size), record.type == .signature,
                UInt64(record.framed.count) == signatureLength
            else { continue }
            if offset != finalCommit - signatureLength {
                guard let (index, _) = try? source.readRecord(at: offset + signatureLength, fileSize: size),
                    index.type == .manifestIndex
                else { continue }
            }
            return (try SignatureRecord.decode(record.payload, offset: offset + UInt64(RecordFraming.headerLength)), offset)
        }
        return nil
    }

    private static func decodeCommit(_ payload: [UInt8], at offset: UInt64) throws(CairnError) -> CommitRecord {
        var r = ByteReader(payload, baseOffset: offset + UInt64(RecordFraming.headerLength), what: "commit record")
        return try CommitRecord.decode(&r)
    }
}

extension ArchiveReader {
    /// Verifies the root signature of the archive `source` serves, reading its prelude, header
    /// record and footer first (`Spec/0004-trusted-archives.md §4.3`): what a sender (`cairn cat
    /// --trusted-key`) checks before it sends a byte.
    ///
    /// - Returns: the key id of the signature that verified.
    /// - Throws: as ``verifyRootSignature(of:footer:start:trustedKeys:)``, naming the source;
    ///   `.truncated` for an archive without a valid footer.
    package static func requireTrustedRoot(of source: any ArchiveSource, trustedKeys: [PublicKey]) throws(CairnError) -> SigningKeyID {
        do throws(CairnError) {
            // The prelude first, as every reader checks it: an encrypted archive read without an
            // identity is named as such (`Spec/0004 §6.2` rule 1), not as a bad header record.
            _ = try Prelude.parse(try source.read(ranges: [0..<min(source.size, UInt64(Prelude.length))])[0])
            let (header, headerEnd) = try source.readRecord(at: UInt64(Prelude.length), fileSize: source.size)
            guard header.type == .header else {
                throw CairnError(.corrupted, "the first record is not a header record", offset: UInt64(Prelude.length))
            }
            let footer = try source.readFooter(fileSize: source.size)
            let start = Array(try source.read(ranges: [0..<headerEnd])[0])
            return try verifyRootSignature(of: source, footer: footer, start: start, trustedKeys: trustedKeys)
        } catch {
            throw error.withPath(source.name)
        }
    }
}
