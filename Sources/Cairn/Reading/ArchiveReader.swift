import Glibc

/// Random access to a complete archive in a seekable file, through its trailing manifest
/// (`Spec/0001-container-format.md §11–12`).
///
/// Opening reads the prelude, the header record, the footer and the manifest, checking every
/// CRC-32, the manifest's SHA-256 and every length against the file size and the format's
/// limits. Chunk contents are read on demand by ``ChunkPrefetcher/Source/decode(_:using:)``,
/// which checks the chunk record's CRC-32 and the SHA-256 of the decompressed bytes.
///
/// - Complexity: opening is O(manifest size); reading one file reads only its chunks.
package final class ArchiveReader {
    /// What errors name: the archive's path, or its URL.
    package let path: String
    /// Where the archive's bytes come from: a local file (`pread`) or a remote one (ranges).
    package let source: any ArchiveSource
    /// The local file's descriptor (for the structural walk, `verify` and extracting
    /// everything front to back); nil for a remote source.
    package let descriptor: FileDescriptor?
    package let fileSize: UInt64
    package let header: ArchiveHeader
    package let footer: Footer
    package let manifest: Manifest
    /// The archive's format version.
    package let version: FormatVersion
    /// Offset of the first record after the header (the first commit).
    package let bodyOffset: UInt64
    /// Whether every record was walked and compared with the manifest (§13.1 step 5). False for
    /// a remote source: the extractor then checks the records of each entry it extracts
    /// (§13.7, ``ArchiveScanner/checkRecords(ofEntries:in:version:source:limit:batchBytes:)``).
    package let walkedRecords: Bool
    /// With `keepingManifestRegion`: the manifest records as read (`footer.manifestOffset ..<`
    /// the footer).
    package let manifestRegion: [UInt8]?
    /// The key whose root signature verified when the reader was opened with trusted keys
    /// (`Spec/0004-trusted-archives.md §4.3`); nil without trusted keys.
    package let verifiedSigner: SigningKeyID?
    /// The keys the reader was opened with: every front-to-back read of this archive (extracting
    /// everything, `verify`) checks its signatures with them (`Spec/0004 §4.2`).
    package let trustedKeys: [PublicKey]
    /// The archive's keys (`Spec/0004-trusted-archives.md §6.6–§6.7`), given by whoever opened
    /// it: every read of its chunks checks their ids by ``idFunction``. Nil for a plain archive.
    package let keying: ChunkKeying?
    /// The archive's chunk id rule, from ``keying``.
    package let idFunction: ChunkIDFunction

    /// Opens `path` and checks that its manifest describes the records really there.
    ///
    /// Reads and checks the prelude, the header record, the footer and the manifest (every CRC-32,
    /// the manifest's SHA-256, every length against the file size and the format's limits,
    /// §13.1), then, with `verifyingStructure`, walks the records from the header to the manifest
    /// with the streaming checker (``ArchiveScanner``), reading everything but chunk payloads: the
    /// order of §9, the entry rules (``EntryRules``), every count, and every manifest row against
    /// the record it describes. Without the walk the entry rules are applied to the manifest's
    /// rows. A footer that fails its checks, or a manifest that disagrees with the records, makes
    /// the reader scan the file from its start (§13.3) and report what that finds: usually an
    /// incomplete archive whose end only looks like a footer.
    ///
    /// - Throws: `CairnError`: `.notFound`/`.io` if it cannot be read; `.corrupted` (bad magic,
    ///   malformed record, a manifest that disagrees with the records); `.unsupportedVersion`;
    ///   `.checksumMismatch`; `.unsafePath`; `.truncated` when the archive is incomplete (verify
    ///   it with `verify --partial`).
    package convenience init(
        path: String, verifyingStructure: Bool = true, trustedKeys: [PublicKey] = [], keying: ChunkKeying? = nil
    ) throws(CairnError) {
        let source: LocalArchiveSource
        do throws(CairnError) { source = try LocalArchiveSource(path: path) } catch { throw error.withPath(path) }
        try self.init(source: source, verifyingStructure: verifyingStructure, trustedKeys: trustedKeys, keying: keying)
    }

    /// Opens the archive `source` serves, as ``init(path:verifyingStructure:trustedKeys:)``; the reader owns
    /// the source and closes it in ``close()`` (or when opening fails).
    ///
    /// A remote source (``ArchiveSource/isRemote``) is never walked (that would transfer the
    /// whole archive) nor scanned from its start: the entry rules are applied to the manifest's
    /// rows, and the extractor checks the records of each entry it extracts (§13.7).
    ///
    /// - Throws: as ``init(path:verifyingStructure:trustedKeys:)``, naming the source's path or URL.
    ///
    /// - Parameters:
    ///   - keepingManifestRegion: keep the manifest records' bytes as read, in
    ///     ``manifestRegion`` (a seeded fetch appends them to what it rebuilds).
    ///   - trustedKeys: when not empty, the root signature is verified from the archive's tail
    ///     before the manifest is read (`Spec/0004 §4.3`), and the walk checks every signature.
    ///   - keying: the archive's keys (`Spec/0004 §6.6`); nil for a plain archive. The wrong
    ///     keys are found at the first chunk read (`.checksumMismatch`), not here.
    /// - Throws: also `.untrusted` and `.checksumMismatch` for an archive no trusted key signed.
    package init(
        source: any ArchiveSource, verifyingStructure: Bool = true, keepingManifestRegion: Bool = false, trustedKeys: [PublicKey] = [],
        keying given: ChunkKeying?
    ) throws(CairnError) {
        self.path = source.name
        self.source = source
        // An encrypted archive's keys come from its key block, whatever the caller passed.
        let keying = (source as? SealedArchiveSource)?.keying ?? given
        // A local file, or the inner archive of a local encrypted one: walked and scanned as a
        // plain local file is, its sealed blocks opened as they are read.
        let local: (any PositionalInput)? =
            (source as? LocalArchiveSource)?.descriptor ?? (source as? SealedArchiveSource).flatMap { $0.isRemote ? nil : $0 }
        let walking = verifyingStructure && !source.isRemote && local != nil
        do throws(CairnError) {
            let size = source.size
            var prelude = [UInt8](repeating: 0, count: Prelude.length)
            let got = try prelude.withMutableBytes { (raw) throws(CairnError) in
                try source.read(fromAbsoluteOffset: 0, into: raw)
            }
            let version = try Prelude.parse(Array(prelude[0..<got]))
            let (headerRecord, headerEnd) = try source.readRecord(at: UInt64(Prelude.length), fileSize: size)
            guard headerRecord.type == .header else {
                throw CairnError(.corrupted, "the first record is not a header record", offset: UInt64(Prelude.length))
            }
            let header = try ArchiveHeader.decode(headerRecord.payload, offset: UInt64(Prelude.length + RecordFraming.headerLength))
            let footer = try source.readFooter(fileSize: size)
            var signer: SigningKeyID?
            if !trustedKeys.isEmpty {
                do throws(CairnError) {
                    signer = try ArchiveReader.verifyRootSignature(
                        of: source, footer: footer, start: Array(prelude[0..<got]) + headerRecord.framed, trustedKeys: trustedKeys)
                } catch {
                    // What the stream reader says first (an earlier bad signature, an unsigned
                    // archive at the record after commit 0) is what the seekable one says too.
                    guard let local else { throw error }
                    throw ArchiveReader.firstTrustProblem(local, rootProblem: error, trustedKeys: trustedKeys, keying: keying)
                }
            }
            let manifest: Manifest
            var region: [UInt8]?
            // Where the manifest and footer claim to start: a problem the scan finds there is the
            // same problem the footer check found.
            let tail = min(footer.manifestOffset, size - UInt64(Footer.framedLength))
            do throws(CairnError) {
                (manifest, region) = try ArchiveReader.readManifest(
                    source, footer: footer, bodyOffset: headerEnd, fileSize: size, version: version)
            } catch {
                guard let local else { throw error }
                throw ArchiveReader.fallBackToScanning(
                    local, footerProblem: error, tail: tail, trustedKeys: trustedKeys, keying: keying)
            }
            if walking, let local {
                do throws(CairnError) {
                    try ArchiveReader.walk(local, fileSize: size, against: manifest, trustedKeys: trustedKeys, keying: keying)
                } catch {
                    // A manifest that disagrees with the records may be a forgery inside a
                    // truncated archive: scanning tells, and otherwise names the same problem.
                    throw ArchiveReader.fallBackToScanning(
                        local, footerProblem: error, tail: tail, trustedKeys: trustedKeys, keying: keying)
                }
            } else {
                var rules = EntryRules()
                for row in manifest.entries { try rules.admit(row.entry, offset: row.recordOffset) }
            }
            self.descriptor = (source as? LocalArchiveSource)?.descriptor
            self.fileSize = size
            self.header = header
            self.footer = footer
            self.manifest = manifest
            self.version = version
            self.bodyOffset = headerEnd
            self.walkedRecords = walking
            self.manifestRegion = keepingManifestRegion ? region : nil
            self.verifiedSigner = signer
            self.trustedKeys = trustedKeys
            self.keying = keying
            self.idFunction = ChunkIDFunction(keying: keying)
        } catch {
            source.close()
            throw error.withPath(source.name)
        }
    }

    /// The structural walk (§13.1 step 5): the records from offset 0 to the end, chunk payloads
    /// skipped, through the one checker, comparing each with `manifest`.
    private static func walk(
        _ fd: any PositionalInput, fileSize: UInt64, against manifest: Manifest, trustedKeys: [PublicKey], keying: ChunkKeying?
    ) throws(CairnError) {
        let stream = RecordStream(skippingChunkPayloadsOf: fd, fileSize: fileSize)
        let scanner = ArchiveScanner(verifyingChainDigests: false, checkingAgainst: manifest, trustedKeys: trustedKeys, keying: keying)
        try scanner.start(stream)
        try scanner.run(over: stream, until: .atFooter { CairnError(.truncated, "the records end before the footer", offset: $0) })
    }

    /// §13.3: the end of the file looked like a footer but something after it failed. Scanning
    /// from the start tells an incomplete archive (whose last chunk happens to end like a footer)
    /// from a corrupt one, and names the first bad offset.
    ///
    /// - Parameter tail: where the manifest and footer begin; a corruption the scan finds from
    ///   there on is the footer's problem, reported as such.
    private static func fallBackToScanning(
        _ fd: any PositionalInput, footerProblem: CairnError, tail: UInt64, trustedKeys: [PublicKey], keying: ChunkKeying?
    ) -> CairnError {
        let scanned: CairnError
        var verified: UInt64 = 0
        let stream = RecordStream(input: PositionalByteInput(fd))
        let scanner = ArchiveScanner(trustedKeys: trustedKeys, keying: keying)
        do throws(CairnError) {
            try scanner.start(stream)
            try scanner.run(over: stream, until: .atFooter { CairnError(.truncated, "the records end without a footer", offset: $0) })
            verified = scanner.verifiedLength
            return footerProblem  // the records are fine: the footer or manifest is what lies
        } catch {
            verified = scanner.verifiedLength
            scanned = error
        }
        if scanned.code == footerProblem.code, scanned.offset == footerProblem.offset { return scanned }
        if scanned.code != .truncated, (scanned.offset ?? 0) >= tail { return footerProblem }
        let note = "the end of the file looks like a footer, but \(footerProblem.message)"
            + (footerProblem.offset.map { " (at offset \($0))" } ?? "")
            + "; scanning from the start"
        if scanned.code == .truncated {
            return CairnError(
                .truncated,
                "the archive is incomplete: \(note), its records end at offset \(scanned.offset ?? 0) inside a record, "
                    + "and the first \(verified) bytes verify up to the last commit; 'cairn verify --partial' tells how much is good",
                offset: scanned.offset)
        }
        var error = scanned
        error.message = "\(scanned.message) (\(note) found this first)"
        return error
    }

    /// The root signature failed (`Spec/0004 §4.3`): the first problem a trusting front-to-back
    /// read finds (an unsigned archive at the record after commit 0, an earlier signature that
    /// does not verify), so that the seekable and streaming readers refuse alike; `rootProblem`
    /// when that read finds nothing earlier.
    private static func firstTrustProblem(
        _ fd: any PositionalInput, rootProblem: CairnError, trustedKeys: [PublicKey], keying: ChunkKeying?
    ) -> CairnError {
        do throws(CairnError) {
            let stream = RecordStream(input: PositionalByteInput(fd))
            let scanner = ArchiveScanner(trustedKeys: trustedKeys, keying: keying)
            try scanner.start(stream)
            try scanner.run(over: stream, until: .unchecked)
        } catch {
            if error.code != .truncated { return error }
        }
        return rootProblem
    }

    /// Closes the source.
    package func close() {
        source.close()
    }

    private static func readManifest(
        _ fd: any ArchiveSource, footer: Footer, bodyOffset: UInt64, fileSize: UInt64, version: FormatVersion
    ) throws(CairnError) -> (Manifest, [UInt8]) {
        let footerOffset = fileSize - UInt64(Footer.framedLength)
        let (end, overflow) = footer.manifestOffset.addingReportingOverflow(footer.manifestLength)
        guard !overflow, footer.manifestOffset >= bodyOffset, end == footerOffset else {
            throw CairnError(.corrupted, "footer points at a manifest outside the file", offset: footerOffset)
        }
        // 1.x rows cost at least 52 (chunk), 4 (reference) and 60 (entry) bytes on disk, so
        // larger counts are lies. A 2.0 manifest is compressed; its body is bounded instead.
        guard !version.isVersion1
            || (footer.chunkCount <= footer.manifestLength / 52 && footer.referenceCount <= footer.manifestLength / 4
                && footer.entryCount <= footer.manifestLength / 60)
        else {
            throw CairnError(.corrupted, "footer counts do not fit the manifest's size", offset: footerOffset)
        }
        var region = [UInt8](repeating: 0, count: Int(footer.manifestLength))
        let got = try region.withMutableBytes { (raw) throws(CairnError) in
            try fd.read(fromAbsoluteOffset: footer.manifestOffset, into: raw)
        }
        guard got == region.count else { throw CairnError(.truncated, "the manifest is cut off", offset: footer.manifestOffset) }
        let (manifest, digest) = try Manifest.decode(region: region, offset: footer.manifestOffset, version: version)
        guard digest == footer.manifestDigest else {
            throw CairnError(.checksumMismatch, "the manifest does not match the footer's SHA-256", offset: footer.manifestOffset)
        }
        guard UInt64(manifest.chunks.count) == footer.chunkCount, UInt64(manifest.references.count) == footer.referenceCount,
            UInt64(manifest.entries.count) == footer.entryCount
        else {
            throw CairnError(.corrupted, "the footer's counts do not match the manifest's tables", offset: footerOffset)
        }
        for row in manifest.entries where row.entry.kind == .file {
            var total: UInt64 = 0
            for reference in manifest.references[Int(row.firstReference)..<Int(row.firstReference + row.referenceCount)] {
                total += UInt64(manifest.chunks[Int(reference)].rawLength)
            }
            guard total == row.entry.size else {
                throw CairnError(
                    .corrupted, "the manifest says \(row.entry.size) bytes but its chunks hold \(total)", path: row.entry.path,
                    offset: row.recordOffset)
            }
        }
        for row in manifest.packs {
            guard row.offset >= bodyOffset, row.offset < footer.manifestOffset else {
                throw CairnError(.corrupted, "manifest places a pack outside the archive body", offset: row.offset)
            }
        }
        for row in manifest.chunks where row.pack == nil {
            let (chunkEnd, o) = row.offset.addingReportingOverflow(
                UInt64(RecordFraming.overhead + ChunkRecordPrefix.length) + UInt64(row.storedLength))
            guard !o, row.offset >= bodyOffset, chunkEnd <= footer.manifestOffset else {
                throw CairnError(.corrupted, "manifest places chunk \(row.id) outside the archive body", offset: row.offset)
            }
        }
        return (manifest, region)
    }

    /// Decodes a chunk record payload into `destination` and verifies its id.
    ///
    /// - Parameters:
    ///   - payload: the payload, or bytes holding it at `range` (a framed record, so that a
    ///     verifier need not copy the payload out).
    ///   - range: where the payload lies in `payload`; nil: all of it.
    ///   - offset: the record's archive offset, for errors.
    ///   - ids: the archive's chunk id rule (SHA-256, or keyed, `Spec/0004-trusted-archives.md §6.6`).
    package static func decodeChunk(
        _ payload: [UInt8], range: Range<Int>? = nil, expected: Digest?, rawLength: Int?, offset: UInt64, ids: ChunkIDFunction,
        using decompressor: ChunkDecompressor, into destination: UnsafeMutableRawBufferPointer
    ) throws(CairnError) {
        let bounds = range ?? 0..<payload.count
        guard bounds.lowerBound >= 0, bounds.upperBound <= payload.count else {
            throw CairnError(.corrupted, "chunk record payload out of bounds", offset: offset)
        }
        // ByteReader's base offset is that of `payload[0]`.
        let (base, under) = (offset + UInt64(RecordFraming.headerLength)).subtractingReportingOverflow(UInt64(bounds.lowerBound))
        var r = ByteReader(payload, range: bounds, baseOffset: under ? 0 : base, what: "chunk record")
        let prefix = try ChunkRecordPrefix.decode(&r, storedLength: bounds.count - ChunkRecordPrefix.length)
        if let expected, prefix.id != expected {
            throw CairnError(.corrupted, "chunk record holds \(prefix.id), expected \(expected)", offset: offset)
        }
        if let rawLength, prefix.rawLength != rawLength {
            throw CairnError(.corrupted, "chunk \(prefix.id) declares \(prefix.rawLength) bytes, expected \(rawLength)", offset: offset)
        }
        try payload.withBytes { (raw) throws(CairnError) in
            try decodeChunk(
                prefix, stored: UnsafeRawBufferPointer(rebasing: raw[(bounds.lowerBound + ChunkRecordPrefix.length)..<bounds.upperBound]),
                offset: offset, ids: ids, using: decompressor, into: destination)
        }
    }

    /// Decodes a chunk record's stored bytes, whose prefix `prefix` has been decoded, into
    /// `destination` and checks their id by the archive's rule `ids` against the record's: the
    /// one content check of ``decodeChunk(_:range:expected:rawLength:offset:ids:using:into:)``,
    /// for a caller that holds the record's bytes in its own memory.
    ///
    /// - Throws: as ``decodeChunk(_:range:expected:rawLength:offset:ids:using:into:)``, naming
    ///   `offset` (the record's).
    package static func decodeChunk(
        _ prefix: ChunkRecordPrefix, stored: UnsafeRawBufferPointer, offset: UInt64, ids: ChunkIDFunction, using decompressor: ChunkDecompressor,
        into destination: UnsafeMutableRawBufferPointer
    ) throws(CairnError) {
        guard destination.count >= prefix.rawLength else {
            throw CairnError(.corrupted, "chunk \(prefix.id) is larger than expected", offset: offset)
        }
        let out = UnsafeMutableRawBufferPointer(rebasing: destination[0..<prefix.rawLength])
        do throws(CairnError) {
            try decompressor.decompress(codec: prefix.codec, stored: stored, rawLength: prefix.rawLength, into: out)
        } catch {
            var e = error
            e.offset = offset
            e.message = "chunk \(prefix.id): \(e.message)"
            throw e
        }
        let actual = try ids.id(of: UnsafeRawBufferPointer(out))
        guard actual == prefix.id else {
            throw CairnError(
                .checksumMismatch, "chunk content does not match its id (expected \(prefix.id), got \(actual))",
                offset: offset)
        }
    }

    /// Where every record `manifest` names starts (entry records, chunk records, packs) and
    /// `end` (the manifest's offset), sorted and without repeats.
    package static func recordStarts(of manifest: Manifest, end: UInt64) -> [UInt64] {
        var starts = Set<UInt64>()
        for row in manifest.entries { starts.insert(row.recordOffset) }
        for row in manifest.chunks { starts.insert(row.offset) }
        for row in manifest.packs { starts.insert(row.offset) }
        starts.insert(end)
        return starts.sorted()
    }

    /// The first of `starts` (sorted) after `offset`, or `end`: where the record at `offset`
    /// ends at the latest.
    package static func nextRecordStart(after offset: UInt64, in starts: [UInt64], end: UInt64) -> UInt64 {
        var low = 0
        var high = starts.count
        while low < high {
            let middle = (low + high) / 2
            if starts[middle] <= offset { low = middle + 1 } else { high = middle }
        }
        return low < starts.count ? min(starts[low], end) : end
    }

    /// The chunk-table indices of entry `entryIndex`'s content.
    package func references(ofEntry entryIndex: Int) -> ArraySlice<UInt32> {
        let row = manifest.entries[entryIndex]
        let start = Int(row.firstReference)
        return manifest.references[start..<(start + Int(row.referenceCount))]
    }
}
