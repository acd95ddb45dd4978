/// Names a verified prefix of an archive: its length and the chain digest of the commit (or
/// footer) that ends it (`Spec/0001-container-format.md §10.3`, §10.5).
///
/// Written `cairn1-<length>-<64 hex digits>`. Two archives whose prefixes of that length have
/// the same token are identical over that length (the chain digest is a SHA-256 over every byte
/// before the commit), so a sender can check a receiver's token against its own file and send
/// only the bytes after it.
public struct ResumeToken: Hashable, Sendable, CustomStringConvertible {
    /// Bytes of the verified prefix: the offset just after its last commit record or footer.
    public var length: UInt64
    /// The chain digest recorded in that commit or footer.
    public var chainDigest: Digest

    public init(length: UInt64, chainDigest: Digest) {
        self.length = length
        self.chainDigest = chainDigest
    }

    /// Parses `cairn1-<length>-<hex>`.
    public init?(_ text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "cairn1", let length = UInt64(parts[1]),
            let digest = Digest(hexString: String(parts[2]))
        else { return nil }
        self.init(length: length, chainDigest: digest)
    }

    public var description: String { "cairn1-\(length)-\(chainDigest.hexString)" }

    /// Checks that the archive `source` serves has this token: the record ending at ``length`` is
    /// a commit record, or the footer, with this chain digest. Reads that one record (over HTTP,
    /// one small range request).
    ///
    /// - Throws: `.tokenMismatch` naming the offset when it does not; what reading throws
    ///   (`.network`, `.sourceChanged`, ... naming the URL) for a remote source.
    package func check(against source: any ArchiveSource) throws(CairnError) {
        let (descriptor, fileSize, path) = (source, source.size, source.name)
        let mismatch = CairnError(
            .tokenMismatch, "the receiver's prefix is not a prefix of this archive (token \(self))", path: path,
            offset: length)
        guard length <= fileSize else { throw mismatch }
        if length == 0, chainDigest == .zero { return }  // the empty prefix is a prefix of anything
        for framedLength in [CommitRecord.framedLength, Footer.framedLength] {
            guard length >= UInt64(framedLength) else { continue }
            let start = length - UInt64(framedLength)
            let record: ArchiveRecord
            do throws(CairnError) {
                (record, _) = try descriptor.readRecord(at: start, fileSize: length)
            } catch {
                // A record that does not parse there is no commit; a source that cannot be read is
                // its own problem.
                let format: [CairnError.Code] = [.corrupted, .checksumMismatch, .truncated, .unsupportedVersion, .limitExceeded]
                if format.contains(error.code) { continue }
                throw error.withPath(path)
            }
            let payloadOffset = start + UInt64(RecordFraming.headerLength)
            if record.type == .commit, framedLength == CommitRecord.framedLength {
                var r = ByteReader(record.payload, baseOffset: payloadOffset, what: "commit record")
                if let commit = try? CommitRecord.decode(&r), commit.chainDigest == chainDigest { return }
            }
            if record.type == .footer, framedLength == Footer.framedLength, length == fileSize {
                var r = ByteReader(record.payload, baseOffset: payloadOffset, what: "footer")
                if let footer = try? Footer.decode(&r), footer.chainDigest == chainDigest { return }
            }
        }
        throw mismatch
    }
}

/// What ``Extractor/verifyPrefix(at:trustedKeys:)`` found in a possibly incomplete archive.
public struct PrefixVerification: Sendable {
    /// Bytes that verify: the end of the last valid commit record, or the whole file when its
    /// footer verified.
    public var verifiedLength: UInt64
    /// The token naming that prefix; give it to the sender with the length.
    public var resumeToken: ResumeToken
    /// Whether the archive is complete (its footer verified).
    public var isComplete: Bool
    /// Bytes in the file.
    public var fileBytes: UInt64
    /// Entries and content bytes fully inside the verified prefix.
    public var entryCount: Int
    public var contentBytes: UInt64
    /// Why verification stopped before the end of the file, if it did.
    public var stopReason: CairnError?
    /// The archive's header, when it verified (its metadata names the sources of an
    /// interrupted `create`, `cairn.sources`).
    public var header: ArchiveHeader? = nil
    /// Where a copy of the prefix is cut to continue it: ``verifiedLength``, or with trusted keys
    /// the end of the signature record that covers it (`Spec/0004-trusted-archives.md §4.2`), so
    /// that the reader that continues the copy reads that signature again.
    package var resumableLength: UInt64 = 0
}

extension Extractor {
    /// Verifies as much of a possibly incomplete archive as is valid (a transfer cut at any
    /// byte): every record's CRC-32 and rules and every commit's chain digest (a SHA-256 over all
    /// bytes before it) up to the last valid commit or the footer. Chunk contents are not
    /// decompressed here; `verify` and extraction check them.
    ///
    /// - Parameters:
    ///   - location: a local file (the copy being received).
    ///   - trustedKeys: when not empty, the verified length is the `signedLength` of the last
    ///     signature that verifies under one of them (`Spec/0004-trusted-archives.md §4.2`).
    /// - Returns: the verified length and the resume token naming it.
    /// - Throws: `CairnError` naming the archive: `.untrusted` when `trustedKeys` is not empty
    ///   and the archive is not signed or signed by another key (a refusal; a signature that
    ///   does not verify ends the prefix, ``PrefixVerification/stopReason``); `.invalidArgument` for a location that is not
    ///   a local file; `.notFound`; `.corrupted`/`.unsupportedVersion` when not even the prelude
    ///   and header are valid; `.io`; or `CancellationError`.
    nonisolated(nonsending) public static func verifyPrefix(
        at location: ArchiveLocation, trustedKeys: [PublicKey] = []
    ) async throws -> PrefixVerification {
        try await verifyPrefix(at: location, trustedKeys: trustedKeys, keying: nil)
    }

    /// ``verifyPrefix(at:trustedKeys:)`` of a possibly incomplete encrypted archive
    /// (`Spec/0004-trusted-archives.md §6.9`): its key block is opened with `decryption`, its
    /// whole sealed blocks are opened as a partial archive's (none final, a torn last block left
    /// out; a file whose last block opens as the final one is read as complete), and the inner
    /// archive they hold is verified as a plain one. Lengths and offsets are the inner archive's;
    /// a block that fails authentication ends the prefix (``PrefixVerification/stopReason``).
    ///
    /// - Parameters:
    ///   - location: a local file (the copy being received).
    ///   - trustedKeys: as in ``verifyPrefix(at:trustedKeys:)``, for the inner archive's signatures.
    ///   - decryption: identities or the passphrase; empty: as ``verifyPrefix(at:trustedKeys:)``.
    /// - Returns: the inner archive's verified length and the resume token naming it.
    /// - Throws: as ``verifyPrefix(at:trustedKeys:)``, and `.untrusted` when no identity opens the
    ///   key block or the archive is not encrypted.
    nonisolated(nonsending) public static func verifyPrefix(
        at location: ArchiveLocation, trustedKeys: [PublicKey] = [], decryption: ArchiveDecryption
    ) async throws -> PrefixVerification {
        guard !decryption.isEmpty else { return try await verifyPrefix(at: location, trustedKeys: trustedKeys, keying: nil) }
        let path = try location.requireFile(for: "the archive")
        let inner = try await DedicatedThread.run { () throws(CairnError) in
            try decryption.open(try LocalArchiveSource(path: path), partial: true)
        }
        defer { inner.close() }
        guard let sealed = inner as? SealedArchiveSource else { throw CairnError(.untrusted, "the archive is not encrypted", path: path) }
        // Block by block: a block that fails authentication ends the prefix where it starts, as a
        // damaged record ends a plain one; a larger read would fail the good blocks before it too.
        let blocks = PositionalByteInput(sealed, readingUnitsOf: sealed.layout.blockSize)
        return try await verifyPrefix(reading: blocks, path: path, trustedKeys: trustedKeys, keying: sealed.keying)
    }

    /// ``verifyPrefix(at:trustedKeys:)`` of a keyed archive (`Spec/0004 §6.6`): packs' inline
    /// chunks are checked under `keying`.
    nonisolated(nonsending) package static func verifyPrefix(
        at location: ArchiveLocation, trustedKeys: [PublicKey] = [], keying: ChunkKeying?
    ) async throws -> PrefixVerification {
        let path = try location.requireFile(for: "the archive")
        let descriptor = try FileDescriptor.open(path, flags: 0)
        defer { _ = try? descriptor.close() }
        return try await verifyPrefix(reading: descriptor, path: path, trustedKeys: trustedKeys, keying: keying)
    }

    /// ``verifyPrefix(at:trustedKeys:)`` of the bytes `input` reads (a file, standard input, an
    /// encrypted archive's inner bytes), named
    /// `path` in errors.
    nonisolated(nonsending) package static func verifyPrefix(
        reading input: any ByteInput, path: String, trustedKeys: [PublicKey] = [], keying: ChunkKeying?
    ) async throws -> PrefixVerification {
        let stream = RecordStream(input: input)
        // The chain digests bind every byte of the prefix to its commits, which is what a
        // transfer needs; chunk contents are checked again on extraction or by `verify`.
        let scanner = ArchiveScanner(trustedKeys: trustedKeys, keying: keying)
        do {
            try scanner.start(stream)
        } catch {
            // A copy too short to hold the prelude and header has verified nothing yet: the
            // receiver asks for everything. Anything else (wrong magic, version) is not Cairn.
            guard error.code == .truncated else { throw error.withPath(path) }
            while (try? stream.isAtEnd()) == false { _ = try stream.readBytes(1 << 20) }
            return PrefixVerification(
                verifiedLength: 0, resumeToken: ResumeToken(length: 0, chainDigest: .zero), isComplete: false,
                fileBytes: stream.offset, entryCount: 0, contentBytes: 0, stopReason: error.withPath(path))
        }
        var stopReason: CairnError?
        var committedEntries = 0
        var committedContent: UInt64 = 0
        do {
            // The asynchronous loop (an `async` step), which checks for cancellation per record.
            try await scanner.run(over: stream, until: .afterFooterIfAny) { _, events async in
                for case .commit(_, let commit) in events {
                    committedEntries = Int(commit.entryCount)
                    committedContent = commit.contentBytes
                }
            }
        } catch let error as CairnError {
            // A refusal by the trusted keys is not where a prefix stops: nothing of it is trusted.
            if error.code == .untrusted {
                throw error.withPath(path)
            }
            stopReason = error.withPath(path)
        }
        // Read to the end so the file size is known even for a pipe (an encrypted copy's
        // reading ends at a block that does not open: the stop reason names it).
        while (try? stream.isAtEnd()) == false {
            do {
                _ = try stream.readBytes(1 << 20)
            } catch {
                guard stopReason != nil else { throw error }
                break
            }
        }
        let total = stream.offset
        let complete = scanner.footer != nil && stopReason == nil
        if let footer = scanner.footer {
            committedEntries = Int(footer.entryCount)
            committedContent = footer.contentBytes
        }
        return PrefixVerification(
            verifiedLength: scanner.verifiedLength,
            resumeToken: ResumeToken(length: scanner.verifiedLength, chainDigest: scanner.verifiedChainDigest),
            isComplete: complete, fileBytes: total, entryCount: committedEntries, contentBytes: committedContent,
            stopReason: stopReason?.withPath(path), header: scanner.header, resumableLength: scanner.resumableLength)
    }
}
