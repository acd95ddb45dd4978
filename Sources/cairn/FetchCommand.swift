import Cairn
import Foundation

/// `cairn fetch URL -o FILE [--seed ARCHIVE]... [--connections N] [--json] [--progress] [--retries N] [--force]`
enum FetchCommand {
    static let usage = """
        usage: cairn fetch URL -o FILE [--seed ARCHIVE]... [--connections N] [--retries N] [--timeout S] [--force] [--json] [--progress] [-q]
                   [--trusted-key PUBFILE]... [--identity FILE]... [--passphrase | --passphrase-file FILE]

        Downloads the archive at URL (http://, https://, or an s3://BUCKET/KEY object read with
        signed requests: --s3-endpoint URL or AWS_ENDPOINT_URL) into FILE, verifying every record,
        chunk and commit as the bytes arrive. The bytes go to FILE.partial; FILE appears only
        once the whole archive verified. Run the same command again after any interruption (a
        kill, a cut connection, a timeout, a full disk): it continues from the last verified
        commit of FILE.partial with a range request, and starts over (never splicing two
        archives) if the archive at URL was replaced.

        --seed ARCHIVE  a local archive (the previous export, say) whose records are copied
                        instead of downloaded; repeatable. The footer and manifest are read
                        first, then only what no seed holds is downloaded. The result is
                        byte-identical to the archive at URL. A seed may also be remote (an
                        http(s):// URL or an s3:// object, a nearer copy): its chunk records
                        are copied with range requests (its packs only from local seeds).
        \(TransferOptions.connectionsHelp)
                        A plain archive without seeds is downloaded in ranges of up to 8 MiB
                        over N connections, each written at its place in FILE.partial and
                        checked in archive order as the ranges join; a rerun keeps every range
                        that arrived whole. 1: one request front to back. With --seed, the
                        downloads between copies are read ahead over N connections (a rebuild
                        from local seeds asks one at a time). An encrypted archive uses one.
        --retries N     transient failures (cut connections, timeouts, 5xx) retried in this run,
                        with backoff (default 5)
        --force         replace an existing FILE, and set aside a FILE.partial not left by a
                        fetch of URL
        --json          print the report as one JSON object
        --progress      draw a progress bar on standard error (default: when it is a terminal)
        \(TransferOptions.timeoutHelp)

        \(KeyOptions.trustedKeyHelp)
                    A fetch with trusted keys resumes only from a prefix a verified signature
                    covers, and keeps nothing of an archive it refuses.

        \(EncryptionOptions.readingHelp)
                    An encrypted archive (Spec/0004 §6.10) is fetched only with one of them:
                    its sealed blocks are opened as they arrive and its inner archive verified
                    as a plain one is; FILE is the remote's bytes, byte-identical, and a rerun
                    resumes from the sealed block holding the last verified commit. With
                    --seed, an earlier export of the same maker (--sign or --maker-key; opened with the same
                    identities) gives what it shares, and the rebuilt archive is sealed again
                    under the remote's keys (the same content, not the same bytes); a seed
                    made with other keys is named and left out. A rerun after a cut
                    continues the partial file verbatim from the remote: the seeds help
                    only the first run.
        """

    static func run(_ raw: [[UInt8]]) async throws -> ExitStatus {
        let args = try Arguments(
            raw,
            valued: Set(["-o", "--output", "--seed", "--retries", ArchiveOperand.endpointOption, KeyOptions.trustedKeyOption])
                .union(TransferOptions.valued)
                .union(EncryptionOptions.readingOptions),
            flags: ["--json", "--progress", "--no-progress", "--force", "-q", "--quiet", EncryptionOptions.passphraseFlag])
        guard args.operands.count == 1, let first = args.operands.first else { throw UsageError("fetch takes one URL") }
        let url = String(decoding: first, as: UTF8.self)
        guard ArchiveLocation.kind(of: url) != .file else { throw UsageError("'\(url)' is not an http://, https:// or s3:// location") }
        guard let output = args.value("-o", "--output") else { throw UsageError("missing -o FILE") }
        guard !output.isEmpty else { throw UsageError("-o needs a file name") }
        // Refused before a byte is downloaded, as create refuses it.
        try ArchiveOperand.refuseDirectoryOutput(output)
        guard output != "-" else { throw UsageError("fetch writes a file (-o FILE): it verifies the whole archive before FILE appears; use 'cairn cat URL' for standard output") }
        let endpoint = args.value(ArchiveOperand.endpointOption)
        let seeds = try args.allValues("--seed").map { (seed) throws(CairnError) in try ArchiveLocation(parsing: seed, s3Endpoint: endpoint) }
        var options = FetchOptions(seeds: seeds, overwrite: args.flag("--force"))
        options.trustedKeys = try KeyOptions.trustedKeys(args)
        options.decryption = try EncryptionOptions.decryption(args)
        if let text = args.value("--retries") {
            guard let value = Int(text), value >= 0, value <= 1000 else { throw UsageError("--retries takes a count (0–1000)") }
            options.retries = value
        }
        if let timeout = try TransferOptions.timeout(args) { options.stallTimeout = timeout }
        options.connections = try TransferOptions.connections(args)
        let quiet = args.flag("-q", "--quiet") || args.flag("--json")
        let retries = options.retries
        options.onEvent = { event in
            guard !quiet else { return }
            switch event {
            case .resuming(let offset):
                Output.err("cairn fetch: resuming after the \(Output.bytes(offset)) verified in \(ArchiveLocation.partialPath(of: output))")
            case .planned(let fetchBytes, let seedBytes):
                Output.err("cairn fetch: \(Output.bytes(seedBytes)) from seeds, \(Output.bytes(fetchBytes)) to download")
            case .retrying(let error, let attempt):
                Output.err("cairn fetch: \(error); retrying (\(attempt) of \(retries))")
            case .restarting(let reason):
                Output.err("cairn fetch: \(reason); starting over")
            case .seedSkipped(let path, let reason):
                Output.err("cairn fetch: seed \(path) not used: \(reason)")
            }
        }
        let fetcher = ArchiveFetcher(from: try ArchiveOperand.location(url, args), options: options)
        Interruption.describe { Interruption.fetchLine(raw, partial: ArchiveLocation.partialPath(of: output)) }
        var bar: ProgressBar?
        if ProgressBar.shouldShow(args) {
            bar = ProgressBar(progress: fetcher.progress, label: "fetch")
            bar?.start()
        }
        let started = monotonicSeconds()
        let report: FetchReport
        do {
            report = try await fetcher.fetch(to: .file(path: output))
        } catch {
            bar?.stop()
            throw error
        }
        bar?.stop()
        let seconds = monotonicSeconds() - started
        let share = report.archiveBytes > 0 ? Double(report.fetchedBytes) / Double(report.archiveBytes) * 100 : 0
        if args.flag("--json") {
            Output.out(
                Output.json([
                    "ok": true, "url": CairnError.hidingPassword(in: url), "file": output, "archiveBytes": report.archiveBytes,
                    "fetchedBytes": report.fetchedBytes, "seedBytes": report.seedBytes, "resumedFrom": report.resumedFrom, "keptRangeBytes": report.keptRangeBytes, "connections": report.connections,
                    "contentTrustedBytes": report.contentTrustedBytes, "requestCount": report.requestCount, "restarts": report.restarts, "retries": report.retries,
                    "wallSeconds": seconds,
                ]))
        } else if !quiet {
            var line = "OK \(output): \(Output.bytes(report.archiveBytes)) verified; downloaded \(Output.bytes(report.fetchedBytes))"
            line += String(format: " (%.1f%% of the archive)", share)
            if report.seedBytes > 0 { line += ", \(Output.bytes(report.seedBytes)) from seeds" }
            if report.resumedFrom > 0 { line += ", resumed at \(report.resumedFrom)" }
            if report.keptRangeBytes > 0 { line += ", \(Output.bytes(report.keptRangeBytes)) of ranges kept" }
            if report.restarts > 0 { line += ", started over " + (report.restarts == 1 ? "once" : "\(report.restarts) times") }
            line += " in \(String(format: "%.2f", seconds)) s (\(Output.rate(report.archiveBytes, seconds: seconds)) of archive)"
            Output.out(line)
        }
        return .success
    }
}
