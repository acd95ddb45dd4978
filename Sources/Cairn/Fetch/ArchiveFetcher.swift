import Foundation
import Glibc
import Synchronization

/// Downloads an archive from an `http(s)` URL or an object store into a local file, verifying it as
/// it arrives, resuming by itself, and taking what it can from local seed archives
/// (`Spec/0003-command-line.md §13`, `Spec/0001-container-format.md §13.6`).
///
/// ```swift
/// var options = FetchOptions()
/// options.seeds = [.file(path: "/backups/last-export.cairn")]
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
/// - An encrypted archive (``FetchOptions/decryption``, `Spec/0004-trusted-archives.md §6.10`)
///   is written as the remote's bytes; its sealed blocks are opened as they arrive and its inner
///   archive verified as above. A rerun continues from the sealed block holding the inner
///   archive's last verified commit. From offset 0, local seeds made with the same chunk keys (an
///   earlier export of the same maker) are opened with the same identities, and the inner
///   archive is rebuilt from them as above and sealed again under the remote's keys: the result
///   is the same inner archive, not the remote's bytes.
public final class ArchiveFetcher: Sendable {
    /// The remote archive: an `http(s)` URL or an object.
    public let source: ArchiveLocation
    /// How errors and the fetch's state file name the archive (``ArchiveLocation``'s name).
    package var url: String { source.name }
    public let options: FetchOptions
    /// Bytes of the archive received (`totalUnitCount` is the archive's length once the server
    /// said it): with several connections, bytes that arrived anywhere in the archive.
    public let progress = Progress(totalUnitCount: -1)
    /// Bytes of the archive verified: the partial file's verified prefix, which grows at each
    /// commit that verifies (`totalUnitCount` is the archive's length once known). Behind
    /// ``progress`` by what arrived and is not yet checked in archive order.
    public let checkedProgress = Progress(totalUnitCount: -1)

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
        let seeds = SeedIndex(keying: options.keying)
        defer { seeds.close() }
        // The seed rule (`SeedIndex+Rule`, `Spec/0003 §13`): a local seed that is not an archive
        // is refused before any request. An encrypted archive's seeds are indexed once its keys
        // are known (`Spec/0004 §6.10.3`).
        for case .file(let seedPath) in options.seeds where !options.decryption.isEmpty {
            try SeedIndex.requireArchive(atPath: seedPath)
        }
        for seed in options.decryption.isEmpty ? options.seeds : [] {
            if let remoteSeed = seed.remote(http: configuration) {
                try seeds.add(remote: remoteSeed)
            } else if case .file(let seedPath) = seed,
                let reason = try seeds.admit(localSeed: seedPath, decryption: options.decryption, keying: nil)
            {
                options.onEvent?(.seedSkipped(path: seedPath, reason: reason))
            }
        }
        let setAside = ArchiveLocation.setAsidePath(of: path)
        if access(setAside, F_OK) == 0, options.decryption.isEmpty { try? seeds.add(path: setAside) }

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
            return try await fetch(to: path, remote: remote, seeds: seeds, output: &output)
        } catch {
            // The partial file keeps what verified (synced and unlocked), to be resumed; when
            // nothing did (a 404, a body that is not an archive), nothing is left. A parallel
            // fetch's keeps every range after it too when the fetch was stopped or the network
            // failed (`Spec/0001 §13.8`): a rerun asks only for the holes.
            let parallel = !(FetchState.load(for: path)?.received ?? []).isEmpty
            let interrupted = error is CancellationError || (error as? CairnError).map { RetryPolicy.isTransient($0) || $0.code == .io } ?? false
            if !(parallel && interrupted) {
                let verified = await resumableLength(ofPartial: output.partialPath)
                if !parallel { try? output.truncate(to: verified) }
                if verified == 0 {
                    unlink(output.partialPath)
                    FetchState.remove(for: path)
                }
            }
            await output.abandon()
            throw error
        }
    }

    nonisolated(nonsending) private func fetch(
        to path: String, remote: RemoteArchive, seeds: SeedIndex, output: inout FileSink
    ) async throws -> FetchReport {
        var run = FetchRun(fetcher: self, path: path, remote: remote, seeds: seeds, output: output)
        // The caller gets the partial file in use, whatever happened: a restart opens another.
        defer { output = run.output }
        while true {
            try Task.checkCancellation()
            if let report = try await FetchAttempt.run(in: &run) { return report }
        }
    }

    /// Reads the partial file once, verifying it up to its last valid commit (or footer), and
    /// returns the verifier positioned there, to go on with the bytes after it. A prefix whose
    /// records pass their CRC-32 but not the scanner's checks is cut at its last valid commit and
    /// read again up to there (the file shrinks each time); one that verifies nothing (too short,
    /// not an archive, unreadable) gives a fresh verifier and offset 0.
    ///
    /// An encrypted archive's partial file (`Spec/0004-trusted-archives.md §6.10`) is read through
    /// its opened blocks: the verified length is the inner archive's, and the partial file is cut
    /// at the start of the sealed block that holds it (``SealedResume``), never inside a block.
    ///
    /// - Returns: the verifier, the prefix's verified length (outer bytes of the file), whether
    ///   that is a whole archive (its footer verified), and for an encrypted archive where its
    ///   inner archive continues.
    /// - Throws: `CancellationError`; `.io` when the partial file cannot be cut.
    ///
    /// A parallel fetch's partial file (`Spec/0001 §13.8`) is read only up to `limit`, the end
    /// of the ranges received from offset 0 without a gap (what lies after it is not in archive
    /// order), and is never cut: a prefix that does not verify up to there is read again up to
    /// where it does.
    nonisolated(nonsending) func readPartial(of output: FileSink, trustingContentBelow trusted: UInt64, limit: UInt64? = nil) async throws
        -> (verifier: StreamVerifier, start: UInt64, complete: Bool, sealed: SealedResume?)
    {
        var limit = limit
        while true {
            var verifier = StreamVerifier(
                path: url, trustingContentBelow: trusted, trustedKeys: options.trustedKeys, keying: options.keying)
            var outcome = StreamVerifier.PrefixOutcome.unusable(verifiedUpTo: 0)
            var envelope: OpenedEnvelope?
            do {
                let input = try FileDescriptor.open(output.partialPath, flags: O_RDONLY | O_NOFOLLOW)
                defer { _ = try? input.close() }
                if options.decryption.isEmpty {
                    defer { partialReads.add(verifier.prefixBytesRead, ordering: .relaxed) }
                    outcome = try await verifier.readPrefix(from: limit.map { PositionalByteInput(input, endingAt: $0) } ?? input)
                } else if let read = try await readSealedPartial(input, trustingContentBelow: trusted) {
                    (verifier, outcome, envelope) = (read.verifier, read.outcome, read.envelope)
                }
            } catch is CairnError {
                outcome = .unusable(verifiedUpTo: 0)
            }
            if let envelope {
                // An encrypted partial file never verifies whole: its last block is not opened
                // as the final one.
                switch outcome {
                case .continuing(let end), .complete(let end):
                    let resume = SealedResume(envelope: envelope, innerOffset: end)
                    return (verifier, resume.outerOffset, false, resume)
                case .unusable(let end):
                    guard end > 0 else { break }
                    try output.truncate(to: SealedResume(envelope: envelope, innerOffset: end).outerOffset)
                    continue
                }
            }
            switch outcome {
            case .continuing(let end): return (verifier, end, false, nil)
            case .complete(let end): return (verifier, end, true, nil)
            case .unusable(let end):
                guard end > 0 else {
                    return (StreamVerifier(path: url, trustedKeys: options.trustedKeys, keying: options.keying), 0, false, nil)
                }
                if limit != nil {
                    limit = end
                    continue
                }
                try output.truncate(to: end)
            }
        }
    }

    /// Bytes read from partial files by this fetcher's runs, to find where they resume (each
    /// attempt reads its partial file once).
    package var partialBytesRead: UInt64 { partialReads.load(ordering: .relaxed) }
    let partialReads = Atomic<UInt64>(0)

    /// Moves the partial file aside as `<path>.partial.seed` (replacing an older one), indexes
    /// it as a seed when `seeds` is given, and opens a new, empty partial file.
    nonisolated(nonsending) func setAside(_ output: FileSink, path: String, seeds: SeedIndex?) async throws -> FileSink {
        FetchState.remove(for: path)
        let seedPath = ArchiveLocation.setAsidePath(of: path)
        if try output.partialLength > 0 {
            try FileSystem.rename(Array(output.partialPath.utf8), to: Array(seedPath.utf8), display: seedPath)
            if options.decryption.isEmpty { try? seeds?.add(path: seedPath) }
        }
        await output.abandon()
        return try FileSink(continuing: path, overwrite: options.overwrite)
    }
}

/// Options for ``ArchiveFetcher``.
public struct FetchOptions: Sendable {
    /// Archives (complete or not) whose records are copied instead of downloaded: local files,
    /// or remote archives (`http(s)` URLs, S3 objects with their store), whose chunk records are
    /// copied with range requests.
    public var seeds: [ArchiveLocation]
    /// Transient failures retried within one run (each after an exponential backoff). Default 5.
    public var retries: Int
    /// Whether an existing file at the destination may be replaced (at the final rename only),
    /// and a partial file not left by a fetch of this URL set aside. Default false.
    public var overwrite: Bool
    /// Range requests kept in flight by a fetch of a plain archive without seeds (`Spec/0001
    /// §13.8`): the archive is downloaded in pieces over this many connections, each written at
    /// its offset in the partial file and checked in archive order as it joins the verified
    /// prefix. 1: one request front to back. Default 4. Memory: each connection gathers 1 MiB
    /// before writing, and the verifier's channel holds 16 MiB, so about N × 1 MiB + 16 MiB
    /// (plus the verifier's own checks). With seeds, the downloads between copies (`DeltaPlan`)
    /// are read ahead 16 MiB at a time over this many connections; a rebuild from local seeds
    /// asks for its ranges one at a time. An encrypted archive uses one.
    public var connections = 4
    /// The most bytes one range request of a parallel fetch asks for (8 MiB: S3's guidance is
    /// 8–16 MB ranges); smaller when the archive shared among ``connections`` gives less.
    package var rangeSize: UInt64 = 8 << 20
    /// Seconds to wait for a connection. Default 10.
    public var connectTimeout: Double
    /// Seconds without a byte before a transfer counts as cut. Default 30.
    public var stallTimeout: Double
    /// Told of resumes, retries and restarts as they happen (for `--progress` and logs).
    public var onEvent: (@Sendable (FetchEvent) -> Void)?
    /// The public keys whose signature the archive must carry (`Spec/0004-trusted-archives.md
    /// §4`): when not empty, a fetch refuses an archive that is not signed, or signed by another
    /// key (`.untrusted`, keeping nothing), and resumes only from a prefix a verified signature
    /// covers. Default empty: any archive.
    public var trustedKeys: [PublicKey] = []
    /// The archive's chunk keys (`Spec/0004-trusted-archives.md §6.6`), by which every chunk it
    /// verifies is checked, and under which seeds are read: a seed made with other keys shares
    /// no chunk id with the archive and cannot help. Nil (the default): a plain archive.
    package var keying: ChunkKeying?
    /// What opens an encrypted archive's key block (`Spec/0004-trusted-archives.md §6.10`):
    /// when not empty, the archive must be encrypted (a plain one is refused with `.untrusted`);
    /// its blocks are opened as they arrive and the inner archive verified, and the file
    /// written is the remote's bytes; or from offset 0, with local ``seeds`` that share its chunk
    /// keys, its inner archive rebuilt from them and sealed again under its keys (§6.10.3).
    /// Default empty: the archive must be plain (an encrypted
    /// one is refused with `.untrusted`, asking for an identity).
    public var decryption = ArchiveDecryption()

    public init(
        seeds: [ArchiveLocation] = [], retries: Int = 5, overwrite: Bool = false, connectTimeout: Double = 10, stallTimeout: Double = 30,
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
    /// A seed that is not used, and why (`Spec/0003-command-line.md §13`, the seed rule): an
    /// archive that cannot help (an encrypted seed of a plain archive or the other way round,
    /// other chunk keys, one no identity opens, `Spec/0004-trusted-archives.md §6.10.3`).
    case seedSkipped(path: String, reason: String)
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
    /// The verified prefix of an earlier run this run continued from (0 for a fresh fetch, and
    /// when the run started over).
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
    /// Bytes after the verified prefix that an earlier parallel run received whole and this one
    /// kept instead of downloading again (`Spec/0001-container-format.md §13.8`); 0 when the run
    /// started over (``restarts`` > 0: the archive at the URL changed, nothing was kept).
    public var keptRangeBytes: UInt64 = 0
    /// Connections the download used: ``FetchOptions/connections``, or 1 when it went front to
    /// back (one connection asked for, an encrypted archive, a server without ranges), a
    /// rebuild from seeds asked for its ranges one at a time, or a plan of copies and downloads
    /// downloaded nothing.
    public var connections = 1

    public init() {}
}
