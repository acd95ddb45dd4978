import Cairn
import Foundation

/// `cairn info ARCHIVE [--json]`
enum InfoCommand {
    static let usage = """
        usage: cairn info ARCHIVE [--json] [--trusted-key PUBFILE]... [--identity FILE]... [--connections N] [--timeout S]
               cairn info STATEFILE [--json]
               cairn info s3://BUCKET/KEY --uploads [--upload-state FILE] [--json]

        Prints the header (format, chunking, codec, the creator's metadata) and the totals
        (entries, chunks, content, stored and archive bytes, deduplication savings).

        On an incomplete archive (ARCHIVE.partial left by an interrupted create, a cut copy):
        what is committed so far, verified up to its last valid commit: the verified length,
        the entries and content bytes committed, and that it is not complete.

        ARCHIVE may be an http:// or https:// URL (the server must support range requests: only
        the footer and the manifest are fetched), or an s3://BUCKET/KEY object, read the same way with signed requests (--s3-endpoint URL or
        AWS_ENDPOINT_URL; AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION).

        Says who signed the archive: "signed by key X (verified)" with --trusted-key, "signed by
        key X (not checked: no trusted key given)", or "not signed" (--json: signedBy, the key
        id or null, and signatureVerified).

        An encrypted archive (format 3.0) with --identity: its header and totals, and what its
        envelope shows: block size, recipients (how many, of which kinds), archive id, inner
        size (--json: encrypted, innerFormatVersion, encryption). Without --identity: only that
        envelope, and that the contents need an identity (exit 0; --json: contentsReadable false).

        On the state file of an interrupted upload to s3:// (create -o s3://; --upload-state, or
        the default one --uploads finds for the object): the object, the upload id, the parts
        the store acknowledged and their bytes, the command that continues the upload, and the
        one that gives it up (cairn abort). --json: complete (false) and upload.

        \(TransferOptions.connectionsHelp)
        \(TransferOptions.timeoutHelp)

        \(KeyOptions.trustedKeyHelp)

        \(EncryptionOptions.readingHelp)
        """

    static func run(_ raw: [[UInt8]]) async throws -> ExitStatus {
        let args = try Arguments(raw, valued: Set([ArchiveOperand.endpointOption, KeyOptions.trustedKeyOption, "--upload-state"]).union(EncryptionOptions.readingOptions).union(TransferOptions.valued), flags: [EncryptionOptions.passphraseFlag, "--json", "-q", "--quiet", "--uploads"])
        let trustedKeys = try KeyOptions.trustedKeys(args)
        let archive = try CommandLineTool.archiveOperand(args)
        if let report = try Self.recordedUpload(archive, args) {
            report.print(json: args.flag("--json"))
            return .success
        }
        let decryption = try EncryptionOptions.decryption(args)
        let remote = try TransferOptions.remoteReading(args)
        let extractor: Extractor
        do {
            extractor = try await ArchiveOperand.open(archive, args, remote: remote)
        } catch {
            // Encrypted, read without an identity: what the envelope shows (`Spec/0004 §6.1`).
            // Not with --trusted-key: a signature inside cannot be checked, so that is refused.
            if error.code == .untrusted, decryption.isEmpty, trustedKeys.isEmpty,
                let envelope = try? await Self.envelope(archive, args)
            {
                Self.printEnvelopeOnly(envelope, archive: archive, json: args.flag("--json"))
                return .success
            }
            // Incomplete (no valid footer): say what is committed, if it is a Cairn archive at all.
            // A corrupt archive fails here as it does for every other reading command.
            // An encrypted copy cut inside a block ends in a torn block that fails as the last one.
            guard error.code == .truncated || (!decryption.isEmpty && error.code == .checksumMismatch),
                ArchiveLocation.kind(of: archive) == .file,
                let prefix = try? await Extractor.verifyPrefix(at: .file(path: archive), trustedKeys: trustedKeys, decryption: decryption),
                !prefix.isComplete, prefix.verifiedLength > 0 || archive.hasSuffix(ArchiveLocation.partialSuffix)
            else { throw error }
            Self.printIncomplete(prefix, archive: archive, json: args.flag("--json"), encrypted: !decryption.isEmpty)
            // Bytes after the last commit that are damaged rather than missing are an error.
            if let reason = prefix.stopReason, reason.code != .truncated { throw reason }
            return .success
        }
        defer { extractor.close() }
        let envelope = decryption.isEmpty ? nil : try await Self.envelope(archive, args)
        let h = extractor.header
        let s = extractor.summary
        var object: [String: Any] = [
            "formatVersion": extractor.formatVersion.description, "chunking": h.chunking.description, "compression": h.compression.description,
            "compressible": h.isCompressible, "resourcesVersion": h.resourcesVersion, "sourcePlatform": h.sourcePlatform,
            "appIdentifier": h.appIdentifier, "metadata": h.metadata, "archiveBytes": s.archiveBytes,
            "entryCount": s.entryCount, "fileCount": s.fileCount, "chunkCount": s.chunkCount,
            "referenceCount": s.referenceCount, "uncompressedBytes": s.contentBytes, "uniqueBytes": s.uniqueBytes,
            "deduplicatedBytes": s.contentBytes &- s.uniqueBytes, "complete": true,
        ]
        let signer = try extractor.signingKeyID()
        object["signedBy"] = signer.map { $0.description as Any } ?? NSNull()
        object["signatureVerified"] = signer != nil && !trustedKeys.isEmpty
        object["sizeEstimate"] = h.sizeEstimate.map { $0 as Any } ?? NSNull()
        object["compressedBytes"] = h.isCompressible ? s.storedBytes as Any : NSNull()
        object["encrypted"] = envelope != nil
        object["encryption"] = envelope.map { Self.json($0) as Any } ?? NSNull()
        if let envelope {
            // The outer file's format and size; `innerFormatVersion` is the sealed 2.x archive's.
            object["formatVersion"] = envelope.formatVersion.description
            object["innerFormatVersion"] = extractor.formatVersion.description
            object["archiveBytes"] = envelope.outerSize
        }
        if args.flag("--json") {
            Output.out(Output.json(object))
            return .success
        }
        var lines = [
            "archive:           \(CairnError.hidingPassword(in: archive)) (\(Output.bytes(envelope?.outerSize ?? s.archiveBytes)))",
            "format:            Cairn \(envelope.map { "\($0.formatVersion) (encrypted; inner archive \(extractor.formatVersion))" } ?? extractor.formatVersion.description)",
            "chunking:          \(h.chunking)",
            "compression:       \(h.compression)\(h.isCompressible ? "" : " (not compressible)")",
            "resources version: \(h.resourcesVersion.isEmpty ? "-" : h.resourcesVersion)",
            "source platform:   \(h.sourcePlatform.isEmpty ? "-" : h.sourcePlatform)",
            "app identifier:    \(h.appIdentifier.isEmpty ? "-" : h.appIdentifier)",
            "size estimate:     \(h.sizeEstimate.map { Output.bytes($0) } ?? "-")",
        ]
        for (key, value) in h.metadata.sorted(by: { $0.key < $1.key }) { lines.append("metadata:          \(key)=\(value)") }
        lines += [
            "entries:           \(s.entryCount) (\(Output.count(s.fileCount, "file")))",
            "content:           \(Output.bytes(s.contentBytes)) (\(s.contentBytes) bytes)",
            "chunks:            \(s.chunkCount) stored, \(s.referenceCount) referenced",
            "unique content:    \(Output.bytes(s.uniqueBytes)); dedup saved \(Output.bytes(s.contentBytes &- s.uniqueBytes))",
            "stored chunks:     \(Output.bytes(s.storedBytes))",
            "signature:         "
                + (signer.map { "signed by key \($0)" + (trustedKeys.isEmpty ? " (not checked: no trusted key given)" : " (verified)") }
                    ?? "not signed"),
        ]
        if let envelope { lines.insert(contentsOf: Self.envelopeLines(envelope), at: 2) }
        Output.out(lines.joined(separator: "\n"))
        return .success
    }

    /// The upload state `info` describes instead of an archive (`Spec/0003-command-line.md §6`):
    /// with `--uploads`, the one recorded for the object `archive` (`--upload-state`, else the
    /// default file); without, `archive` itself when it is a local upload state file; else nil.
    ///
    /// - Throws: `UsageError` for `--uploads` without an `s3://` operand, or `--upload-state`
    ///   without `--uploads`; `CairnError` `.notFound` when no upload is recorded for the
    ///   object, `.invalidArgument` when the file records another one, `.corrupted`.
    static func recordedUpload(_ archive: String, _ args: Arguments) throws -> RecordedUploadReport? {
        guard args.flag("--uploads") else {
            if args.value("--upload-state") != nil { throw UsageError("--upload-state is for --uploads") }
            guard ArchiveLocation.kind(of: archive) == .file, RecordedUploadReport.isStateFile(archive) else { return nil }
            // A file named as a state file that does not parse says why; any other is read as an
            // archive, whose reader says what it is not.
            let named = archive.hasSuffix(".upload")
            guard let state = named ? try MultipartUploadState.load(from: archive) : try? MultipartUploadState.load(from: archive) else {
                return nil
            }
            return RecordedUploadReport(state: state, statePath: archive)
        }
        guard ArchiveLocation.kind(of: archive) == .object else { throw UsageError("--uploads takes an s3://BUCKET/KEY object") }
        let location = try S3Location(parsing: archive)
        let statePath = try CreateCommand.uploadStatePath(
            archive, given: args.value("--upload-state"), endpoint: args.value(ArchiveOperand.endpointOption))
        guard let state = try MultipartUploadState.load(from: statePath) else {
            throw CairnError(.notFound, "no interrupted upload to \(archive) is recorded here", path: statePath)
        }
        guard state.bucket == location.bucket, state.key == location.key else {
            throw CairnError(.invalidArgument, "records an upload to s3://\(state.bucket)/\(state.key), not to \(archive)", path: statePath)
        }
        return RecordedUploadReport(state: state, statePath: statePath)
    }

    /// The envelope of the encrypted archive `archive` (`Spec/0004-trusted-archives.md §6.1`),
    /// read without opening its key block.
    static func envelope(_ archive: String, _ args: Arguments) async throws(CairnError) -> EnvelopeSummary {
        let source = try await ArchiveOperand.location(archive, args).openRandomAccess()
        defer { source.close() }
        return try await DedicatedThread.run { () throws(CairnError) in try EnvelopeSummary.read(source) }
    }

    /// `encryption:` and `inner archive:` lines, shared by both outputs.
    static func envelopeLines(_ envelope: EnvelopeSummary) -> [String] {
        [
            "encryption:        XChaCha20-Poly1305, blocks of \(Output.bytes(UInt64(envelope.blockSize))) (\(Output.count(Int(clamping: envelope.blockCount), "block")))",
            "recipients:        \(envelope.recipientKinds.count) (\(envelope.recipientsDescription))",
            "archive id:        \(Self.hex(envelope.archiveID))",
            "inner archive:     \(Output.bytes(envelope.innerSize)) (\(envelope.innerSize) bytes)",
        ]
    }

    /// `encryption` in `--json`.
    static func json(_ envelope: EnvelopeSummary) -> [String: Any] {
        [
            "formatVersion": envelope.formatVersion.description, "blockSize": envelope.blockSize, "blockCount": envelope.blockCount,
            "archiveID": Self.hex(envelope.archiveID), "recipientCount": envelope.recipientKinds.count,
            "recipientKinds": envelope.recipientKinds, "innerBytes": envelope.innerSize,
        ]
    }

    /// `cairn info` of an encrypted archive without `--identity`: what anyone who can read it sees
    /// (`Spec/0003-command-line.md`, `Spec/0004 §6.1`), and that the contents need an identity.
    static func printEnvelopeOnly(_ envelope: EnvelopeSummary, archive: String, json: Bool) {
        if json {
            let object: [String: Any] = [
                "formatVersion": envelope.formatVersion.description, "encrypted": true, "contentsReadable": false,
                "archiveBytes": envelope.outerSize, "encryption": Self.json(envelope),
            ]
            Output.out(Output.json(object))
            return
        }
        var lines = [
            "archive:           \(CairnError.hidingPassword(in: archive)) (\(Output.bytes(envelope.outerSize)))",
            "format:            Cairn \(envelope.formatVersion) (encrypted)",
        ]
        lines += Self.envelopeLines(envelope)
        lines.append("contents:          encrypted: give --identity FILE (or --passphrase) to read them; the envelope is not authenticated without one")
        Output.out(lines.joined(separator: "\n"))
    }

    private static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    /// What an incomplete archive has committed (`Spec/0003-command-line.md §6`), from
    /// `Extractor.verifyPrefix(at:trustedKeys:decryption:)`; for an `encrypted` one its lengths
    /// are the inner archive's (`Spec/0004-trusted-archives.md §6.9`), and say so.
    static func printIncomplete(_ prefix: PrefixVerification, archive: String, json: Bool, encrypted: Bool = false) {
        if json {
            var object: [String: Any] = [
                "complete": false, "verifiedLength": prefix.verifiedLength, "fileBytes": prefix.fileBytes,
                "entryCount": prefix.entryCount, "uncompressedBytes": prefix.contentBytes,
                "resumeToken": prefix.resumeToken.description,
            ]
            object["stopReason"] = prefix.stopReason.map { $0.description as Any } ?? NSNull()
            object["encrypted"] = encrypted
            Output.out(Output.json(object))
            return
        }
        var lines = [
            "archive:           \(archive) (\(Output.bytes(prefix.fileBytes))\(encrypted ? " inside its sealed blocks; lengths below are inner offsets" : ""))",
            "complete:          no (no valid footer)",
            "verified length:   \(prefix.verifiedLength) bytes, up to the last valid commit",
            "committed:         \(Output.entries(prefix.entryCount)), \(Output.bytes(prefix.contentBytes)) of content (\(prefix.contentBytes) bytes)",
            "after last commit: \(prefix.fileBytes - min(prefix.fileBytes, prefix.verifiedLength)) bytes, not verified",
        ]
        if let reason = prefix.stopReason { lines.append("stopped at:        \(reason.description)") }
        if archive.hasSuffix(ArchiveLocation.partialSuffix) {
            let sources = prefix.header.flatMap(Self.recordedSources) ?? "PATH..."
            lines.append("continue it with:  cairn create --resume -o \(Shell.quoted(Array(archive.dropLast(ArchiveLocation.partialSuffix.count).utf8))) \(sources)")
        }
        Output.out(lines.joined(separator: "\n"))
    }

    /// The sources an interrupted run recorded in its header (`cairn.sources`, escaped as `list`
    /// prints names, one a line), shell-quoted and joined by spaces; nil when there are none or
    /// only their digest.
    static func recordedSources(_ header: ArchiveHeader) -> String? {
        guard let value = header.metadata[Archiver.sourcesMetadataKey], !value.hasPrefix("sha256:") else { return nil }
        let paths = value.split(separator: "\n", omittingEmptySubsequences: false).map { PathBytes.unescaped(String($0)) }
        guard !paths.isEmpty, paths.allSatisfy({ $0 != nil }) else { return nil }
        return paths.compactMap { $0.map(Shell.quoted) }.joined(separator: " ")
    }
}
