import Foundation
import Synchronization

/// One attempt of a ``FetchRun``, phase by phase: how much of the partial file is good
/// (``resume(_:)``), what to produce after it (``plan(_:)``), writing and verifying at once
/// (``transfer(_:_:)``), then the end of the run or why another attempt follows
/// (``conclude(_:_:)``).
struct FetchAttempt {
    /// Where this attempt's bytes start: the end of the partial file's verified prefix.
    private var start: UInt64 = 0
    /// Reads the partial file (once) and then the bytes after its prefix.
    private var verifier: StreamVerifier
    /// The state file beside the partial file: the URL, validator and length it was written with.
    private var state: FetchState?
    /// Bytes at the start whose chunk contents an earlier run checked.
    private var trusted: UInt64 = 0
    /// The `If-Range` validator of range requests.
    private var validator: String?
    /// The copies and downloads planned, when seeds are used and the archive is not rebuilt.
    private var planned: DeltaPlan?
    /// Whether the writer rebuilds the archive from seeds (`ArchiveRebuilder`).
    private var rebuilding = false
    /// Where the inner archive continues, when an encrypted archive's partial file is continued.
    private var sealed: SealedResume?
    /// A seeded fetch of an encrypted archive: how the writer reads the remote's inner archive
    /// and seals what it produces (`Spec/0004-trusted-archives.md §6.10.3`).
    private var resealing: FetchWriter.Resealing?
    /// Whether this attempt downloads over several connections (`Spec/0001 §13.8`): a plain
    /// archive without seeds, from a server that takes ranges, with more than one connection.
    private var ranged = false

    private init(_ run: FetchRun) {
        verifier = StreamVerifier(path: run.url, trustedKeys: run.fetcher.options.trustedKeys, keying: run.fetcher.options.keying)
        state = FetchState.load(for: run.path)
    }

    /// Runs one attempt of `run`.
    ///
    /// - Returns: the report when the fetch ended well; nil when another attempt follows (a
    ///   retry, a restart, or copies to download instead).
    /// - Throws: what ends the run (see ``ArchiveFetcher/fetch(to:)-(String)``).
    nonisolated(nonsending) static func run(in run: inout FetchRun) async throws -> FetchReport? {
        var attempt = FetchAttempt(run)
        if let report = try await attempt.resume(&run) { return report }
        guard let job = try await attempt.plan(&run) else { return nil }
        let transfer = await attempt.transfer(job, &run)
        return try await attempt.conclude(transfer, &run)
    }

    /// 1. How much of the partial file is good: its last valid commit when the state file says
    /// a fetch of this URL wrote it (else it is set aside). The partial file is cut there.
    ///
    /// - Returns: the report when the partial file already held the whole archive.
    nonisolated(nonsending) private mutating func resume(_ run: inout FetchRun) async throws -> FetchReport? {
        let options = run.options
        ranged = options.connections > 1 && options.decryption.isEmpty && options.seeds.isEmpty && run.rangesWork
        if var known = state, let received = known.received, !received.isEmpty {
            // Ranges past the partial file's end (a file cut or removed since) are not there.
            let length = try run.output.partialLength
            known.received = RangeSchedule.subtract(length..<UInt64.max, from: known.receivedRanges).map(FetchState.ReceivedRange.init)
            state = known
        }
        if try run.output.partialLength > 0 {
            if let known = state, known.url == run.url {
                // The last valid commit of the file (its CRC-32s and chain digests; the dead
                // run's verifier may have been megabytes behind what it wrote), found by the
                // verifier that goes on with the server's bytes after it. Chunk contents
                // before the recorded progress were checked by an earlier run, and are not
                // decompressed and hashed again.
                // A parallel fetch's partial file is read up to the end of the ranges received
                // from offset 0 without a gap (`Spec/0001 §13.8`).
                let resumed = try await run.fetcher.readPartial(
                    of: run.output, trustingContentBelow: run.distrustRecorded ? 0 : known.contentChecked ?? 0,
                    limit: known.received.map { _ in RangeSchedule.contiguousEnd(of: known.receivedRanges, from: 0) })
                verifier = resumed.verifier
                start = resumed.start
                sealed = resumed.sealed
                if resumed.complete, state?.length ?? start == start {
                    // Everything arrived and verified up to its footer before the run stopped
                    // (killed before the rename, a rename that failed): put it in place once
                    // its chunks are checked, without a request.
                    try run.output.truncate(to: start)
                    let verified = try await verifier.finish()
                    run.report.resumedFrom = start
                    return try await run.complete(verified)
                }
            } else {
                try await run.setAside(indexingAsSeed: true)
                state = nil
            }
        }
        if state?.received == nil || !ranged {
            // Continued front to back: a parallel fetch's ranges after the prefix are dropped.
            try run.output.truncate(to: start)
            if state?.received != nil {
                state?.received = nil
                try state?.save(for: run.path)
            }
        }
        trusted = verifier.trustedBelow
        if run.firstAttempt {
            run.report.resumedFrom = start
            if ranged, let received = state?.received, !received.isEmpty {
                run.report.keptRangeBytes = RangeSchedule.subtract(0..<start, from: state?.receivedRanges ?? []).reduce(0) { $0 + UInt64($1.count) }
            }
        }
        run.report.contentTrustedBytes = trusted
        if start > 0 { run.options.onEvent?(.resuming(from: start)) }
        run.firstAttempt = false
        return nil
    }

    /// 2. What to produce after it: the rest of the archive, or with seeds (and range answers)
    /// a rebuild from offset 0 or a plan of copies and downloads. Range requests carry the
    /// validator of the archive being written (`Spec/0003 §1.1`): the recorded one when
    /// continuing the partial file, and from offset 0 (a fresh seeded fetch, or one started
    /// over) the one the manifest was read with, once it is known.
    ///
    /// - Returns: the writer's job; nil when the attempt ends here (``readManifest(_:)``).
    nonisolated(nonsending) private mutating func plan(_ run: inout FetchRun) async throws -> FetchWriter.Job? {
        validator = continuing ? state?.validator : nil
        let job: FetchWriter.Job
        // An encrypted archive is rebuilt from seeds only from offset 0 (§6.10.3); a partial
        // file of one is continued verbatim (§6.10.2).
        let encrypted = !run.options.decryption.isEmpty
        let seeded = encrypted ? start == 0 && !run.options.seeds.isEmpty : !run.seeds.seeds.isEmpty
        if !seeded || !run.rangesWork {
            job = .rest(from: start)
        } else {
            guard let remote = try await readManifest(&run) else { return nil }
            // No seed of an encrypted archive shares its keys: it is downloaded whole.
            if encrypted, run.seeds.seeds.isEmpty {
                run.fetcher.progress.completedUnitCount = Int64(clamping: start)
                return .rest(from: start)
            }
            run.cachedRemote = remote
            if start == 0 || state == nil {
                // The outer archive's length, which a resumed fetch asks for.
                state = FetchState(url: run.url, validator: remote.validator, length: run.sealedRemote?.outer.size ?? remote.length)
                try state?.save(for: run.path)
            }
            if encrypted { resealing = try run.sealedRemote?.resealing() }
            validator = state?.validator
            run.fetcher.progress.totalUnitCount = Int64(clamping: remote.length)
            job = plan(from: remote, &run)
        }
        run.fetcher.progress.completedUnitCount = Int64(clamping: start)
        return job
    }

    /// The remote archive's footer and manifest: read once per run (again from offset 0), with
    /// the partial file's validator and length when continuing it.
    ///
    /// - Returns: nil when the attempt ends here: no range answers (the archive is downloaded
    ///   whole, without seeds), the archive changed (started over), or a transient failure
    ///   (retried).
    nonisolated(nonsending) private func readManifest(_ run: inout FetchRun) async throws -> RemoteManifest? {
        let failure: CairnError
        do throws(CairnError) {
            if let cachedRemote = run.cachedRemote, start > 0 { return cachedRemote }
            if !run.options.decryption.isEmpty {
                let sealed = try SealedRemote.open(
                    client: run.remote.client, url: run.remote.url, validator: validator, length: start > 0 ? state?.length : nil,
                    decryption: run.options.decryption)
                run.indexEncryptedSeeds(keying: sealed.inner.keying)
                let remote = try RemoteManifest.fetch(sealed: sealed, seeds: run.seeds, trustedKeys: run.options.trustedKeys)
                run.sealedRemote = sealed
                run.report.seedBytes += remote.manifestSeedBytes
                return remote
            }
            let remote = try RemoteManifest.fetch(
                client: run.remote.client, url: run.remote.url, validator: validator, length: start > 0 ? state?.length : nil,
                seeds: run.seeds, keying: run.fetcher.options.keying, trustedKeys: run.options.trustedKeys,
                connections: run.options.connections)
            run.report.seedBytes += remote.manifestSeedBytes
            return remote
        } catch {
            failure = error
        }
        let noRanges = failure.message.hasPrefix(RangeAnswer.noRangesMessage)
        if failure.code == .sourceChanged || noRanges {
            // No ranges, or range answers that are not what was asked: the seeds cannot
            // be used, and the archive is downloaded whole.
            if noRanges || start == 0 {
                run.rangesWork = false
                let reason = failure.message + "; downloading the whole archive without seeds"
                if start > 0 {
                    try await run.restart(because: reason, indexingAsSeed: false)
                } else {
                    run.options.onEvent?(.restarting(reason: reason))
                }
                return nil
            }
            guard run.restarts < 3 else { throw failure }
            try await run.restart(because: failure.message, indexingAsSeed: true)
            return nil
        }
        guard run.mayRetry(failure) else { throw failure }
        try await run.retry(after: failure)
        return nil
    }

    /// From offset 0, with seeds that hold enough, the archive written again by the reference
    /// writer: only the header, what no seed has, the manifest and the footer are downloaded
    /// (`Spec/0001 §13.6`). Otherwise every record a seed holds is copied and the rest
    /// downloaded.
    private mutating func plan(from remote: RemoteManifest, _ run: inout FetchRun) -> FetchWriter.Job {
        if start == 0, !run.rebuildFailed, let rebuild = ArchiveRebuilder.Plan(remote: remote, seeds: run.seeds) {
            rebuilding = true
            run.options.onEvent?(
                .planned(
                    fetchBytes: UInt64(remote.head.count) + rebuild.downloadBytes + UInt64(remote.tail.count)
                        - remote.manifestSeedBytes,
                    seedBytes: rebuild.seedBytes + remote.manifestSeedBytes))
            return .rebuild(rebuild, remote: remote)
        }
        let plan = DeltaPlan(
            manifest: remote.manifest, manifestOffset: remote.footer.manifestOffset,
            manifestIndexLength: remote.manifestIndexLength, start: start, seeds: run.seeds,
            distrusted: run.distrusted, signed: remote.version.major == Prelude.majorVersion && remote.version.minor >= Prelude.signedMinorVersion)
        planned = plan
        run.options.onEvent?(
            .planned(
                fetchBytes: plan.fetchBytes + UInt64(remote.tail.count) - remote.manifestSeedBytes,
                seedBytes: plan.seedBytes + remote.manifestSeedBytes))
        return .plan(plan, tail: remote.tail, length: remote.length)
    }

    /// What the writer thread and the verifier ended with.
    private struct Transfer {
        let verified: VerificationReport?
        let verifyError: Error?
        let writerError: CairnError?
        let writer: FetchWriter
        let recorder: FetchProgressRecorder
    }

    /// 3. Write and verify at once: the writer on a thread of its own fills the partial file
    /// and hands the bytes to the verifier, which keeps the state file's progress current.
    nonisolated(nonsending) private func transfer(_ job: FetchWriter.Job, _ run: inout FetchRun) async -> Transfer {
        let channel = FetchChannel()
        let url = run.url
        let recorder = FetchProgressRecorder(
            path: run.path, state: state, start: sealed?.innerOffset ?? start, checked: run.fetcher.checkedProgress)
        var parallel: FetchWriter.Parallel?
        if ranged, case .rest = job {
            parallel = FetchWriter.Parallel(
                connections: run.options.connections, maximumRange: run.options.rangeSize,
                received: state?.received.map { _ in state?.receivedRanges ?? [] }, recorder: recorder,
                retries: max(0, run.options.retries - run.retries))
        }
        let writer = FetchWriter(
            client: run.remote.client, url: run.remote.url, output: run.output, channel: channel, seeds: run.seeds,
            progress: run.fetcher.progress, validator: validator, expectedLength: continuing ? state?.length : nil,
            resealing: resealing, parallel: parallel,
            // A seeded plan's downloads over the connections (`Spec/0001 §13.8`); one at a time with one.
            plannedSource: run.options.connections > 1 ? run.cachedRemote?.source : nil,
            onFreshHead: { (head) throws(CairnError) in
                try recorder.replace(FetchState(url: url, validator: head.strongValidator, length: head.resourceLength))
            })
        let completion = WriterCompletion()
        let thread = Thread {
            do throws(CairnError) {
                try writer.run(job: job)
                completion.complete(nil)
            } catch {
                completion.complete(error)
            }
        }
        thread.stackSize = 1 << 20
        thread.start()
        var verifyError: Error?
        var verified: VerificationReport?
        do {
            verified = try await withTaskCancellationHandler { [self] in
                try await verify(channel, recorder: recorder, run.fetcher.options, name: url)
            } onCancel: {
                writer.cancel()
                channel.stopReading()
            }
        } catch {
            verifyError = error
        }
        channel.stopReading()
        let writerError = await completion.wait()
        run.report.seedBytes += writer.seedBytes
        run.retries += writer.rangeRetries
        run.report.connections = writer.usedRanges ? run.options.connections : 1
        run.report.rejectedCopies += writer.damagedSeedRecords
        return Transfer(verified: verified, verifyError: verifyError, writerError: writerError, writer: writer, recorder: recorder)
    }

    /// The verifier's side of ``transfer(_:_:)``: the bytes as they arrive, or for an encrypted
    /// archive (`Spec/0004-trusted-archives.md §6.10`) the inner archive of their blocks, opened
    /// as they arrive (its envelope read first from offset 0, or taken from the partial file).
    /// When the opening failed, its cause is thrown rather than the inner archive's early end.
    nonisolated(nonsending) private func verify(
        _ channel: FetchChannel, recorder: FetchProgressRecorder, _ options: FetchOptions, name: String
    ) async throws -> VerificationReport {
        let onCommit: (UInt64, UInt64) -> Void = { verified, checked in recorder.advance(verified: verified, contentChecked: checked) }
        guard !options.decryption.isEmpty else {
            verifier.onCommit = onCommit
            return try await verifier.verify(channel)
        }
        var verifier = verifier
        let envelope: OpenedEnvelope
        if let sealed {
            envelope = sealed.envelope
        } else {
            envelope = try SealedFetchInput.readEnvelope(from: channel, decryption: options.decryption, name: name)
            verifier = StreamVerifier(path: name, trustedKeys: options.trustedKeys, keying: try envelope.secrets.chunkKeying())
        }
        verifier.onCommit = onCommit
        let input = try SealedFetchInput(
            channel: channel, envelope: envelope, firstBlock: sealed?.blockIndex ?? 0, skipping: sealed?.skipping ?? 0, name: name)
        do {
            let report = try await verifier.verify(input.bytes.descriptor)
            try input.bytes.finish()
            return report
        } catch {
            let cause = input.openingFailure
            channel.stopReading()
            input.bytes.cancel()
            throw cause ?? error
        }
    }

    /// 4. Done, or why not: the partial file put in place, another attempt (a rebuild given up
    /// for copies, a restart, a retry, copies to download instead), or the error that ends the
    /// run.
    ///
    /// - Returns: the report when the fetch ended well; nil when another attempt follows.
    nonisolated(nonsending) private func conclude(_ transfer: Transfer, _ run: inout FetchRun) async throws -> FetchReport? {
        if let verified = transfer.verified, transfer.verifyError == nil, transfer.writerError == nil {
            return try await run.complete(verified)
        }
        try Task.checkCancellation()
        let writerCause = transfer.writerError.flatMap { $0.message == FetchChannel.readerStopped ? nil : $0 }
        if rebuilding, !run.rebuildFailed {
            // A rebuild that diverged from the manifest, or whose bytes did not verify: the
            // writer's rules or a seed's compressor made other bytes than the remote's. Start
            // over with copies and downloads, the rebuilt partial file kept as a seed.
            let failure =
                writerCause.map { $0.message.hasPrefix(ArchiveRebuilder.divergedMessage) ? $0 : nil }
                ?? (transfer.verifyError as? CairnError)
            // An archive no trusted key signed is refused as it is (`Spec/0004 §4.1`): other
            // bytes would not sign it.
            if let failure, ![.network, .httpStatus, .sourceChanged, .untrusted].contains(failure.code) {
                run.rebuildFailed = true
                run.report.rejectedCopies += 1
                run.options.onEvent?(.restarting(reason: "\(failure.message); copying and downloading records instead"))
                try await run.setAside(indexingAsSeed: true)
                return nil
            }
        }
        if let cause = writerCause {
            try await recover(fromWriterFailure: cause, transfer.writer, &run)
            return nil
        }
        guard let failure = transfer.verifyError as? CairnError else {
            throw transfer.verifyError ?? CairnError(.io, "the fetch stopped", path: run.url)
        }
        try await recover(fromVerificationFailure: failure, transfer.recorder, usedRanges: transfer.writer.usedRanges, &run)
        return nil
    }

    /// The writer failed: an archive that changed on the server is started over (three times
    /// at most), a transient failure retried; anything else ends the run.
    nonisolated(nonsending) private func recover(
        fromWriterFailure cause: CairnError, _ writer: FetchWriter, _ run: inout FetchRun
    ) async throws {
        if cause.code == .sourceChanged {
            guard run.restarts < 3 else { throw cause }
            if writer.sawNoRangeSupport { run.rangesWork = false }
            try await run.restart(because: cause.message, indexingAsSeed: run.rangesWork)
            return
        }
        guard run.mayRetry(cause) else { throw cause }
        try await run.retry(after: cause)
    }

    /// The bytes did not verify. Returns when another attempt follows; throws the failure,
    /// naming the URL, when the remote archive itself is damaged.
    nonisolated(nonsending) private func recover(
        fromVerificationFailure failure: CairnError, _ recorder: FetchProgressRecorder, usedRanges: Bool, _ run: inout FetchRun
    ) async throws {
        // After a verification failure the recorded progress is not used again in this run
        // (a damaged chunk found after its contents were recorded as checked, or a partial file
        // changed on disk): the next attempt checks every chunk again.
        if trusted > 0, !run.distrustRecorded, failure.offset ?? .max < start {
            run.distrustRecorded = true
            return
        }
        run.distrustRecorded = true
        // The rebuilt bytes failed verification at `offset`: a seed's record that only
        // looked the same is downloaded next time (the copies between the last verified commit
        // and the failing record's end are the suspects, `DeltaPlan.suspects(after:failingAt:)`);
        // with none to blame, a resumed fetch may have continued another archive (same URL, no
        // usable validator): start over once.
        let offset = failure.offset ?? .max
        let suspects = (planned?.suspects(after: start, failingAt: offset) ?? []).filter { !run.distrusted.contains($0.range.lowerBound) }
        if !suspects.isEmpty {
            for segment in suspects { run.distrusted.insert(segment.range.lowerBound) }
            run.options.onEvent?(.restarting(reason: "bytes copied from seeds did not verify (\(failure)); downloading them"))
            run.report.rejectedCopies += 1
            return
        }
        // Bytes of a parallel download (`Spec/0001 §13.8`) that fail, read back from the partial
        // file or just received: forgotten from the last verified commit on and fetched again
        // once (a range damaged on disk, a proxy that altered one); failing again at the same
        // offset is an error naming it, never a splice.
        if usedRanges, let offset = failure.offset, Self.isWrongBytes(failure) {
            try refetch(failingAt: offset, failure, recorder, &run)
            return
        }
        // Bytes that do not continue the partial file fail at once: before the first commit
        // after it verified (an archive replaced with the same validator). A failure after such a
        // commit is damage in the remote archive itself, and downloading it again would not help.
        // So is a failure at the offset where the last run found the archive damaged.
        let repeated = failure.offset != nil && failure.offset == state?.damagedAt
        if start > 0, run.restarts < 1, !recorder.advanced, !repeated, failure.code == .checksumMismatch || failure.code == .corrupted {
            try await run.restart(
                because: "the bytes after offset \(start) do not continue the partial file (the archive changed, or is damaged there)",
                indexingAsSeed: run.rangesWork)
            return
        }
        // Kept beside the partial file, so a rerun that fails at the same offset reports it
        // at once instead of starting over.
        if let offset = failure.offset { recorder.damaged(at: offset) }
        throw failure.withPath(run.url)
    }
}

extension FetchAttempt {
    /// Whether the partial file continues from offset `start` or holds a parallel fetch's
    /// ranges: range requests then carry the recorded validator and length.
    private var continuing: Bool { start > 0 || state?.received != nil }

    /// Whether `failure` says the bytes themselves are wrong (not a transfer that stopped).
    fileprivate static func isWrongBytes(_ failure: CairnError) -> Bool {
        [.checksumMismatch, .corrupted, .limitExceeded, .truncated].contains(failure.code)
    }

    /// Bytes of a parallel fetch that did not verify at `offset` (`Spec/0001 §13.8`): the
    /// received bytes from the last verified commit to the end of the longest record that can
    /// start at `offset` are forgotten and fetched again by the next attempt (a proxy that
    /// altered one range, a range damaged on the local disk). Failing again at the same offset
    /// ends the run with an error naming the URL and the offset.
    fileprivate func refetch(failingAt offset: UInt64, _ failure: CairnError, _ recorder: FetchProgressRecorder, _ run: inout FetchRun)
        throws(CairnError)
    {
        guard offset != state?.damagedAt, run.retries < run.options.retries else {
            throw CairnError(
                failure.code,
                "\(failure.message); the bytes there were fetched again and still do not verify "
                    + "(the archive is damaged there, something between the server and this machine alters them, "
                    + "or the archive was replaced under the same validator: remove the partial file to start over)",
                path: run.url, offset: offset)
        }
        let longestRecord = UInt64(FormatLimits.maximumRecordPayload) + UInt64(RecordFraming.overhead)
        recorder.refetch(min(recorder.verified, offset)..<(offset + longestRecord), damagedAt: offset)
        run.retries += 1
        run.options.onEvent?(.retrying(failure.withPath(run.url), attempt: run.retries))
    }
}

/// Hands the writer thread's outcome to the task that awaits it.
private final class WriterCompletion: Sendable {
    private enum State {
        case running
        case waiting(CheckedContinuation<CairnError?, Never>)
        case done(CairnError?)
    }
    private let state = Mutex<State>(.running)

    func complete(_ error: CairnError?) {
        let waiter = state.withLock { (state) -> CheckedContinuation<CairnError?, Never>? in
            if case .waiting(let continuation) = state {
                state = .done(error)
                return continuation
            }
            state = .done(error)
            return nil
        }
        waiter?.resume(returning: error)
    }

    func wait() async -> CairnError? {
        await withCheckedContinuation { (continuation: CheckedContinuation<CairnError?, Never>) in
            let ready = state.withLock { (state) -> CairnError?? in
                if case .done(let error) = state { return .some(error) }
                state = .waiting(continuation)
                return .none
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
