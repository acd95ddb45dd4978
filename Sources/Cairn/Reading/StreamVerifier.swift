/// Verifies an archive read once, front to back: every record's CRC-32 and rules, every commit's
/// chain digest, every chunk's content (on other cores, ``ChunkVerifier``), the manifest and the
/// footer (``ArchiveScanner`` decides what the records mean; this drives it).
///
/// The bytes may come from two inputs, each read once: a resumed fetch's partial file
/// (``readPrefix(from:)``), whose last valid commit this finds, then the bytes after that commit
/// from the server (``verify(_:)``), which continue the same scanner state. So the partial file's
/// prefix is read and checked once per attempt, and the server's first commit after it is checked
/// against the chain digest over the prefix: bytes of another archive, or a prefix damaged on disk,
/// do not verify.
package final class StreamVerifier {
    /// What ``readPrefix(from:)`` found.
    package enum PrefixOutcome: Equatable {
        /// The prefix verified up to the end of its last valid commit record (this offset, > 0);
        /// ``verify(_:)`` continues with the bytes from there.
        case continuing(at: UInt64)
        /// The prefix holds a whole archive, verified up to the end of its footer (this offset;
        /// anything after it is not part of it); ``finish()`` gives the report.
        case complete(at: UInt64)
        /// The prefix verified up to this offset (its last valid commit, or 0), but this
        /// verifier read past it and cannot continue: a fresh one must read the first `offset`
        /// bytes again (or nothing, when 0). Only for a prefix whose records pass their CRC-32
        /// but not the scanner's checks (bytes changed on disk with their CRCs, a remote archive
        /// that broke the format): a cut or a damaged record ends the prefix cleanly.
        case unusable(verifiedUpTo: UInt64)
    }

    private let path: String
    private let checksOnEveryCore: Bool
    private let scanner: ArchiveScanner
    private let chunks: ChunkVerifier
    private var stream: RecordStream?
    private var started = false
    /// Chunk records that end at or before this offset are not decompressed and hashed.
    package private(set) var trustedBelow: UInt64
    /// Called after each commit record (and the footer) verifies, while no chunk was found
    /// damaged, with the verified length and the offset before which every chunk's content is
    /// checked (at most the verified length).
    package var onCommit: ((_ verified: UInt64, _ contentChecked: UInt64) -> Void)?
    /// Bytes ``readPrefix(from:)`` read from its input.
    package private(set) var prefixBytesRead: UInt64 = 0

    /// The most bytes of records after a commit that ``readPrefix(from:)`` holds while it looks for
    /// the next commit (32 MiB, eight commit intervals of the writer): past that, the prefix ends
    /// at the last commit, and what follows it is fetched again.
    package static let pendingLimit = 32 << 20

    /// - Parameters:
    ///   - path: the archive's path or URL, for errors.
    ///   - trustingContentBelow: chunk records that end at or before this offset are not
    ///     decompressed and hashed (a resumed fetch's prefix, whose contents an earlier run
    ///     checked); their CRC-32 and the chain digests over their bytes still are, and those bind
    ///     them to the commits after them.
    ///   - onCommit: see ``onCommit``.
    ///   - trustedKeys: the keys a signature must verify under (`Spec/0004-trusted-archives.md
    ///     §4.2`); the verified length is then that of the last verified signature.
    ///   - keying: the archive's keys (`Spec/0004 §6.6`), by which every chunk id is checked;
    ///     nil for a plain archive.
    ///   - checkingOnEveryCore: read a 2.0 archive's records after its header with a
    ///     ``CheckedRecordStream`` (their CRC-32s and digests on every core); false: one record at a
    ///     time on this thread, as a 1.x archive is (tests compare the two).
    package init(
        path: String, trustingContentBelow trusted: UInt64 = 0, onCommit: ((_ verified: UInt64, _ contentChecked: UInt64) -> Void)? = nil,
        trustedKeys: [PublicKey] = [], keying: ChunkKeying?, checkingOnEveryCore: Bool = true
    ) {
        self.scanner = ArchiveScanner(trustedKeys: trustedKeys, keying: keying)
        self.chunks = ChunkVerifier(ids: scanner.idFunction)
        self.checksOnEveryCore = checkingOnEveryCore
        self.path = path
        self.trustedBelow = trusted
        self.onCommit = onCommit
    }

    /// Reads a possibly incomplete prefix of the archive from `input` (a partial file) to its end,
    /// and verifies it up to its last valid commit record (or its footer): the records after a
    /// commit are held (up to ``pendingLimit`` bytes) and checked only once the next commit record
    /// has arrived whole, so the scanner's state stays at the last commit when the input ends
    /// (or a record fails its CRC-32) before the next one. Chunk contents are queued for
    /// checking as their commit is reached; a damaged one is reported by ``verify(_:)`` or
    /// ``finish()``. Call it at most once, first.
    ///
    /// - Returns: where the prefix's verified bytes end, and whether this verifier continues there.
    /// - Throws: `CancellationError`; never for the prefix's bytes, whose problems only end it.
    nonisolated(nonsending) package func readPrefix(from input: any ByteInput) async throws -> PrefixOutcome {
        let counted = CountingInput(input)
        let stream = RecordStream(input: counted)
        defer { prefixBytesRead = counted.count }
        do throws(CairnError) {
            try scanner.start(stream)
        } catch {
            // Too short to hold the prelude and header, or not an archive: nothing verified.
            return .unusable(verifiedUpTo: 0)
        }
        started = true
        self.stream = stream
        if checksOnEveryCore, !scanner.version.isVersion1 {
            let records = CheckedRecordStream(
                source: InputBlocks(counted), offset: stream.offset, leading: stream.takeBuffered(), trustingContentBelow: trustedBelow,
                ids: scanner.idFunction)
            let outcome: PrefixOutcome
            do {
                outcome = try await readCommitted(HeldUntilCommit(records, atSignatures: scanner.isTrusting), stream: stream) { item, events in
                    try await self.checked(item, events)
                }
            } catch {
                await records.close()
                throw error
            }
            await records.close()
            return outcome
        }
        return try await readCommitted(HeldUntilCommit(stream, atSignatures: scanner.isTrusting), stream: stream) { record, events in
            try await self.consumed(record, events)
        }
    }

    /// ``readPrefix(from:)``'s one rule, for records checked on every core (2.0) or one at a
    /// time (1.x, whose chain runs over every byte): the records after a commit are held, up to
    /// ``pendingLimit`` bytes, and consumed only once the next commit (or the footer) has arrived
    /// whole (``HeldUntilCommit``); the prefix ends where the input gives nothing (a cut, a bad
    /// record), at a record that fails its CRC-32 (a chunk record too), or past the limit.
    ///
    /// - Parameter afterEach: what is done with each record the scanner consumed.
    private nonisolated(nonsending) func readCommitted<Source: ScannerInput>(
        _ held: HeldUntilCommit<Source>, stream: RecordStream,
        afterEach: nonisolated(nonsending) (Source.Item, [ArchiveScanner.Event]) async throws -> Void
    ) async throws -> PrefixOutcome {
        do {
            try await scanner.run(over: held, until: .unchecked, afterEach: afterEach)
        } catch {
            chunks.cancel()
            guard error is CairnError else { throw error }
            return .unusable(verifiedUpTo: scanner.resumableLength)
        }
        // With trusted keys, after the signature record that moved the verified length.
        let verified = scanner.resumableLength
        if scanner.footer != nil {
            // The archive ends at its footer: whatever the file holds after it is not read (the
            // caller cuts it off).
            stream.continueReading(from: NoBytes(), at: verified)
            return .complete(at: verified)
        }
        // Verified up to the header only: the fetch starts from 0, with a fresh verifier.
        guard verified > 0 else {
            chunks.cancel()
            return .unusable(verifiedUpTo: 0)
        }
        trustedBelow = min(trustedBelow, verified)
        return .continuing(at: verified)
    }

    /// Verifies the archive read from `input` to its end: the whole archive, or after
    /// ``readPrefix(from:)`` returned ``PrefixOutcome/continuing(at:)``, the bytes after the
    /// prefix's last commit.
    ///
    /// - Returns: what was verified.
    /// - Throws: `CairnError` naming `path`: the first problem in archive order (naming its
    ///   offset, the others in ``CairnError/additionalErrors``), `.truncated` for bytes that end
    ///   without a footer; `CancellationError`.
    nonisolated(nonsending) package func verify(_ input: any ByteInput) async throws -> VerificationReport {
        let stream: RecordStream
        if let existing = self.stream {
            existing.continueReading(from: input, at: scanner.resumableLength)
            stream = existing
        } else {
            stream = RecordStream(input: input)
            self.stream = stream
        }
        let blocks = checksOnEveryCore ? (input as? any ByteBlockSource) ?? InputBlocks(input) : nil
        return try await finish(reading: stream, blocks: blocks)
    }

    /// The report of an archive that ``readPrefix(from:)`` found complete (``PrefixOutcome/complete(at:)``),
    /// once its chunks' contents are checked.
    ///
    /// - Returns: what was verified.
    /// - Throws: as ``verify(_:)``.
    nonisolated(nonsending) package func finish() async throws -> VerificationReport {
        guard let stream else { throw CairnError(.invalidArgument, "internal error: nothing was read", path: path) }
        return try await finish(reading: stream, blocks: nil)
    }

    /// After the scanner consumed `record` (its rules and chain digest) and gave `events`: queues
    /// its contents for checking.
    private nonisolated(nonsending) func consumed(_ record: RecordStream.Record, _ events: [ArchiveScanner.Event]) async throws {
        let end = record.offset + UInt64(record.framed.count)
        if record.header.type == .chunk, record.crcFailure == nil, end > trustedBelow {
            try await chunks.add(framed: record.framed, offset: record.offset)
        }
        // Told only while nothing is damaged: past a damaged chunk the scanner goes on (to report
        // every one) without checking chain digests.
        if let onCommit, events.contains(where: \.isVerifiedEnd), scanner.damagedChunks.isEmpty, chunks.failures.isEmpty {
            let checked = max(chunks.checked(before: end), min(trustedBelow, end))
            onCommit(scanner.verifiedLength, min(scanner.verifiedLength, checked))
        }
    }

    /// After the scanner consumed a record that ``CheckedRecordStream`` checked (its CRC-32,
    /// digest and content were checked before it came) and gave `events`.
    private nonisolated(nonsending) func checked(_ item: CheckedRecordStream.Item, _ events: [ArchiveScanner.Event]) async throws {
        let record = item.record
        if let failure = item.contentFailure, contentFailures.count < chunks.limit { contentFailures.append(failure) }
        if let onCommit, events.contains(where: \.isVerifiedEnd), scanner.damagedChunks.isEmpty, contentFailures.isEmpty {
            // The prefix's chunks (read by readPrefix) may still be checked by the ChunkVerifier.
            try await chunks.collectFinished()
            guard chunks.failures.isEmpty else { return }
            let end = record.offset + UInt64(record.header.framedLength)
            let checked = max(chunks.checked(before: end), min(trustedBelow, end))
            onCommit(scanner.verifiedLength, min(scanner.verifiedLength, checked))
        }
    }

    /// Chunk contents found wrong by ``CheckedRecordStream``, in archive order (at most
    /// ``ChunkVerifier/limit``).
    private var contentFailures: [CairnError] = []

    /// Reads `stream` to its end (a footer already read: checks that nothing follows), waits for
    /// the chunk checks, and reports. With `blocks` (the input `stream` reads, as blocks) and a
    /// format 2.0 archive, the records after the header are read from `blocks` and checked on
    /// every core by a ``CheckedRecordStream``; a 1.x archive's chain runs over every byte, on
    /// this thread.
    private nonisolated(nonsending) func finish(reading stream: RecordStream, blocks: (any ByteBlockSource)?) async throws
        -> VerificationReport
    {
        stream.toleratesDamagedChunks = true
        var structural: CairnError?
        var checkedRecords: CheckedRecordStream?
        let scanner = self.scanner
        let incomplete = { (offset: UInt64) -> CairnError in
            CairnError(
                .truncated,
                "the archive is incomplete: it ends without a footer; the first \(scanner.verifiedLength) bytes verify up to "
                    + "the last commit ('cairn verify --partial' names that prefix for resuming)",
                offset: offset)
        }
        do {
            do {
                if !started {
                    try scanner.start(stream)
                    started = true
                }
                if let blocks, !scanner.version.isVersion1, scanner.footer == nil {
                    let records = CheckedRecordStream(
                        source: blocks, offset: stream.offset, leading: stream.takeBuffered(), trustingContentBelow: trustedBelow,
                ids: scanner.idFunction)
                    checkedRecords = records
                    try await scanner.run(over: records, until: .atFooter(missing: incomplete)) { item, events in
                        try await checked(item, events)
                    }
                } else {
                    try await scanner.run(over: stream, until: .atFooter(missing: incomplete)) { record, events in
                        try await consumed(record, events)
                    }
                }
            } catch let error as CairnError {
                structural = error
                if error.code == .truncated, scanner.footer == nil, !error.message.hasPrefix("the archive is incomplete") {
                    structural?.message +=
                        "; the archive is incomplete: the first \(scanner.verifiedLength) bytes verify up to the last commit "
                        + "('cairn verify --partial' names that prefix for resuming)"
                }
            }
            await checkedRecords?.close()
            try await chunks.finish()
        } catch {
            await checkedRecords?.close()
            chunks.cancel()
            throw error
        }
        let damaged = (scanner.damagedChunks + chunks.failures + contentFailures).sorted { ($0.offset ?? 0) < ($1.offset ?? 0) }
        if let problem = Extractor.verificationProblem(
            chunkFailures: Array(damaged.prefix(chunks.limit)), structural: structural, manifest: scanner.manifestSoFar,
            limit: chunks.limit)
        {
            throw problem.withPath(path)
        }
        let totals = scanner.totals
        return VerificationReport(
            archiveBytes: scanner.verifiedLength, entryCount: totals.entries, fileCount: totals.files, chunkCount: totals.chunks,
            referenceCount: totals.references, contentBytes: totals.contentBytes, storedBytes: totals.storedBytes,
            commitCount: totals.commits)
    }
}

/// The input after a complete archive's footer: nothing.
private struct NoBytes: ByteInput {
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(CairnError) -> Int { 0 }
}

/// A ``ByteInput`` that counts the bytes read through it.
private final class CountingInput: ByteInput {
    private let input: any ByteInput
    private(set) var count: UInt64 = 0

    init(_ input: any ByteInput) { self.input = input }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws(CairnError) -> Int {
        let n = try input.read(into: buffer)
        count += UInt64(n)
        return n
    }
}

/// ``StreamVerifier/readPrefix(from:)``'s input: the records of `source`, held back (up to
/// ``StreamVerifier/pendingLimit`` bytes) until the next commit or footer has arrived whole, then
/// given out; it ends at the end of `source`, a record it cannot read (a cut inside a record, a
/// damaged one: `source`'s error is dropped), a record that fails its CRC-32 (a chunk record
/// too), or past the limit, dropping what it holds. So a scanner fed from it stays at the last
/// commit of a prefix.
private final class HeldUntilCommit<Source: ScannerInput>: ScannerInput {
    typealias Item = Source.Item
    private let source: Source
    private var held: [Item] = []
    private var nextHeld = 0
    /// Whether the records are released at a prefix signature record rather than at a commit
    /// (a reader with trusted keys: `Spec/0004 §4.2`).
    private let releasesAtSignatures: Bool

    init(_ source: Source, atSignatures: Bool) {
        self.source = source
        self.releasesAtSignatures = atSignatures
    }

    /// Where held records are released: a commit (or with trusted keys a prefix signature
    /// record, whose kind byte is 0, §3.2) or the footer.
    private func isReleasePoint(_ record: RecordStream.Record) -> Bool {
        switch record.header.type {
        case .footer?: true
        case .commit?: !releasesAtSignatures
        case .signature?: releasesAtSignatures && record.framed.count > RecordFraming.headerLength && record.framed[RecordFraming.headerLength] == 0
        default: false
        }
    }

    static func record(of item: Item) -> RecordStream.Record { Source.record(of: item) }

    nonisolated(nonsending) func next() async throws -> Item? {
        if nextHeld < held.count {
            defer { nextHeld += 1 }
            return held[nextHeld]
        }
        held.removeAll(keepingCapacity: true)
        nextHeld = 0
        var heldBytes = 0
        while true {
            try Task.checkCancellation()
            guard let item = try? await source.next() else { return nil }
            let record = Source.record(of: item)
            guard record.crcFailure == nil else { return nil }
            heldBytes += record.header.framedLength
            guard heldBytes <= StreamVerifier.pendingLimit else { return nil }
            held.append(item)
            if isReleasePoint(record) {
                nextHeld = 1
                return held[0]
            }
        }
    }

    /// `source`'s (not the end of the last record given out: the prefix's scan checks no end).
    var offset: UInt64 { source.offset }

    nonisolated(nonsending) func isAtEnd() async throws -> Bool { try await source.isAtEnd() }
}
