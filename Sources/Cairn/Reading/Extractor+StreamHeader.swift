import Foundation

extension Extractor {
    /// ``extractStream(from:to:options:progress:trustedKeys:)`` that first reads the stream's prelude and
    /// header record and hands the header to `check` before anything is created at or beside
    /// `destination`: a caller can refuse an archive by its resources version, platform or app
    /// identifier without a byte being written.
    ///
    /// With trusted keys, `check` is called only after commit 0 and the prefix signature that
    /// follows it were read and that signature verified (`Spec/0004-trusted-archives.md §4.2`):
    /// the header it gets is covered by a trusted key's signature, and an archive not signed by
    /// one was refused before `check` saw its header.
    ///
    /// - Parameters:
    ///   - input: the archive's bytes, read front to back once.
    ///   - destination: the directory to extract into (created if missing).
    ///   - options: as for ``extractStream(from:to:options:progress:trustedKeys:)``.
    ///   - progress: content bytes extracted, if given.
    ///   - trustedKeys: as for ``extractStream(from:to:options:progress:trustedKeys:)``.
    ///   - check: called once with the verified header (its record's CRC checked; with trusted
    ///     keys, its signature verified); throwing stops the extraction and the error is
    ///     rethrown as is.
    /// - Returns: what was verified.
    /// - Throws: `.truncated` or `.corrupted` (naming the offset) when the stream does not begin
    ///   with a valid prelude and header; with trusted keys, `.untrusted` or `.checksumMismatch`
    ///   before `check` is called; what `check` throws; otherwise as
    ///   ``extractStream(from:to:options:progress:trustedKeys:)``.
    nonisolated(nonsending) public static func extractStream(
        from input: FileHandle, to destination: URL, options: ExtractionOptions = ExtractionOptions(),
        progress: Progress? = nil, trustedKeys: [PublicKey] = [], checkingHeader check: (ArchiveHeader) throws -> Void
    ) async throws -> VerificationReport {
        try await extractStream(
            from: input, to: destination, options: options, progress: progress, trustedKeys: trustedKeys, keying: nil,
            checkingSignedHeader: { header, _ in try check(header) })
    }

    /// ``extractStream(from:to:options:progress:trustedKeys:checkingHeader:)`` whose `check` also
    /// gets the key id of the signature that verified (nil without trusted keys), of a keyed
    /// archive when `keying` is given (`Spec/0004-trusted-archives.md §6.6`).
    nonisolated(nonsending) package static func extractStream(
        from input: FileHandle, to destination: URL, options: ExtractionOptions = ExtractionOptions(),
        progress: Progress? = nil, trustedKeys: [PublicKey] = [], keying: ChunkKeying?,
        checkingSignedHeader check: (ArchiveHeader, SigningKeyID?) throws -> Void
    ) async throws -> VerificationReport {
        let descriptor = FileDescriptor(rawValue: input.fileDescriptor, path: "<input>")
        let stream = RecordStream(descriptor: descriptor)
        let scanner = ArchiveScanner(emittingChunkPayloads: true, checkingAgainst: nil, trustedKeys: trustedKeys, keying: keying)
        let events: [ArchiveScanner.Event]
        do {
            events = try scanner.startWithSignedHeader(stream)
        } catch {
            throw error.withPath("<input>")
        }
        guard let header = scanner.header else {
            throw CairnError(.corrupted, "the stream has no header record", path: "<input>", offset: stream.offset)
        }
        try check(header, scanner.isTrusting ? scanner.signerKeyID : nil)
        let staging = try StagingDirectory(for: PathBytes.fileSystemPath(destination), options: options)
        let extractor = try StreamExtractor(
            staging: staging, options: options, progress: progress, startedScanner: scanner, startEvents: events, keying: keying)
        return try await extractor.run(stream)
    }
}
