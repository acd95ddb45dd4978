import Cairn
import Foundation
import Glibc

/// `cairn create -o ARCHIVE [options] PATH...`
enum CreateCommand {
    static let usage = """
        usage: cairn create -o ARCHIVE [options] PATH...

        Archives each PATH (file, directory recursively, or symlink) under its last path
        component, as tar does: 'cairn create -o a.cairn some/dir' stores dir/...
        The same sources and options always give the same bytes, except an encrypted
        archive's, which are sealed under a new archive id, block key and nonces each time.

        options:
          -o, --output ARCHIVE      the archive to write, - for standard output, or
                                    s3://BUCKET/KEY: uploaded while it is made (a multipart
                                    upload; no object at the key until it is complete)
          --s3-endpoint URL         the object store (default: AWS_ENDPOINT_URL, else AWS);
                                    credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
          --upload-state FILE       the state of an upload to s3://, for --resume (default:
                                    one per object in $XDG_STATE_HOME/cairn/uploads, else
                                    ~/.local/state/cairn/uploads)
          \(TransferOptions.uploadConcurrencyHelp)
          --timeout S               with s3://: seconds without a byte before a request counts
                                    as cut and is retried (default 30)
          --sign SECFILE            sign the archive with the minisign secret key SECFILE
                                    (format 2.2; its password from the file CAIRN_KEY_PASSWORD_FILE
                                    names, else asked on the terminal); --resume of a signed
                                    archive needs the same key
          --recipient age1...       encrypt the archive for this age recipient (repeatable;
                                    Spec/0004 §6); readers need the identity (--identity)
          --recipients-file FILE    encrypt for every recipient in FILE (repeatable)
          --passphrase, --passphrase-file FILE
                                    encrypt with a passphrase (Argon2id) instead, typed twice
                                    or the file's first line
          --maker-key FILE          derive the encrypted archive's chunk id and chunker keys from
                                    this maker key file (cairn key generate --maker FILE), so
                                    the maker's archives share chunk ids; used even with --sign
                                    (without it, --sign's key is used, else random keys)
          --compression METHOD      lz4 (default), zlib[:LEVEL], zstd[:LEVEL], none
          --chunking POLICY         cdc (default, 16k/64k/256k), cdc:MIN:AVG:MAX, fixed[:SIZE]
          --not-compressible        store chunks raw (the compressible hint is off)
          --resources-version V     the payload's own version string
          --app-id ID               identifier of the app that made the archive
          --size-estimate SIZE      estimate of the content size (for progress; K/M/G/T)
          --meta KEY=VALUE          free metadata, repeatable (keys starting 'cairn.' are reserved)
          --exclude PATTERN         leave out items whose path in archive, or any trailing part of
                                    it, matches the glob ('*.log', 'cache'); repeatable
          --exclude-from FILE       read --exclude patterns from FILE, one per line
          --files-from FILE         read the PATHs from FILE (- for standard input), one per line
          --null                    with --files-from: names are separated by NUL bytes
          --one-file-system         do not descend into directories on another file system
                                    (their entries are kept)
          --no-xattrs               do not archive extended attributes (by default user.*,
                                    readable trusted.* and security.*, and POSIX ACLs)
          --no-sqlite-snapshot      copy SQLite databases as plain files (by default each is
                                    read under a read transaction, its -wal right after it,
                                    so the copy is one committed state)
          -T, --threads N           hash and compress on N threads (default: all cores); the
                                    archive is the same whatever N
          -v, --verbose             print each entry's path in archive on standard error
          -f, --force               replace an existing ARCHIVE (only once the new one is
                                    complete) and start over an existing ARCHIVE.partial
          --resume                  continue ARCHIVE.partial left by an interrupted run: items
                                    already committed are not read again; a file cut in the
                                    middle continues after its last committed chunk; for
                                    s3://, the recorded upload: parts the store holds are
                                    made again but not sent. An encrypted ARCHIVE.partial
                                    or upload continues with its own keys: give --identity
                                    FILE or the passphrase (--passphrase, --passphrase-file)
                                    that opens it; --recipient, --recipients-file and
                                    --maker-key are refused
          --identity FILE           with --resume: an age identity that opens the encrypted
                                    ARCHIVE.partial's (or s3:// upload's) key block
                                    (repeatable)
          --json                    print the export properties as JSON
          -q, --quiet               print nothing on success
          --progress, --no-progress force or hide the progress bar (default: on a terminal)
        """

    static func run(_ raw: [[UInt8]]) async throws -> ExitStatus {
        let args = try Arguments(
            raw,
            valued: [
                "-o", "--output", "--compression", "--chunking", "--resources-version", "--app-id", "--size-estimate", "--meta",
                "--exclude", "--exclude-from", "--files-from", "-T", "--threads", ArchiveOperand.endpointOption, "--upload-state",
                TransferOptions.uploadConcurrencyOption, TransferOptions.timeoutOption,
                "--sign", EncryptionOptions.recipientOption, EncryptionOptions.recipientsFileOption,
                EncryptionOptions.passphraseFileOption, EncryptionOptions.identityOption, EncryptionOptions.makerKeyOption,
            ],
            flags: [
                "--not-compressible", "--json", "-q", "--quiet", "--progress", "--no-progress", "--resume", "-f", "--force",
                "--null", "--one-file-system", "-v", "--verbose", "--no-xattrs", "--no-sqlite-snapshot",
                EncryptionOptions.passphraseFlag,
            ])
        guard let output = args.value("-o", "--output") else { throw UsageError("missing -o ARCHIVE") }
        guard !output.isEmpty else { throw UsageError("-o needs a file name") }
        let operands = try Self.sources(args)
        let toStore = ArchiveLocation.kind(of: output) == .object
        try Self.checkOutput(output, args, toStore: toStore)
        var configuration = try Self.configuration(args, sources: operands)
        try Self.requireExisting(operands)
        let toStandardOutput = output == "-"
        if toStandardOutput { try Terminal.refuseArchive(on: 1, instead: "give -o FILE, or redirect or pipe standard output") }
        let showProgress = ProgressBar.shouldShow(args)
        // One quick scan (lstat only) of the sources, for what wants their size and was given
        // none: the progress bar's total (not on --resume) and a new upload's part size (a resumed
        // one keeps its recorded sizes). The archive is unaffected (its header's estimate is only
        // --size-estimate). An operand that vanished since it was checked leaves the size unknown.
        let scanned: UInt64? =
            configuration.sizeEstimate == nil && ((showProgress && !args.flag("--resume")) || toStore)
            ? try? Archiver.sizeEstimate(ofPaths: operands, excluding: ExclusionPatterns(configuration.exclusions)) : nil
        guard
            let target = try await Self.openTarget(
                output, args, toStore: toStore, configuration: &configuration, sources: operands, scanned: scanned)
        else {
            return .success
        }
        let started = monotonicSeconds()
        let cpuStarted = ProcessTimes.cpuSeconds()
        if showProgress, configuration.sizeEstimate == nil, !args.flag("--resume") {
            target.archiver.progress.totalUnitCount = scanned.map { Int64(clamping: $0) } ?? -1
        }
        let properties = try await Self.append(operands, to: target, output: output, showProgress: showProgress)
        Self.printReport(
            properties, args, output: output, sink: target.sink, seconds: monotonicSeconds() - started,
            cpuSeconds: ProcessTimes.cpuSeconds() - cpuStarted)
        return properties.warnings.isEmpty ? .success : .warnings
    }

    /// The archiver `create` runs, and the sink it made itself (nil when the archiver made its
    /// own: a resumed file).
    struct Target {
        let archiver: Archiver
        let sink: (any ArchiveSink)?
    }

    /// The PATH operands and the names `--files-from` lists, checked: at least one, and no two
    /// stored under the same top-level name (caught before any work, as it would only fail at
    /// the end).
    ///
    /// - Throws: `UsageError`; `CairnError` for a list that cannot be read.
    static func sources(_ args: Arguments) throws -> [[UInt8]] {
        var operands = args.operands
        if let list = args.rawValue("--files-from") {
            operands += try Self.names(in: list, separator: args.flag("--null") ? 0 : 0x0A, what: "--files-from")
        } else if args.flag("--null") {
            throw UsageError("--null needs --files-from")
        }
        guard !operands.isEmpty else { throw UsageError("no PATH to archive") }
        var topLevel: Set<[UInt8]> = []
        for path in operands {
            let last = PathBytes.lastComponent(path)
            if last.isEmpty || last == Array(".".utf8) || last == Array("..".utf8) { continue }
            guard topLevel.insert(last).inserted else {
                throw UsageError("two PATHs would both be stored as '\(String(decoding: last, as: UTF8.self))'")
            }
        }
        return operands
    }

    /// Refuses the upload options without `-o s3://...`, and a directory as `-o`.
    ///
    /// - Throws: `UsageError`; `CairnError` `.alreadyExists` for a directory.
    static func checkOutput(_ output: String, _ args: Arguments, toStore: Bool) throws {
        if !toStore, args.value("--upload-state") != nil { throw UsageError("--upload-state is for -o s3://BUCKET/KEY") }
        if !toStore, args.value(ArchiveOperand.endpointOption) != nil { throw UsageError("--s3-endpoint is for -o s3://BUCKET/KEY") }
        for option in [TransferOptions.uploadConcurrencyOption, TransferOptions.timeoutOption] where !toStore && args.value(option) != nil {
            throw UsageError("\(option) is for -o s3://BUCKET/KEY")
        }
        // Bad values are usage errors before anything is read or sent.
        _ = try TransferOptions.uploadOptions(args)
        if output != "-", !toStore { try ArchiveOperand.refuseDirectoryOutput(output) }
    }

    /// The archiver's configuration the options ask for.
    ///
    /// - Throws: `UsageError` for a bad value; `CairnError` for an `--exclude-from` list that
    ///   cannot be read.
    static func configuration(_ args: Arguments, sources: [[UInt8]]) throws -> Archiver.Configuration {
        var configuration = Archiver.Configuration()
        configuration.sourcePaths = sources
        if let path = args.value("--sign") { configuration.signingKey = try KeyOptions.signingKey(atPath: path) }
        if args.flag("--resume") {
            // An encrypted archive resumes with its own key block (Spec/0004 §6.9): the
            // passphrase options then open it, and no new recipients are given.
            if !args.allValues(EncryptionOptions.recipientOption).isEmpty || !args.allValues(EncryptionOptions.recipientsFileOption).isEmpty
                || args.value(EncryptionOptions.makerKeyOption) != nil
            {
                throw UsageError(
                    "--resume continues an encrypted archive with its own key block: give --identity or the passphrase that opens it, not --recipient, --recipients-file or --maker-key")
            }
        } else {
            if !args.allValues(EncryptionOptions.identityOption).isEmpty {
                throw UsageError("--identity is for --resume of an encrypted archive; --recipient encrypts a new one")
            }
            configuration.encryption = try EncryptionOptions.encryption(args)
        }
        if let name = args.value("--compression") {
            guard let method = CompressionMethod(name: name) else { throw UsageError("unknown compression '\(name)'") }
            configuration.compression = method
        }
        if let name = args.value("--chunking") {
            guard let policy = ChunkingPolicy(name: name) else { throw UsageError("invalid chunking '\(name)'") }
            // The format allows tiny chunks, but each chunk costs about 150 bytes of memory and
            // 88 bytes of archive: below 1 KiB (4 KiB average) that is a resource trap, not a choice.
            guard policy.minimum >= 1024, policy.average >= 4096 else {
                throw UsageError("chunks must be at least 1 KiB (4 KiB on average); got \(policy)")
            }
            configuration.chunking = policy
        }
        if args.flag("--not-compressible") { configuration.isCompressible = false }
        if let version = args.value("--resources-version") { configuration.resourcesVersion = version }
        if let app = args.value("--app-id") { configuration.appIdentifier = app }
        if let estimate = try ByteSize.value("--size-estimate", in: args) { configuration.sizeEstimate = estimate }
        for pair in args.allValues("--meta") {
            guard let eq = pair.firstIndex(of: "=") else { throw UsageError("--meta takes KEY=VALUE") }
            let key = String(pair[..<eq])
            guard !key.hasPrefix(Archiver.reservedMetadataPrefix) else {
                throw UsageError("--meta keys starting '\(Archiver.reservedMetadataPrefix)' are reserved")
            }
            configuration.metadata[key] = String(pair[pair.index(after: eq)...])
        }
        configuration.exclusions = args.allValues("--exclude")
        if let list = args.rawValue("--exclude-from") {
            configuration.exclusions += try Self.names(in: list, separator: 0x0A, what: "--exclude-from").map {
                String(decoding: $0, as: UTF8.self)
            }
        }
        configuration.staysOnOneFileSystem = args.flag("--one-file-system")
        configuration.collectsExtendedAttributes = !args.flag("--no-xattrs")
        configuration.snapshotsSQLiteDatabases = !args.flag("--no-sqlite-snapshot")
        if let threads = args.value("-T", "--threads") {
            guard let count = Int(threads), count >= 1 else { throw UsageError("-T takes a number of threads, at least 1") }
            configuration.workerCount = count
        }
        if args.flag("-v", "--verbose") {
            configuration.onEntry = { entry in Output.err(entry.path) }
        }
        return configuration
    }

    /// Every input must exist before the archive file is created.
    ///
    /// - Throws: `.notFound` naming the first missing one.
    static func requireExisting(_ sources: [[UInt8]]) throws(CairnError) {
        for path in sources {
            var st = stat()
            let missing = path.withNullTerminated { lstat($0, &st) } != 0
            if missing {
                throw CairnError(.notFound, "no such file or directory", path: String(decoding: path, as: UTF8.self))
            }
        }
    }

    /// The archiver for `-o output`: an upload to an object, a resumed or new file, or standard
    /// output; nil when there is nothing to do (`--resume` of a complete archive or upload).
    static func openTarget(
        _ output: String, _ args: Arguments, toStore: Bool, configuration: inout Archiver.Configuration, sources: [[UInt8]],
        scanned: UInt64?
    ) async throws -> Target? {
        let force = args.flag("-f", "--force")
        if toStore {
            guard
                let upload = try Self.makeObjectStoreSink(
                    output, args, configuration: &configuration, sources: sources, force: force,
                    sizeEstimate: configuration.sizeEstimate ?? scanned, options: try TransferOptions.uploadOptions(args))
            else {
                return nil
            }
            return Target(archiver: try Archiver(sink: upload, configuration: configuration), sink: upload)
        }
        if args.flag("--resume") {
            guard output != "-" else { throw UsageError("--resume needs a file, not -o -") }
            return try await Self.resumeFile(output, args, configuration: configuration, sources: sources, force: force)
        }
        let fresh: any ArchiveSink =
            output == "-" ? StandardOutputSink() : try Self.makeFileSink(output, force: force, startingOver: force)
        return Target(archiver: try Archiver(sink: fresh, configuration: configuration), sink: fresh)
    }

    /// `--resume` of a file: the interrupted `output.partial` continued; or started over when it
    /// cannot be (another format with `--force`, nothing committed); or nil when `output` is
    /// already the complete archive of these sources and options.
    static func resumeFile(
        _ output: String, _ args: Arguments, configuration: Archiver.Configuration, sources: [[UInt8]], force: Bool
    ) async throws -> Target? {
        let partial = ArchiveLocation.partialPath(of: output)
        let decryption = try EncryptionOptions.decryption(args)
        if !decryption.isEmpty, !FileManager.default.fileExists(atPath: partial), !FileManager.default.fileExists(atPath: output) {
            throw CairnError(
                .notFound,
                "no interrupted encrypted archive to resume at \(partial): create it with --recipient or --passphrase (without --resume)",
                path: output)
        }
        if FileManager.default.fileExists(atPath: partial) {
            do {
                let resumed = try Archiver(
                    resuming: .file(path: output), configuration: configuration,
                    expecting: Self.expectation(args, configuration: configuration, sources: sources), overwrite: force,
                    decryption: decryption)
                if !args.flag("-q", "--quiet") { Output.err("cairn: resuming \(partial)") }
                return Target(archiver: resumed, sink: nil)
            } catch where error.code == .unsupportedVersion {
                // Another format's partial file: kept unless --force says to start over.
                guard force else {
                    var refusal = error
                    refusal.message += ", or start over with --force"
                    throw refusal
                }
                Output.err("cairn: \(partial) cannot be continued (\(error.message)); starting over (--force)")
            } catch {
                // Different sources or options: refuse, never mix two runs in one archive.
                guard error.code == .notResumable, error.additionalErrors.isEmpty else {
                    guard error.code == .notResumable else { throw error }
                    var refusal = error
                    refusal.message +=
                        "; give the interrupted run's sources and options to --resume, or start over with --force (without --resume)"
                    throw refusal
                }
                Output.err("cairn: \(partial) has nothing committed (\(error.message)); starting over")
            }
        }
        if FileManager.default.fileExists(atPath: partial) {
            let fileSink = try Self.makeFileSink(output, force: force, startingOver: true)
            return Target(archiver: try Archiver(sink: fileSink, configuration: configuration), sink: fileSink)
        }
        if FileManager.default.fileExists(atPath: output) {
            // Complete already, but only "nothing to resume" if it is the archive of these
            // sources and options: the same rule as for a partial one.
            let finished = try await Extractor(at: .file(path: output), decryption: decryption)
            defer { finished.close() }
            let header = finished.header
            let differences = Self.expectation(args, configuration: configuration, sources: sources).differences(from: header)
            guard differences.isEmpty else {
                throw CairnError(
                    .notResumable,
                    "is complete, but not the archive of these sources and options: " + differences.joined(separator: "; ")
                        + "; give the same sources and options to --resume, or replace it with --force (without --resume)",
                    path: output)
            }
            if !args.flag("-q", "--quiet") { Output.out("\(output) is already complete; nothing to resume") }
            return nil
        }
        let fileSink = try Self.makeFileSink(output, force: force, startingOver: force)
        return Target(archiver: try Archiver(sink: fileSink, configuration: configuration), sink: fileSink)
    }

    /// Appends every source and finishes the archive, with a progress bar when asked; on an
    /// error the archive is abandoned and what was kept for `--resume` is said.
    static func append(_ sources: [[UInt8]], to target: Target, output: String, showProgress: Bool) async throws
        -> ExportProperties
    {
        let archiver = target.archiver
        let bar = showProgress ? ProgressBar(progress: archiver.progress, label: "create") : nil
        bar?.start()
        let properties: ExportProperties
        do {
            for path in sources {
                try await archiver.appendItem(atPath: path)
            }
            properties = try await archiver.finish()
        } catch {
            bar?.stop()
            await archiver.abandon()
            if let upload = target.sink as? ObjectStoreSink {
                let refused = (error as? CairnError).map { $0.code == .notResumable || $0.code == .alreadyExists } ?? false
                if !refused, FileManager.default.fileExists(atPath: upload.statePath) {
                    Output.err("cairn: the multipart upload was kept (\(upload.statePath) records it); continue it with --resume")
                }
            } else if output != "-", target.sink == nil || target.sink is FileSink {
                Output.err("cairn: the incomplete archive was left at \(ArchiveLocation.partialPath(of: output)); continue it with --resume")
            }
            throw error
        }
        bar?.stop()
        return properties
    }

    /// Prints the warnings, then the summary (or JSON with `--json`; nothing with `-q`), on
    /// standard error when the archive went to standard output.
    static func printReport(
        _ properties: ExportProperties, _ args: Arguments, output: String, sink: (any ArchiveSink)?, seconds: Double,
        cpuSeconds cpu: Double
    ) {
        for warning in properties.warnings { Output.warning(warning) }
        var text: String?
        if args.flag("--json") {
            var object = Self.json(properties, seconds: seconds, cpuSeconds: cpu)
            if let upload = sink as? ObjectStoreSink {
                object["uploadedBytes"] = upload.uploadedBytes
                object["keptBytes"] = upload.keptBytes
            }
            text = Output.json(object)
        } else if !args.flag("-q", "--quiet") {
            text = Self.summary(properties, seconds: seconds, cpuSeconds: cpu, output: output)
        }
        if let upload = sink as? ObjectStoreSink, !args.flag("-q", "--quiet"), !args.flag("--json") {
            text = (text ?? "") + "\n  upload: \(Output.bytes(upload.uploadedBytes)) sent in parts"
                + (upload.isResumed ? ", \(Output.bytes(upload.keptBytes)) kept from the interrupted upload" : "")
        }
        if let text {
            if output == "-" { Output.err(text) } else { Output.out(text) }
        }
    }

    /// The local state file of an upload to `output` (`s3://BUCKET/KEY`): `--upload-state`, else
    /// `ArchiveLocation.uploadStatePath(of:endpoint:environment:)` (one per endpoint,
    /// bucket and key, in the user's state directory, whatever the working directory).
    ///
    /// - Throws: `.invalidArgument` for a malformed location; `.io` when the state directory
    ///   cannot be created.
    static func uploadStatePath(_ output: String, given: String?, endpoint: String?) throws(CairnError) -> String {
        if let given { return given }
        return try ArchiveLocation.uploadStatePath(
            of: S3Location(parsing: output), endpoint: S3Configuration.endpoint(given: endpoint).url)
    }

    /// The sink for `-o s3://BUCKET/KEY` (`Spec/0003-command-line.md §3.3`): with `--resume`,
    /// the upload recorded in the state file continued, or nil when there is nothing to do (the
    /// recorded upload or an earlier run completed the object); otherwise a new multipart
    /// upload, refused when the object exists or an interrupted upload is recorded, unless
    /// `force`, with parts sized for `sizeEstimate` bytes (`--size-estimate`, else the scan of
    /// the sources).
    static func makeObjectStoreSink(
        _ output: String, _ args: Arguments, configuration: inout Archiver.Configuration, sources: [[UInt8]], force: Bool,
        sizeEstimate: UInt64?, options: ObjectStoreSink.UploadOptions
    ) throws(CairnError) -> ObjectStoreSink? {
        guard case .object(let location, let store) = try ArchiveOperand.location(output, args) else {
            throw CairnError(.invalidArgument, "not an s3://BUCKET/KEY location", path: output)
        }
        let endpoint = args.value(ArchiveOperand.endpointOption)
        let statePath = try uploadStatePath(output, given: args.value("--upload-state"), endpoint: endpoint)
        let quiet = args.flag("-q", "--quiet")
        if args.flag("--resume") {
            switch try ObjectStoreSink.recordedUpload(at: statePath, location: location, configuration: store, options: options) {
            case .complete:
                if !quiet { Output.out("\(output) is already complete; nothing to resume") }
                return nil
            case .objectInTheWay(let difference) where !force:
                throw CairnError(
                    .alreadyExists,
                    "the object at the key is not the interrupted upload's (\(difference)); continuing would replace it: "
                        + "use --resume --force, or remove \(statePath) to give the upload up (it is kept)",
                    path: output)
            case .resumable, .objectInTheWay:
                // An encrypted upload continues with its own key block, opened with --identity or
                // the passphrase (Spec/0004 §6.9); its blocks are sealed with the same keys.
                try Self.adoptRecordedSealing(statePath: statePath, output: output, args, configuration: &configuration)
                // The interrupted run's header: name what differs, and take what is not given.
                if let payload = try MultipartUploadState.load(from: statePath)?.header,
                    let header = try? ArchiveHeader.decode(payload, offset: UInt64(Prelude.length + RecordFraming.headerLength))
                {
                    let expected = Self.expectation(args, configuration: configuration, sources: sources)
                    let differences = expected.differences(from: header)
                    guard differences.isEmpty else {
                        var refusal = CairnError(
                            .notResumable, differences.joined(separator: "; ")
                                + "; give the interrupted run's sources and options to --resume, or start over with --force (without --resume)",
                            path: output)
                        refusal.additionalErrors = []
                        throw refusal
                    }
                    configuration.adopt(header, except: expected)
                }
                let upload = try ObjectStoreSink(
                    resuming: location, configuration: store, overwrite: force, statePath: statePath, options: options)
                if !quiet { Output.err("cairn: resuming the upload to \(output) recorded in \(statePath)") }
                return upload
            case .none:
                if try options.client(for: store).headObject(location) != nil {
                    if !quiet { Output.out("\(output) is already complete; nothing to resume") }
                    return nil
                }
                if !quiet { Output.err("cairn: no interrupted upload to \(output) is recorded in \(statePath); starting a new one") }
            }
        }
        do throws(CairnError) {
            return try ObjectStoreSink(
                location: location, configuration: store, overwrite: force, statePath: statePath, sizeEstimate: sizeEstimate,
                options: options)
        } catch {
            guard error.code == .alreadyExists, error.path == output else { throw error }
            throw CairnError(.alreadyExists, "already exists; use --force to replace it", path: output)
        }
    }

    /// For `--resume` of an upload: the recorded envelope's key block opened with `--identity` or
    /// the passphrase, so the archive is sealed again with its own keys (`Spec/0004 §6.9`).
    ///
    /// - Throws: `.untrusted` for an encrypted upload without an identity or passphrase, an
    ///   identity that does not open its key block, or identities given for a plain upload;
    ///   `.notResumable` for an encrypted upload whose parts an earlier cairn cut at any offset.
    ///   The state file is kept on every refusal.
    static func adoptRecordedSealing(
        statePath: String, output: String, _ args: Arguments, configuration: inout Archiver.Configuration
    ) throws(CairnError) {
        let decryption = try EncryptionOptions.decryption(args)
        guard let state = try MultipartUploadState.load(from: statePath), let payload = state.envelope else {
            guard decryption.isEmpty else {
                throw CairnError(
                    .untrusted, "the interrupted upload is not encrypted, but --identity or a passphrase was given to continue it", path: output)
            }
            return
        }
        guard state.parts.allSatisfy({ $0.plainSHA256 != nil }) else {
            throw CairnError(
                .notResumable,
                "the interrupted upload is an encrypted archive whose parts an earlier cairn cut at any offset, which --resume does not continue: "
                    + "upload it again with its recipients and --force, without --resume (the interrupted upload is then given up)",
                path: output)
        }
        guard !decryption.isEmpty else {
            throw CairnError(
                .untrusted,
                "the interrupted upload is an encrypted archive: give --identity or the passphrase that opens its key block to --resume (\(statePath) is kept)",
                path: output)
        }
        let record = try EnvelopeRecord.decode(payload: payload, offset: UInt64(Prelude.length))
        let opened = try OpenedEnvelope(
            record: record, prefix: EnvelopeRecord.prelude + record.framed(), openKeyBlock: decryption.openKeyBlock)
        configuration.encryption = nil
        configuration.sealing = ArchiveSealing(envelope: record, secrets: opened.secrets)
    }

    /// The sink for `-o output`: an existing `output` is replaced (at the final rename) only with
    /// `force`, an existing `output.partial` is started over only with `startingOver`; each
    /// refusal says which option to use.
    static func makeFileSink(_ output: String, force: Bool, startingOver: Bool) throws(CairnError) -> FileSink {
        do throws(CairnError) {
            return try FileSink(path: output, overwrite: force, replacingPartial: startingOver)
        } catch {
            guard error.code == .alreadyExists else { throw error }
            if error.path == ArchiveLocation.partialPath(of: output) {
                throw CairnError(
                    .alreadyExists, "an interrupted archive is here; use --resume to continue it or --force to start over",
                    path: error.path)
            }
            throw CairnError(.alreadyExists, "already exists; use --force to replace it", path: output)
        }
    }

    /// What `--resume` checks against the interrupted archive: the sources, and each header
    /// option given on this command line (the ones not given are taken from the archive).
    static func expectation(_ args: Arguments, configuration: Archiver.Configuration, sources: [[UInt8]])
        -> Archiver.ResumeExpectation
    {
        var expected = Archiver.ResumeExpectation()
        expected.sourcePaths = sources
        if args.value("--compression") != nil { expected.compression = configuration.compression }
        if args.value("--chunking") != nil { expected.chunking = configuration.chunking }
        if args.flag("--not-compressible") { expected.isCompressible = false }
        if args.value("--size-estimate") != nil { expected.sizeEstimate = configuration.sizeEstimate }
        if args.value("--resources-version") != nil { expected.resourcesVersion = configuration.resourcesVersion }
        if args.value("--app-id") != nil { expected.appIdentifier = configuration.appIdentifier }
        if !args.allValues("--meta").isEmpty { expected.metadata = configuration.metadata }
        // Given selection options must match the archive's; none given means the archive's.
        if !configuration.exclusions.isEmpty || args.flag("--one-file-system") || args.flag("--no-xattrs")
            || args.flag("--no-sqlite-snapshot")
        {
            expected.selection = configuration.selectionOptions
        }
        return expected
    }

    /// The most bytes a `--files-from` or `--exclude-from` list may have.
    static let maximumListBytes = 64 << 20

    /// The non-empty names in the list file `path` (`-` for standard input), split at
    /// `separator` (newline, or NUL for `--null`), as raw bytes; a trailing `\r` is kept.
    ///
    /// - Throws: `.notFound`/`.io` naming the file; `.limitExceeded` past ``maximumListBytes``.
    static func names(in path: [UInt8], separator: UInt8, what: String) throws(CairnError) -> [[UInt8]] {
        let display = String(decoding: path, as: UTF8.self)
        let fd = path == [UInt8(ascii: "-")] ? 0 : path.withNullTerminated { open($0, O_RDONLY | O_CLOEXEC) }
        guard fd >= 0 else {
            let code = errno
            throw Errno(rawValue: code).error(code == ENOENT ? .notFound : .io, "cannot open the \(what) list", path: display)
        }
        defer { if fd != 0 { close(fd) } }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n >= 0 else {
                throw Errno.current.error(.io, "cannot read the \(what) list", path: display)
            }
            if n == 0 { break }
            guard bytes.count + n <= maximumListBytes else {
                throw CairnError(.limitExceeded, "the \(what) list is larger than \(maximumListBytes) bytes", path: display)
            }
            bytes.append(contentsOf: buffer[0..<n])
        }
        return bytes.split(separator: separator, omittingEmptySubsequences: true).map(Array.init)
    }

    /// `"1 entry"`, `"2 entries"`: `count` with the noun that agrees with it.

    static func json(_ p: ExportProperties, seconds: Double, cpuSeconds: Double) -> [String: Any] {
        var object: [String: Any] = [
            "uncompressedBytes": p.uncompressedBytes, "archiveBytes": p.archiveBytes, "version": p.version,
            "entryCount": p.entryCount, "chunkCount": p.chunkCount, "referenceCount": p.referenceCount,
            "uniqueBytes": p.uniqueBytes, "deduplicatedBytes": p.deduplicatedBytes, "wallSeconds": seconds,
            "cpuSeconds": cpuSeconds, "warnings": p.warnings.map(\.description),
        ]
        object["compressedBytes"] = p.compressedBytes.map { $0 as Any } ?? NSNull()
        object["sizeEstimate"] = p.sizeEstimate.map { $0 as Any } ?? NSNull()
        return object
    }

    static func summary(_ p: ExportProperties, seconds: Double, cpuSeconds: Double, output: String) -> String {
        var lines = [
            "created \(output): \(Output.entries(p.entryCount)), \(Output.bytes(p.uncompressedBytes)) of content → \(Output.bytes(p.archiveBytes)) archive",
            "  chunks: \(p.chunkCount) stored, \(p.referenceCount) referenced; dedup saved \(Output.bytes(p.deduplicatedBytes))",
        ]
        if let compressed = p.compressedBytes {
            let ratio = compressed == 0 ? 0 : Double(p.uniqueBytes) / Double(compressed)
            lines.append("  compression: \(Output.bytes(p.uniqueBytes)) unique → \(Output.bytes(compressed)) stored (\(String(format: "%.2f", ratio))×)")
        }
        lines.append(
            "  time: \(String(format: "%.2f", seconds)) s wall, \(String(format: "%.2f", cpuSeconds)) s CPU, \(Output.rate(p.uncompressedBytes, seconds: seconds))")
        return lines.joined(separator: "\n")
    }

}
