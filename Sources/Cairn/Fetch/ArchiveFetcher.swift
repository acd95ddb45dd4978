import Foundation
import Glibc
import Synchronization

/// Downloads an archive from an `http(s)` URL or an object store into a local file, verifying it as
/// it arrives, resuming by itself, and taking what it can from local seed archives
/// (`Spec/0003-command-line.md §13`, `Spec/0001-container-format.md §13.6`).
///
/// ```swift
/// var options = FetchOptions()
/// options.seedURLs = [URL(filePath: "/backups/last-export.cairn")]
/// let fetcher = ArchiveFetcher(from: try ArchiveLocation(parsing: "https://example.com/export.cairn"), options: options)
/// let report = try await fetcher.fetch(to: .file(path: "/tmp/export.cairn"))
/// print(report.fetchedBytes, "of", report.archiveBytes)
/// ```
///
/// - Bytes go to `<path>.partial` (locked with `flock(2)`), and the file appears at `path`
///   only after the whole archive verified (every record's CRC-32, every chunk's SHA-256, every
///   commit's chain digest, the manifest, the footer), by `fsync(2)` and rename.
/// - A rerun after any interruption (cancellation, a killed process, a cut connection, a full
///   disk) continues from the last verified commit of the partial file, not from its size:
///   `Range: bytes=N-` with the validator kept beside it (`<path>.partial.fetch`) in
///   `If-Range`. Only a 206 that starts exactly at N, of the expected total, is accepted.
/// - An archive replaced on the server (a 200 to `If-Range`, another validator, another length,
///   or bytes whose chain digests do not continue the partial's) restarts from zero, with the
///   old partial kept as a seed (`<path>.partial.seed`, removed once the fetch succeeds): two
///   archives are never spliced.
/// - With seeds, the footer and manifest are read first. From offset 0, with local seeds, the
///   archive is written again by the reference writer (`ArchiveRebuilder`, `Spec/0001
///   §13.6.1`): only the chunk records and packs no seed has are downloaded. Otherwise, or when
///   that rebuild diverges or does not verify, every record a seed holds is copied and the rest
///   downloaded (`DeltaPlan`, §13.6.2). The result is byte-identical to the remote archive,
///   which the footer's chain digest proves.
/// - Transient failures (`.network`, HTTP 408/429/5xx) are retried with exponential backoff,
///   up to ``FetchOptions/retries`` times per run.
public final class ArchiveFetcher: Sendable {
    /// The remote archive: an `http(s)` URL or an object.
    public let source: ArchiveLocation
    /// How errors and the fetch's state file name the archive (``ArchiveLocation``'s name).
    package var url: String { source.name }
    public let options: FetchOptions
    /// Bytes of the archive present in the partial file (`totalUnitCount` is the archive's
    /// length once the server said it).
    public let progress = Progress(totalUnitCount: -1)

    /// - Parameters:
    ///   - source: the remote archive, an `http(s)` URL or an object (a local file is refused
    ///     by ``fetch(to:)``).
    ///   - options: seeds, retries, timeouts, and whether an existing file may be replaced.
    public init(from source: ArchiveLocation, options: FetchOptions = FetchOptions()) {
        self.source = source
        self.options = options
    }

    /// Fetches the archive into the local file `destination`, at `path`: bytes go to
    /// `<path>.partial` until the whole archive verified.
    ///
    /// - Returns: what was transferred.
    /// - Throws: `CancellationError` (the partial file stays, resumable); `CairnError`:
    ///   `.invalidArgument` when the source is a local file or `destination` is not one;
    ///   `.alreadyExists` when `path` exists (and ``FetchOptions/overwrite`` is false) or a
    ///   `<path>.partial` not left by a fetch of this URL is there; `.busy` when another process
    ///   writes it; `.httpStatus` (404, a 5xx after the retries) and `.network` naming the URL;
    ///   `.sourceChanged` when the archive kept changing; `.corrupted`/`.checksumMismatch`
    ///   naming the URL and offset when the remote archive itself fails verification; `.io`
    ///   for the local file (a full disk).
    nonisolated(nonsending) public func fetch(to destination: ArchiveLocation) async throws -> FetchReport {
        let path = try destination.requireFile(for: "the destination of a fetch")
        var configuration = HTTPClient.Configuration()
        configuration.connectTimeout = options.connectTimeout
        configuration.stallTimeout = options.stallTimeout
        guard let remote = source.remote(http: configuration) else {
            throw CairnError(.invalidArgument, "not an http://, https:// or s3:// location", path: url)
        }
        let client = remote.client
        let seeds = SeedIndex()
        defer { seeds.close() }
        for seed in options.seeds {
            let location = try ArchiveLocation(parsing: seed, s3Endpoint: options.s3Endpoint)
            if let remoteSeed = location.remote(http: configuration) {
                try seeds.add(remote: remoteSeed)
            } else {
                try seeds.add(path: seed)
            }
        }
        let setAside = ArchiveLocation.setAsidePath(of: path)
        if access(setAside, F_OK) == 0 { try? seeds.add(path: setAside) }

        var output = try FileSink(continuing: path, overwrite: options.overwrite)
        if let identity = output.writtenFileIdentity {
            // The partial file itself given as a seed: it is resumed, not copied from.
            for (index, seed) in seeds.seeds.enumerated().reversed() {
                if let status = try? seed.descriptor?.status(), status.device == identity.device, status.inode == identity.inode {
                    seeds.remove(at: index)
                }
            }
        }
        if try output.partialLength > 0, FetchState.load(for: path)?.url != url, !options.overwrite {
            await output.abandon()
            throw CairnError(
                .alreadyExists,
                "was not left by a fetch of \(CairnError.hidingPassword(in: url)); move it away, or use --force to set it aside as a seed and start over",
                path: output.partialPath)
        }
        do {
            return try await fetch(to: path, client: client, requestURL: remote.url, seeds: seeds, output: &output)
        } catch {
            // The partial file keeps what verified (synced and unlocked), to be resumed; when
            // nothing did (a 404, a body that is not an archive), nothing is left.
            // Measured in a task of its own: a cancelled fetch must not stop this count halfway
            // (and discard what verified).
            let partialPath = output.partialPath
            let verified = await Task.detached { (try? await Extractor.verifyPrefix(at: .file(path: partialPath)))?.verifiedLength ?? 0 }.value
            try? output.truncate(to: verified)
            if verified == 0 {
                unlink(output.partialPath)
                FetchState.remove(for: path)
            }
            await output.abandon()
            throw error
        }
    }

    nonisolated(nonsending) private func fetch(
        to path: String, client: HTTPClient, requestURL: String, seeds: SeedIndex, output: inout FileSink
    ) async throws -> FetchReport {
        let oldPartial = path + ".partial.seed"
        var report = FetchReport()
        var rangesWork = true
        var distrusted: Set<UInt64> = []
        // The remote manifest of this run (read once unless the archive changes), and a
        // verification failure of copied bytes in the last attempt: its offset and the copies.
        var cachedRemote: RemoteManifest?
        var failedCopies: (offset: UInt64, segments: [DeltaPlan.Segment])?
        var restarts = 0
        var retries = 0
        var firstAttempt = true
        // Set once a verification failed in this run: the recorded progress (contents checked
        // by an earlier run) is not trusted again.
        var distrustRecorded = false
        // Set once an archive rebuilt by the writer (``ArchiveRebuilder``) diverged or did not
        // verify: the rest of the run plans copies and downloads (``DeltaPlan``).
        var rebuildFailed = false
        // The one way a fetch ends well: the partial file, verified whole, is put in place.
        nonisolated(nonsending) func complete(_ verified: VerificationReport) async throws -> FetchReport {
            try await output.finish()
            FetchState.remove(for: path)
            unlink(oldPartial)
            report.archiveBytes = verified.archiveBytes
            // Remote seeds' requests too (each seed has its own client).
            let seedClients = seeds.seeds.compactMap { $0.remote?.client }
            report.fetchedBytes = client.bytesReceived + seedClients.reduce(0) { $0 + $1.bytesReceived }
            report.requestCount = client.requestCount + seedClients.reduce(0) { $0 + $1.requestCount }
            report.restarts = restarts
            if restarts > 0 { report.resumedFrom = 0 }  // it started over: nothing was continued
            report.retries = retries
            progress.completedUnitCount = Int64(clamping: verified.archiveBytes)
            return report
        }
        while true {
            try Task.checkCancellation()
            // 1. How much of the partial file is good.
            var start: UInt64 = 0
            // Reads the partial file (once) and then the bytes after its prefix.
            var verifier = StreamVerifier(path: url)
            var state = FetchState.load(for: path)
            if try output.partialLength > 0 {
                if let known = state, known.url == url {
                    // The last valid commit of the file (its CRC-32s and chain digests; the dead
                    // run's verifier may have been megabytes behind what it wrote), found by the
                    // verifier that goes on with the server's bytes after it. Chunk contents
                    // before the recorded progress were checked by an earlier run, and are not
                    // decompressed and hashed again.
                    let resumed = try await readPartial(
                        of: output, trustingContentBelow: distrustRecorded ? 0 : known.contentChecked ?? 0)
                    verifier = resumed.verifier
                    start = resumed.start
                    if resumed.complete, state?.length ?? start == start {
                        // Everything arrived and verified up to its footer before the run stopped
                        // (killed before the rename, a rename that failed): put it in place once
                        // its chunks are checked, without a request.
                        try output.truncate(to: start)
                        let verified = try await verifier.finish()
                        report.resumedFrom = start
                        return try await complete(verified)
                    }
                } else {
                    output = try await setAside(output, path: path, seeds: seeds)
                    cachedRemote = nil
                    state = nil
                }
            }
            try output.truncate(to: start)
            let trusted = verifier.trustedBelow
            if let failed = failedCopies {
                // The copies between the last verified commit and the failing record's end are the
                // suspects (``DeltaPlan/suspects(after:failingAt:)``).
                for segment in failed.segments { distrusted.insert(segment.range.lowerBound) }
                failedCopies = nil
            }
            if firstAttempt { report.resumedFrom = start }
            report.contentTrustedBytes = trusted
            if start > 0 { options.onEvent?(.resuming(from: start)) }
            firstAttempt = false

            // 2. What to produce after it. Range requests carry the validator of the archive being
            // written (`Spec/0003 §1.1`): the recorded one when continuing the partial file, and
            // from offset 0 (a fresh seeded fetch, or one started over) the one the manifest was
            // read with, once it is known.
            var validator = start > 0 ? state?.validator : nil
            let job: FetchWriter.Job
            var planned: DeltaPlan?
            var rebuilding = false
            if seeds.seeds.isEmpty || !rangesWork {
                job = .rest(from: start)
            } else {
                var remote: RemoteManifest
                do throws(CairnError) {
                    if let cachedRemote, start > 0 {
                        remote = cachedRemote
                    } else {
                        remote = try RemoteManifest.fetch(
                            client: client, url: requestURL, validator: validator, length: start > 0 ? state?.length : nil,
                            seeds: seeds)
                        report.seedBytes += remote.manifestSeedBytes
                    }
                } catch where error.code == .sourceChanged || error.message.hasPrefix(RangeAnswer.noRangesMessage) {
                    // No ranges, or range answers that are not what was asked: the seeds cannot
                    // be used, and the archive is downloaded whole.
                    if error.message.hasPrefix(RangeAnswer.noRangesMessage) || start == 0 {
                        rangesWork = false
                        options.onEvent?(.restarting(reason: error.message + "; downloading the whole archive without seeds"))
                        if start > 0 {
                            restarts += 1
                            output = try await setAside(output, path: path, seeds: nil)
                        }
                        continue
                    }
                    guard restarts < 3 else { throw error }
                    restarts += 1
                    options.onEvent?(.restarting(reason: error.message))
                    output = try await setAside(output, path: path, seeds: seeds)
                    cachedRemote = nil
                    continue
                } catch where RetryPolicy.isTransient(error) && retries < options.retries {
                    retries += 1
                    options.onEvent?(.retrying(error, attempt: retries))
                    try await Task.sleep(for: .milliseconds(Self.backoffMilliseconds(retries)))
                    continue
                } catch {
                    throw error
                }
                cachedRemote = remote
                if start == 0 || state == nil {
                    state = FetchState(url: url, validator: remote.validator, length: remote.length)
                    try state?.save(for: path)
                }
                validator = state?.validator
                progress.totalUnitCount = Int64(clamping: remote.length)
                if start == 0, !rebuildFailed, let rebuild = ArchiveRebuilder.Plan(remote: remote, seeds: seeds) {
                    // Written again by the reference writer: only the header, what no seed has,
                    // the manifest and the footer are downloaded (`Spec/0001 §13.6`).
                    rebuilding = true
                    options.onEvent?(
                        .planned(
                            fetchBytes: UInt64(remote.head.count) + rebuild.downloadBytes + UInt64(remote.tail.count)
                                - remote.manifestSeedBytes,
                            seedBytes: rebuild.seedBytes + remote.manifestSeedBytes))
                    job = .rebuild(rebuild, remote: remote)
                } else {
                    let plan = DeltaPlan(
                        manifest: remote.manifest, manifestOffset: remote.footer.manifestOffset,
                        manifestIndexLength: remote.manifestIndexLength, start: start, seeds: seeds,
                        distrusted: distrusted)
                    planned = plan
                    options.onEvent?(
                        .planned(
                            fetchBytes: plan.fetchBytes + UInt64(remote.tail.count) - remote.manifestSeedBytes,
                            seedBytes: plan.seedBytes + remote.manifestSeedBytes))
                    job = .plan(plan, tail: remote.tail, length: remote.length)
                }
            }
            progress.completedUnitCount = Int64(clamping: start)

            // 3. Write and verify at once.
            let channel = FetchChannel()
            let url = self.url
            let recorder = FetchProgressRecorder(path: path, state: state, start: start)
            verifier.onCommit = { verified, checked in recorder.advance(verified: verified, contentChecked: checked) }
            let writer = FetchWriter(
                client: client, url: requestURL, output: output, channel: channel, seeds: seeds, progress: progress,
                validator: validator, expectedLength: start > 0 ? state?.length : nil,
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
                verified = try await withTaskCancellationHandler {
                    try await verifier.verify(channel)
                } onCancel: {
                    writer.cancel()
                    channel.stopReading()
                }
            } catch {
                verifyError = error
            }
            channel.stopReading()
            let writerError = await completion.wait()
            report.seedBytes += writer.seedBytes
            report.rejectedCopies += writer.damagedSeedRecords

            // 4. Done, or why not.
            if let verified, verifyError == nil, writerError == nil {
                return try await complete(verified)
            }
            try Task.checkCancellation()
            let writerCause = writerError.flatMap { $0.message == FetchChannel.readerStopped ? nil : $0 }
            if rebuilding, !rebuildFailed {
                // A rebuild that diverged from the manifest, or whose bytes did not verify: the
                // writer's rules or a seed's compressor made other bytes than the remote's. Start
                // over with copies and downloads, the rebuilt partial file kept as a seed.
                let failure = writerCause.map { $0.message.hasPrefix(ArchiveRebuilder.divergedMessage) ? $0 : nil } ?? (verifyError as? CairnError)
                if let failure, failure.code != .network, failure.code != .httpStatus, failure.code != .sourceChanged {
                    rebuildFailed = true
                    report.rejectedCopies += 1
                    options.onEvent?(.restarting(reason: "\(failure.message); copying and downloading records instead"))
                    output = try await setAside(output, path: path, seeds: seeds)
                    cachedRemote = nil
                    continue
                }
            }
            if let cause = writerCause {
                if cause.code == .sourceChanged {
                    guard restarts < 3 else { throw cause }
                    restarts += 1
                    if writer.sawNoRangeSupport { rangesWork = false }
                    options.onEvent?(.restarting(reason: cause.message))
                    output = try await setAside(output, path: path, seeds: rangesWork ? seeds : nil)
                    cachedRemote = nil
                    continue
                }
                if RetryPolicy.isTransient(cause), retries < options.retries {
                    retries += 1
                    options.onEvent?(.retrying(cause, attempt: retries))
                    try await Task.sleep(for: .milliseconds(Self.backoffMilliseconds(retries)))
                    continue
                }
                throw cause
            }
            guard let failure = verifyError as? CairnError else { throw verifyError ?? CairnError(.io, "the fetch stopped", path: url) }
            // After a verification failure the recorded progress is not used again in this run
            // (a damaged chunk found after its contents were recorded as checked, or a partial file
            // changed on disk): the next attempt checks every chunk again.
            if trusted > 0, !distrustRecorded, failure.offset ?? .max < start {
                distrustRecorded = true
                continue
            }
            distrustRecorded = true
            // The rebuilt bytes failed verification at `offset`: a seed's record that only
            // looked the same is downloaded next time; with none to blame, a resumed fetch may
            // have continued another archive (same URL, no usable validator): start over once.
            let offset = failure.offset ?? .max
            let suspects = (planned?.suspects(after: start, failingAt: offset) ?? []).filter { !distrusted.contains($0.range.lowerBound) }
            if !suspects.isEmpty {
                failedCopies = (offset, suspects)
                options.onEvent?(.restarting(reason: "bytes copied from seeds did not verify (\(failure)); downloading them"))
                report.rejectedCopies += 1
                continue
            }
            // Bytes that do not continue the partial file fail at once: before the first commit
            // after it verified (an archive replaced with the same validator). A failure after such a
            // commit is damage in the remote archive itself, and downloading it again would not help.
            // So is a failure at the offset where the last run found the archive damaged.
            let repeated = failure.offset != nil && failure.offset == state?.damagedAt
            if start > 0, restarts < 1, !recorder.advanced, !repeated, failure.code == .checksumMismatch || failure.code == .corrupted {
                restarts += 1
                options.onEvent?(
                    .restarting(reason: "the bytes after offset \(start) do not continue the partial file (the archive changed, or is damaged there)"))
                output = try await setAside(output, path: path, seeds: rangesWork ? seeds : nil)
                cachedRemote = nil
                continue
            }
            // Kept beside the partial file, so a rerun that fails at the same offset reports it
            // at once instead of starting over.
            if let offset = failure.offset { recorder.damaged(at: offset) }
            throw failure.withPath(url)
        }
    }

    /// Reads the partial file once, verifying it up to its last valid commit (or footer), and
    /// returns the verifier positioned there, to go on with the bytes after it. A prefix whose
    /// records pass their CRC-32 but not the scanner's checks is cut at its last valid commit and
    /// read again up to there (the file shrinks each time); one that verifies nothing (too short,
    /// not an archive, unreadable) gives a fresh verifier and offset 0.
    ///
    /// - Returns: the verifier, the prefix's verified length, and whether that is a whole archive
    ///   (its footer verified).
    /// - Throws: `CancellationError`; `.io` when the partial file cannot be cut.
    nonisolated(nonsending) private func readPartial(of output: FileSink, trustingContentBelow trusted: UInt64) async throws
        -> (verifier: StreamVerifier, start: UInt64, complete: Bool)
    {
        while true {
            let verifier = StreamVerifier(path: url, trustingContentBelow: trusted)
            let outcome: StreamVerifier.PrefixOutcome
            do {
                let input = try FileDescriptor.open(output.partialPath, flags: O_RDONLY | O_NOFOLLOW)
                defer { _ = try? input.close() }
                defer { partialReads.add(verifier.prefixBytesRead, ordering: .relaxed) }
                outcome = try await verifier.readPrefix(from: input)
            } catch is CairnError {
                outcome = .unusable(verifiedUpTo: 0)
            }
            switch outcome {
            case .continuing(let end): return (verifier, end, false)
            case .complete(let end): return (verifier, end, true)
            case .unusable(let end):
                guard end > 0 else { return (StreamVerifier(path: url), 0, false) }
                try output.truncate(to: end)
            }
        }
    }

    /// Bytes read from partial files by this fetcher's runs, to find where they resume (each
    /// attempt reads its partial file once).
    package var partialBytesRead: UInt64 { partialReads.load(ordering: .relaxed) }
    private let partialReads = Atomic<UInt64>(0)

    /// Moves the partial file aside as `<path>.partial.seed` (replacing an older one), indexes
    /// it as a seed when `seeds` is given, and opens a new, empty partial file.
    nonisolated(nonsending) private func setAside(_ output: FileSink, path: String, seeds: SeedIndex?) async throws -> FileSink {
        FetchState.remove(for: path)
        let seedPath = ArchiveLocation.setAsidePath(of: path)
        if try output.partialLength > 0 {
            try FileSystem.rename(Array(output.partialPath.utf8), to: Array(seedPath.utf8), display: seedPath)
            try? seeds?.add(path: seedPath)
        }
        await output.abandon()
        return try FileSink(continuing: path, overwrite: options.overwrite)
    }

    private static func backoffMilliseconds(_ attempt: Int) -> Int {
        min(5000, 200 << min(attempt - 1, 5))
    }
}

/// Options for ``ArchiveFetcher``.
public struct FetchOptions: Sendable {
    /// Archives (complete or not) whose records are copied instead of downloaded: local paths,
    /// or remote archives (`http(s)://` URLs, `s3://` objects), whose chunk records are copied
    /// with range requests.
    public var seeds: [String]
    /// Transient failures retried within one run (each after an exponential backoff). Default 5.
    public var retries: Int
    /// Whether an existing file at the destination may be replaced (at the final rename only),
    /// and a partial file not left by a fetch of this URL set aside. Default false.
    public var overwrite: Bool
    /// Seconds to wait for a connection. Default 10.
    public var connectTimeout: Double
    /// Seconds without a byte before a transfer counts as cut. Default 30.
    public var stallTimeout: Double
    /// The object store's endpoint for ``seeds`` written `s3://BUCKET/KEY`; nil: `AWS_ENDPOINT_URL`,
    /// else AWS's own. (The fetched archive's store is in its ``ArchiveLocation``.)
    public var s3Endpoint: String? = nil
    /// Told of resumes, retries and restarts as they happen (for `--progress` and logs).
    public var onEvent: (@Sendable (FetchEvent) -> Void)?

    public init(
        seeds: [String] = [], retries: Int = 5, overwrite: Bool = false, connectTimeout: Double = 10, stallTimeout: Double = 30,
        onEvent: (@Sendable (FetchEvent) -> Void)? = nil
    ) {
        self.seeds = seeds
        self.retries = retries
        self.overwrite = overwrite
        self.connectTimeout = connectTimeout
        self.stallTimeout = stallTimeout
        self.onEvent = onEvent
    }
}

extension FetchOptions {
    /// ``seeds`` as `file:` URLs: local archives whose records are copied instead of downloaded.
    public var seedURLs: [URL] {
        get { seeds.map { URL(filePath: $0) } }
        set { seeds = newValue.map { $0.path(percentEncoded: false) } }
    }
}

/// What a fetch tells as it goes.
public enum FetchEvent: Sendable {
    /// Continuing after the partial file's verified prefix of this many bytes.
    case resuming(from: UInt64)
    /// A seeded plan: bytes to download (including the manifest and footer) and to copy.
    case planned(fetchBytes: UInt64, seedBytes: UInt64)
    /// A transient failure; trying again (attempt counts from 1).
    case retrying(CairnError, attempt: Int)
    /// Starting over from offset 0, and why.
    case restarting(reason: String)
}

/// What ``ArchiveFetcher/fetch(to:)`` did.
public struct FetchReport: Sendable, Equatable {
    /// Bytes of the archive.
    public var archiveBytes: UInt64 = 0
    /// Body bytes received over HTTP in this run (every request, including the footer and
    /// manifest of a seeded fetch, remote seeds' requests and bytes of failed attempts).
    public var fetchedBytes: UInt64 = 0
    /// Bytes copied from seeds, over every attempt of this run (as ``fetchedBytes`` counts the
    /// bytes of failed attempts too): after an attempt that did not verify, more than the
    /// archive's size.
    public var seedBytes: UInt64 = 0
    /// The verified prefix of an earlier run this run continued from (0 for a fresh fetch).
    public var resumedFrom: UInt64 = 0
    /// HTTP requests sent.
    public var requestCount = 0
    /// Times the fetch started over because the archive changed.
    public var restarts = 0
    /// Transient failures retried.
    public var retries = 0
    /// Seed records that turned out to differ from the remote's (by its CRC-32 before writing,
    /// or by verification after) or to be damaged in the seed (their own framing or CRC-32 when
    /// read), and were downloaded instead.
    public var rejectedCopies = 0
    /// Bytes at the start of the partial file whose chunk contents an earlier run had checked,
    /// and this one did not decompress and hash again (their CRC-32 and chain digests it did);
    /// of the run's last attempt.
    public var contentTrustedBytes: UInt64 = 0

    public init() {}
}

/// Keeps a fetch's state file current: the fresh state a whole-archive answer gives (synced),
/// and how far chunk contents were checked (not synced, every MiB or so: a lagging record only costs
/// hashing those bytes again). Called from the writer thread and the verifier, hence the lock.
private final class FetchProgressRecorder: Sendable {
    private let path: String
    private let state: Mutex<FetchState?>
    /// Where this attempt's new bytes start (the verified prefix read back ends there).
    private let start: UInt64

    init(path: String, state: FetchState?, start: UInt64) {
        self.path = path
        self.state = Mutex(state)
        self.start = start
    }

    func replace(_ fresh: FetchState) throws(CairnError) {
        try state.withLock { (current) throws(CairnError) in
            try fresh.save(for: path)
            current = fresh
        }
    }

    /// Whether a commit after ``start`` verified in this attempt: the bytes fetched continued the
    /// partial file.
    var advanced: Bool { advancedFlag.load(ordering: .relaxed) }
    private let advancedFlag = Atomic<Bool>(false)

    /// Records where the remote archive failed verification (synced).
    func damaged(at offset: UInt64) {
        state.withLock { current in
            guard var next = current else { return }
            next.damagedAt = offset
            try? next.save(for: path)
            current = next
        }
    }

    /// Rewrites the state when the checked contents advanced by ``saveEvery`` since it was last
    /// written: a record that lags only costs hashing those bytes again on a rerun.
    func advance(verified: UInt64, contentChecked: UInt64) {
        if verified > start { advancedFlag.store(true, ordering: .relaxed) }
        state.withLock { current in
            guard var next = current, contentChecked >= (next.contentChecked ?? 0) + Self.saveEvery else { return }
            next.contentChecked = contentChecked
            // A state that cannot be written (a full disk) only loses the shortcut.
            try? next.save(for: path, syncing: false)
            current = next
        }
    }

    /// How far the checked contents advance between two writes of the state (1 MiB: chunks are
    /// checked in groups of about 2 MiB, so about one write per group).
    static let saveEvery: UInt64 = 1 << 20
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
