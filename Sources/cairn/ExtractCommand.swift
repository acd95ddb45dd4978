import Cairn
import Foundation
import Synchronization

/// `cairn extract ARCHIVE [-C DEST] [PATH...]`
enum ExtractCommand {
    static let usage = """
        usage: cairn extract ARCHIVE [-C DEST] [options] [PATH...]

        Extracts every entry (or only PATHs and what is below them) into DEST (default: the
        current directory). Every chunk is verified before its bytes are written. Extraction is
        all-or-nothing: it writes into a staging directory and renames into place at the end; on
        failure nothing partial remains and nothing that existed is changed. If DEST exists, the
        archive's top-level names must not exist in it.

        ARCHIVE may be an http:// or https:// URL. Without PATHs it is read once, front to back,
        with one GET (as - is; no range support needed). With PATHs, or with --resume after an
        interrupted extraction, it is read at random with range requests: the footer, the
        manifest, then only the records the entries to write need (the server must support
        ranges); --resume continues from the staging directory's journal and fetches only what
        is missing, after checking that the archive at the URL is the one the journal is of.
        ARCHIVE may also be an s3://BUCKET/KEY object, read the same way with signed requests (--s3-endpoint URL or
        AWS_ENDPOINT_URL; AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION).
        Read at random, up to --connections coalesced range requests are in flight at once.

        options:
          -C, --directory DEST     where to extract; created if missing (its parent must
                                   exist); a symlink to a directory is followed
          --strip-components N     drop the first N components of every path; entries with
                                   nothing left are not extracted (as tar)
          --overwrite              into an existing DEST: replace existing files and links,
                                   merge into existing directories
          --keep-old-files         into an existing DEST: keep existing names, report each
                                   as an error (exit 1) after extracting the rest
          --skip-old-files         into an existing DEST: keep existing names silently
                                   (without one of these three, any existing top-level name
                                   refuses the whole extraction: all or nothing; an SQLite
                                   database and its -wal, -journal, -shm count as one name, and
                                   --overwrite moves a replaced database's sidecars aside to
                                   NAME.cairn-aside, with a warning, exit 3)
          --max-output SIZE        refuse archives declaring more output (default 1T; SIZE is
                                   bytes, or with K, M, G, T: powers of 1024)
          --no-space-check         do not compare the declared output with the free space
          --resume                 continue an extraction that was killed, interrupted or whose
                                   input ended early: entries already written are skipped
          -f, --force              start over: discard the staging directory an interrupted
                                   extraction into DEST left (nothing in DEST is touched)
          -v, --verbose            print each entry's path on standard error as it is extracted
          --no-xattrs              do not set the archived extended attributes (by default
                                   they are; one the destination refuses is a warning, exit 3)
          -q, --quiet              print nothing on success
          --json                   print the figures as JSON
          --progress               draw the progress bar even when standard error is not a
                                   terminal, or when reading the archive from standard input
          --no-progress            never draw it (default: drawn on a terminal, except for -)
          \(TransferOptions.connectionsHelp)
          \(TransferOptions.timeoutHelp)

        \(KeyOptions.trustedKeyHelp)
                    From a stream (-, or a URL without PATHs) every signature is checked as
                    it arrives and nothing is moved into DEST before the root signature
                    verified; --resume keeps only what a verified signature covers.

        \(EncryptionOptions.readingHelp)
        """

    static func run(_ raw: [[UInt8]]) async throws -> ExitStatus {
        let args = try Arguments(
            raw, valued: Set(["-C", "--directory", "--max-output", "--strip-components", ArchiveOperand.endpointOption, KeyOptions.trustedKeyOption]).union(EncryptionOptions.readingOptions)
                .union(TransferOptions.valued),
            flags: [
                "--no-space-check", "-q", "--quiet", "--json", "--progress", "--no-progress", "--resume", "--overwrite",
                "--keep-old-files", "--skip-old-files", "-v", "--verbose", "--no-xattrs", "-f", "--force",
                EncryptionOptions.passphraseFlag,
            ])
        let archive = try CommandLineTool.archiveOperand(args, takingPaths: true)
        let destination = args.rawValue("-C", "--directory") ?? Array(".".utf8)
        // tar refuses -C "" too: an empty name is a mistake, not the current directory.
        guard !destination.isEmpty else { throw UsageError("-C needs a directory name") }
        var options = try Self.options(args)
        let remote = try TransferOptions.remoteReading(args)
        if args.flag("-v", "--verbose") {
            options.onEntry = { entry in Output.err(entry.path) }
        }
        let warnings = Warnings()
        options.onWarning = { warnings.append($0) }
        // Where the staging directory is, decided before anything is made, for the line an
        // interruption prints.
        let staging = StagingLocation.path(for: destination)
        Interruption.describe { Interruption.extractLine(raw, staging: staging, fromStandardInput: archive == "-") }
        if archive == "-" {
            guard args.operands.count == 1 else { throw UsageError("PATH selection needs a seekable ARCHIVE, not -") }
            try Terminal.refuseArchive(on: 0)
            return try await extractFromStandardInput(args, destination: destination, options: options, warnings: warnings)
        }
        let selection = args.operands.dropFirst().map { String(decoding: $0, as: UTF8.self) }
        if ArchiveLocation.kind(of: archive) != .file, selection.isEmpty, !options.resume {
            return try await extractFromURL(archive, args, remote: remote, destination: destination, options: options, warnings: warnings)
        }
        let started = monotonicSeconds()
        let cpuStarted = ProcessTimes.cpuSeconds()
        let extractor = try await Self.open(
            archive, args, remote: remote, resumingAll: options.resume && selection.isEmpty, destination: destination)
        defer { extractor.close() }
        let bar = ProgressBar.shouldShow(args) ? ProgressBar(progress: extractor.progress, label: "extract") : nil
        bar?.start()
        let destinationURL = URL(fileURLWithPath: String(decoding: destination, as: UTF8.self))
        var extractedEntries = extractor.summary.entryCount
        var extractedBytes = extractor.summary.contentBytes
        do {
            if selection.isEmpty {
                try await extractor.extractAll(to: destinationURL, options: options)
            } else {
                let chosen = try args.operands.dropFirst().map { try Self.selectionPath($0, in: extractor) }
                (extractedEntries, extractedBytes) = try await extractor.extract(
                    selection: chosen, to: destination, options: options)
            }
        } catch {
            bar?.stop()
            throw error
        }
        bar?.stop()
        return report(
            args, entries: extractedEntries, contentBytes: extractedBytes, source: "", destination: destination,
            seconds: monotonicSeconds() - started, cpuSeconds: ProcessTimes.cpuSeconds() - cpuStarted,
            warnings: warnings.all)
    }

    /// Opens `archive` to read at random. For `extract URL --resume` of everything from a server
    /// without range support, the interrupted extraction cannot be continued from there: the
    /// error names the one way out, starting over with `--force` (which the refusal without
    /// `--resume` names too), instead of sending the user between the two messages.
    static func open(
        _ archive: String, _ args: Arguments, remote: RemoteReadOptions, resumingAll: Bool, destination: [UInt8]
    ) async throws(CairnError) -> Extractor {
        do {
            return try await ArchiveOperand.open(archive, args, remote: remote)
        } catch {
            guard resumingAll, error.message.hasPrefix(RangeAnswer.noRangesMessage) else { throw error }
            let staging = String(decoding: StagingLocation.path(for: destination), as: UTF8.self)
            var refused = error
            refused.message =
                RangeAnswer.noRangesMessage + ", which --resume needs to fetch only what is missing; "
                + "start over with --force instead of --resume: it discards what the interrupted extraction staged in \(staging) "
                + "and reads the archive again with one GET (nothing in the destination is touched)"
            throw refused
        }
    }

    /// The extraction options the flags ask for.
    ///
    /// - Throws: `UsageError` for a bad `--max-output` or `--strip-components`, when more
    ///   than one of `--overwrite`, `--keep-old-files` and `--skip-old-files` is given, or
    ///   `--resume` with `--force`.
    static func options(_ args: Arguments) throws(UsageError) -> ExtractionOptions {
        var options = ExtractionOptions()
        if let limit = try ByteSize.value("--max-output", in: args) { options.maximumOutputBytes = limit }
        if args.flag("--no-space-check") { options.checkFreeSpace = false }
        if args.flag("--resume") { options.resume = true }
        if args.flag("-f", "--force") {
            guard !options.resume else {
                throw UsageError("--resume continues an interrupted extraction and --force discards it: give one of them")
            }
            options.discardsInterruptedExtraction = true
        }
        if args.flag("--no-xattrs") { options.restoresExtendedAttributes = false }
        if let text = args.value("--strip-components") {
            guard let count = Int(text), count >= 0, count <= 4096 else {
                throw UsageError("--strip-components takes a number of path components (0 or more): got '\(text)'")
            }
            options.stripComponents = count
        }
        let policies: [(String, ExistingFilePolicy)] = [
            ("--overwrite", .overwrite), ("--keep-old-files", .keepOld), ("--skip-old-files", .skipOld),
        ]
        let chosen = policies.filter { args.flag($0.0) }
        guard chosen.count <= 1 else {
            throw UsageError("\(chosen.map(\.0).joined(separator: " and ")) cannot be given together")
        }
        if let policy = chosen.first?.1 { options.existingFiles = policy }
        return options
    }

    /// The warnings of one extraction (``ExtractionOptions/onWarning`` may be called from any
    /// task), printed once it is complete.
    final class Warnings: Sendable {
        private let list = Mutex<[CairnError]>([])
        func append(_ warning: CairnError) { list.withLock { $0.append(warning) } }
        var all: [CairnError] { list.withLock { $0 } }
    }

    /// Prints the warnings and figures of a finished extraction (text, or JSON with `--json`).
    ///
    /// - Returns: `.warnings` (exit 3) when there were warnings, else `.success`.
    static func report(
        _ args: Arguments, entries: Int, contentBytes: UInt64, source: String, destination: [UInt8], seconds: Double,
        cpuSeconds: Double, warnings: [CairnError]
    ) -> ExitStatus {
        for warning in warnings { Output.warning(warning) }
        if args.flag("--json") {
            Output.out(
                Output.json([
                    "entryCount": entries, "contentBytes": contentBytes, "wallSeconds": seconds, "cpuSeconds": cpuSeconds,
                    "warnings": warnings.map(\.description),
                ]))
        } else if !args.flag("-q", "--quiet") {
            Output.out(
                "extracted \(Output.entries(entries)), \(Output.bytes(contentBytes))\(source) into \(String(decoding: destination, as: UTF8.self)) "
                    + "in \(String(format: "%.2f", seconds)) s (\(Output.rate(contentBytes, seconds: seconds)), "
                    + "\(String(format: "%.2f", cpuSeconds)) s CPU)")
        }
        return warnings.isEmpty ? .success : .warnings
    }

    /// `cairn extract - -C DEST`: reads the archive once from standard input.
    static func extractFromStandardInput(
        _ args: Arguments, destination: [UInt8], options: ExtractionOptions, warnings: Warnings
    ) async throws -> ExitStatus {
        let input = try EncryptionOptions.decryption(args).open(
            SequentialArchiveBytes(descriptor: .standardInput, finish: {}, cancel: {}), name: "<stdin>")
        return try await extractStreaming(
            input, url: nil, args, destination: destination, options: options, warnings: warnings)
    }

    /// `cairn extract URL -C DEST`: reads the archive once, front to back, from one GET (the
    /// streaming extraction of `extract -`, which needs no range support).
    static func extractFromURL(
        _ url: String, _ args: Arguments, remote: RemoteReadOptions, destination: [UInt8], options: ExtractionOptions, warnings: Warnings
    ) async throws -> ExitStatus {
        let decryption = try EncryptionOptions.decryption(args)
        let outer = try await ArchiveOperand.location(url, args).openSequential(remote: remote)
        let input = try await DedicatedThread.run { () throws(CairnError) in try decryption.open(outer, name: url) }
        return try await extractStreaming(input, url: url, args, destination: destination, options: options, warnings: warnings)
    }

    /// The one streaming extraction of the command line: `input` read once, front to back
    /// (standard input when `url` is nil), through ``Extractor``'s stream extraction.
    private static func extractStreaming(
        _ input: SequentialArchiveBytes, url: String?, _ args: Arguments, destination: [UInt8], options: ExtractionOptions,
        warnings: Warnings
    ) async throws -> ExitStatus {
        let started = monotonicSeconds()
        let cpuStarted = ProcessTimes.cpuSeconds()
        let progress = Progress(totalUnitCount: 0)
        let bar =
            ProgressBar.shouldShow(args, readsArchiveFromStandardInput: url == nil)
            ? ProgressBar(progress: progress, label: "extract") : nil
        bar?.start()
        let verified: VerificationReport
        do {
            verified = try await Extractor.extractStream(
                from: input.descriptor, to: destination, options: options, progress: progress, trustedKeys: KeyOptions.trustedKeys(args),
                keying: input.keying, producedBy: input)
            try input.finish()
        } catch {
            bar?.stop()
            let failure = Extractor.ending(input, after: error, path: url ?? "<stdin>")
            guard let url else { throw failure }
            if let failure = failure as? CairnError { throw failure.withPath(url) }
            throw failure
        }
        bar?.stop()
        let source = url.map { " from \(CairnError.hidingPassword(in: $0))" } ?? " from standard input"
        return report(
            args, entries: verified.entryCount, contentBytes: verified.contentBytes, source: source,
            destination: destination, seconds: monotonicSeconds() - started,
            cpuSeconds: ProcessTimes.cpuSeconds() - cpuStarted, warnings: warnings.all)
    }

    /// A PATH operand as a path in archive: trailing slashes and a leading `./` are dropped, and
    /// a name as `cairn list` prints it (with `\xHH` and `\\` escapes) is accepted too.
    static func selectionPath(_ operand: [UInt8], in extractor: Extractor) throws -> [UInt8] {
        var path = operand
        while path.count > 1, path.last == 0x2F { path.removeLast() }
        while path.count > 2, path[0] == 0x2E, path[1] == 0x2F { path.removeFirst(2) }
        let names = Set(extractor.entries.map(\.pathBytes))
        if names.contains(path) { return path }
        if let unescaped = PathBytes.unescaped(String(decoding: path, as: UTF8.self)), names.contains(unescaped) {
            return unescaped
        }
        return path
    }
}
