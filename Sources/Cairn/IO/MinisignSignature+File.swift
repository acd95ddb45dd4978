import Glibc

/// Detached minisign signatures of files (`Spec/0004-trusted-archives.md §2.4`).
extension MinisignSignature {
    /// The largest file a legacy (`Ed`, not prehashed) signature is checked over, in bytes: such
    /// a signature covers the whole file, which must then be held in memory. Cairn writes only
    /// prehashed (`ED`) signatures, which need no such limit.
    package static let legacyFileByteLimit = 256 << 20

    /// The signature file minisign uses for `path`: `path` + `.minisig`.
    public static func defaultSignaturePath(for path: String) -> String { path + ".minisig" }

    /// Signs the file at `path` as `minisign -S` does: a prehashed (`ED`) signature of its
    /// BLAKE2b-512, read in 64 KiB blocks (memory does not grow with the file), and the trusted
    /// comment `timestamp:<now>\tfile:<name>\thashed`.
    ///
    /// - Parameters:
    ///   - signatureFile: where to write; `path.minisig` by default.
    ///   - replacing: whether an existing signature file may be replaced.
    ///   - timestamp: the comment's time in seconds since 1970; now by default.
    /// - Returns: the signature, as written.
    /// - Throws: ``CairnError`` naming the file: `.notFound` / `.io` when `path` cannot be read or
    ///   the signature cannot be written, `.alreadyExists` when the signature file exists and not
    ///   `replacing` (nothing is written).
    @discardableResult
    public static func sign(
        fileAt path: String, with key: SigningKey, signatureFile: String? = nil, replacing: Bool = false, timestamp: UInt64? = nil
    ) throws(CairnError) -> MinisignSignature {
        let output = signatureFile ?? defaultSignaturePath(for: path)
        if !replacing, access(output, F_OK) == 0 {
            throw CairnError(.alreadyExists, "already exists; refusing to replace it", path: output)
        }
        let name = path.split(separator: "/", omittingEmptySubsequences: false).last.map(String.init) ?? path
        let comment = defaultTrustedComment(timestamp: timestamp ?? UInt64(max(0, time(nil))), fileName: Array(name.utf8))
        let signature = try MinisignSignature(signing: try prehash(fileAt: path), prehashed: true, trustedComment: comment, with: key)
        try SmallFile.write(Array(signature.fileText.utf8), to: output, mode: 0o644, replacing: replacing)
        return signature
    }

    /// Checks the detached signature of the file at `path` as `minisign -V` does (prehashed
    /// `ED` and legacy `Ed` signatures, and the signature of the trusted comment).
    ///
    /// - Parameters:
    ///   - signatureFile: the signature; `path.minisig` by default.
    ///   - trustedKeys: the keys accepted.
    /// - Returns: the signature, whose ``trustedComment`` the caller may show.
    /// - Throws: ``CairnError``: `.notFound` / `.io` when a file cannot be read; `.invalidArgument`
    ///   when the signature file is not a minisign signature; `.untrusted` naming the key ids
    ///   when none of `trustedKeys` made it; `.checksumMismatch` when it does not verify;
    ///   `.limitExceeded` for a legacy signature over a file larger than 256 MiB.
    public static func verify(fileAt path: String, signatureFile: String? = nil, trustedKeys: [PublicKey]) throws(CairnError)
        -> MinisignSignature
    {
        let signaturePath = signatureFile ?? defaultSignaturePath(for: path)
        let text = try SmallFile.read(signaturePath, limit: fileByteLimit, what: "minisign signature")
        let signature = try MinisignSignature(parsing: text, path: signaturePath)
        // The key is looked up before the file is read: an untrusted signature costs nothing.
        _ = try signature.signer(among: trustedKeys, path: signaturePath)
        let message =
            signature.isPrehashed
            ? try prehash(fileAt: path) : try SmallFile.read(path, limit: legacyFileByteLimit, what: "file with a legacy minisign signature")
        try signature.check(message: message, against: trustedKeys, path: signaturePath)
        return signature
    }

    /// BLAKE2b-512 of the file at `path`, read in 64 KiB blocks.
    package static func prehash(fileAt path: String) throws(CairnError) -> [UInt8] {
        let descriptor = try FileDescriptor.open(path, flags: O_RDONLY)
        return try descriptor.closeAfter { () throws(CairnError) -> [UInt8] in
            let hash = try Blake2b(outputByteCount: prehashByteCount)
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)
            defer { buffer.deallocate() }
            while true {
                let count = try descriptor.read(into: buffer)
                if count == 0 { break }
                hash.update(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            }
            return hash.finish()
        }
    }
}
