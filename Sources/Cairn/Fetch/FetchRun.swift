import Foundation
import Glibc

/// One run of ``ArchiveFetcher``'s fetch: what its attempts work with, and what carries from
/// one ``FetchAttempt`` to the next (the report, the counters, and what earlier attempts
/// learned about the server and the seeds).
struct FetchRun {
    let fetcher: ArchiveFetcher
    /// The destination; bytes go to `<path>.partial`.
    let path: String
    /// The archive: its operand as given (in messages and the state file), the URL requests go
    /// to and their client.
    let remote: RemoteArchive
    let seeds: SeedIndex
    /// The partial file; another one once a restart set this one aside.
    var output: FileSink
    var report = FetchReport()
    /// Cleared when the server does not answer range requests: seeds are not used again.
    var rangesWork = true
    /// Offsets of seed copies that did not verify: downloaded in later attempts.
    var distrusted: Set<UInt64> = []
    /// The remote manifest of this run (read once unless the archive changes).
    var cachedRemote: RemoteManifest?
    var restarts = 0
    var retries = 0
    var firstAttempt = true
    /// Set once a verification failed in this run: the recorded progress (contents checked by
    /// an earlier run) is not trusted again.
    var distrustRecorded = false
    /// Set once an archive rebuilt by the writer (`ArchiveRebuilder`) diverged or did not
    /// verify: the rest of the run plans copies and downloads (`DeltaPlan`).
    var rebuildFailed = false
    /// A seeded fetch of an encrypted archive: the remote opened (`Spec/0004 §6.10.3`).
    var sealedRemote: SealedRemote?
    /// Whether the seeds of an encrypted archive were opened and indexed (once per run).
    private var encryptedSeedsIndexed = false

    init(fetcher: ArchiveFetcher, path: String, remote: RemoteArchive, seeds: SeedIndex, output: FileSink) {
        self.fetcher = fetcher
        self.path = path
        self.remote = remote
        self.seeds = seeds
        self.output = output
    }

    /// The archive's operand as given: what messages and the state file name.
    var url: String { remote.name }
    var options: FetchOptions { fetcher.options }

    /// The one way a fetch ends well: the partial file, verified whole, is put in place.
    nonisolated(nonsending) mutating func complete(_ verified: VerificationReport) async throws -> FetchReport {
        // An encrypted archive's file is its outer bytes; the verifier counted the inner ones.
        let fileBytes = options.decryption.isEmpty ? verified.archiveBytes : try output.partialLength
        try await output.finish()
        FetchState.remove(for: path)
        unlink(ArchiveLocation.setAsidePath(of: path))
        report.archiveBytes = fileBytes
        // Remote seeds' requests too (each seed has its own client).
        let seedClients = seeds.seeds.compactMap { $0.remote?.client }
        report.fetchedBytes = remote.client.bytesReceived + seedClients.reduce(0) { $0 + $1.bytesReceived }
        report.requestCount = remote.client.requestCount + seedClients.reduce(0) { $0 + $1.requestCount }
        report.restarts = restarts
        report.retries = retries
        fetcher.progress.completedUnitCount = Int64(clamping: fileBytes)
        fetcher.checkedProgress.totalUnitCount = Int64(clamping: fileBytes)
        fetcher.checkedProgress.completedUnitCount = Int64(clamping: fileBytes)
        return report
    }

    /// Opens the local seeds of an encrypted archive with the fetch's identities and indexes
    /// those whose chunk id key is `keying`'s, the archive's (`Spec/0004 §6.10.3`), once per run.
    /// A seed that cannot help (other keys, a plain archive, one no identity opens, a remote
    /// seed) is told of (``FetchEvent/seedSkipped(path:reason:)``) and left out: the fetch goes
    /// on without it.
    mutating func indexEncryptedSeeds(keying: ChunkKeying) {
        guard !encryptedSeedsIndexed else { return }
        encryptedSeedsIndexed = true
        for seed in options.seeds {
            guard case .file(let path) = seed else {
                options.onEvent?(.seedSkipped(path: seed.name, reason: "a remote seed is not read for an encrypted archive"))
                continue
            }
            // Rule 1 refused what is not an archive before the first request (`ArchiveFetcher`).
            do throws(CairnError) {
                if let reason = try seeds.admit(localSeed: path, decryption: options.decryption, keying: keying) {
                    options.onEvent?(.seedSkipped(path: path, reason: reason))
                }
            } catch {
                options.onEvent?(.seedSkipped(path: path, reason: error.message))
            }
        }
    }

    /// Whether `error` is retried: a transient failure (`.network`, HTTP 408/429/5xx) while
    /// ``FetchOptions/retries`` are left.
    func mayRetry(_ error: CairnError) -> Bool {
        RetryPolicy.isTransient(error) && retries < options.retries
    }

    /// Counts a retry, tells of it, and waits out its exponential backoff.
    nonisolated(nonsending) mutating func retry(after error: CairnError) async throws {
        retries += 1
        options.onEvent?(.retrying(error, attempt: retries))
        try await Task.sleep(for: .milliseconds(Self.backoffMilliseconds(retries)))
    }

    /// Counts a restart, tells why, and sets the partial file aside (``setAside(indexingAsSeed:)``).
    /// Nothing of the partial file is continued: the report's resumed prefix and kept ranges
    /// (the replaced archive's) are 0.
    nonisolated(nonsending) mutating func restart(because reason: String, indexingAsSeed: Bool) async throws {
        restarts += 1
        report.resumedFrom = 0
        report.keptRangeBytes = 0
        options.onEvent?(.restarting(reason: reason))
        try await setAside(indexingAsSeed: indexingAsSeed)
    }

    /// Moves the partial file aside as `<path>.partial.seed`, indexed as a seed when
    /// `indexingAsSeed`, and goes on with a new, empty one: the next attempt starts from zero.
    nonisolated(nonsending) mutating func setAside(indexingAsSeed: Bool) async throws {
        output = try await fetcher.setAside(output, path: path, seeds: indexingAsSeed ? seeds : nil)
        cachedRemote = nil
    }

    private static func backoffMilliseconds(_ attempt: Int) -> Int {
        min(5000, 200 << min(attempt - 1, 5))
    }
}
