import Cairn
import Foundation

/// `cairn verify ARCHIVE [--json]`, and `cairn verify --minisig FILE -p PUBFILE [-x SIGFILE]`
enum VerifyCommand {
    static let usage = """
        usage: cairn verify ARCHIVE [--partial] [--json] [--trusted-key PUBFILE]... [--identity FILE]...
               cairn verify --minisig FILE -p PUBFILE [-x SIGFILE] [-q]

        Reads the archive front to back (ARCHIVE may be - for standard input) and checks every
        record's CRC-32, every chunk's SHA-256, every commit's chain digest, every file's size
        and digest, the manifest and the footer. Exit status 0 when everything verifies, 1 with
        the offset of the first problem otherwise. ARCHIVE may be an http:// or https:// URL:
        it is read with one GET, front to back (no range support needed), or an s3://BUCKET/KEY object, read the same way with signed requests (--s3-endpoint URL or
        AWS_ENDPOINT_URL; AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION).

        --partial   for a copy that may be cut off (an interrupted transfer): verify as much as
                    is valid and print the verified length (bytes, up to the end of the last
                    valid commit) and a resume token; exit 0 whenever the header is readable.
                    Give both to the sender: cairn cat ARCHIVE --from-offset N --expect-token T
                    With --trusted-key, the verified length ends at the last commit a verified
                    signature covers. With --identity (or the passphrase), an encrypted copy's
                    whole sealed blocks are opened as a partial archive's (Spec/0004 §6.9) and
                    the lengths are those of the archive inside them; a block that fails
                    authentication ends the verified prefix

        \(KeyOptions.trustedKeyHelp)

        \(EncryptionOptions.readingHelp)

        --minisig   check FILE's detached minisign signature (FILE.minisig, or -x SIGFILE) as
                    minisign -V does, instead of the archive's own checks, and print its trusted
                    comment (Spec/0004 §2.4). -p PUBFILE: a minisign public key file or a file
                    of keys (repeatable). Exit 1 when no given key made it (naming the key ids)
                    or when it does not verify.
        """

    static func run(_ raw: [[UInt8]]) async throws -> ExitStatus {
        let args = try Arguments(
            raw, valued: Set([ArchiveOperand.endpointOption, "-p", "-x", KeyOptions.trustedKeyOption]).union(EncryptionOptions.readingOptions),
            flags: [EncryptionOptions.passphraseFlag, "--json", "--partial", "-q", "--quiet", "--minisig"])
        let archive = try CommandLineTool.archiveOperand(args)
        if args.flag("--minisig") { return try minisig(archive, args) }
        if args.value("-p") != nil || args.value("-x") != nil { throw UsageError("-p and -x go with --minisig") }
        if archive == "-" { try Terminal.refuseArchive(on: 0) }
        let trustedKeys = try KeyOptions.trustedKeys(args)
        let decryption = try EncryptionOptions.decryption(args)
        if args.flag("--partial") {
            guard ArchiveLocation.kind(of: archive) == .file else {
                throw UsageError("--partial reads a local copy; 'cairn verify URL' checks the archive at a URL, 'cairn fetch' downloads it")
            }
            return try await partial(archive, json: args.flag("--json"), trustedKeys: trustedKeys, decryption: decryption)
        }
        let started = monotonicSeconds()
        let report =
            archive == "-"
            ? try await Extractor.verify(
                decryption.open(SequentialArchiveBytes(descriptor: .standardInput, finish: {}, cancel: {}), name: "<stdin>"),
                path: "<stdin>", trustedKeys: trustedKeys, keying: nil)
            : try await Extractor.verifyArchive(at: ArchiveOperand.location(archive, args), trustedKeys: trustedKeys, decryption: decryption)
        let seconds = monotonicSeconds() - started
        if args.flag("--json") {
            Output.out(
                Output.json([
                    "ok": true, "archiveBytes": report.archiveBytes, "entryCount": report.entryCount,
                    "fileCount": report.fileCount, "chunkCount": report.chunkCount, "contentBytes": report.contentBytes,
                    "commitCount": report.commitCount, "wallSeconds": seconds,
                ]))
        } else if !args.flag("-q", "--quiet") {
            Output.out(
                "OK \(archive == "-" ? "<stdin>" : CairnError.hidingPassword(in: archive)): \(Output.entries(report.entryCount)), \(Output.count(report.chunkCount, "chunk")), \(Output.bytes(report.contentBytes)) of content verified "
                    + "(\(Output.bytes(report.archiveBytes)) read in \(String(format: "%.2f", seconds)) s, \(Output.rate(report.archiveBytes, seconds: seconds)))")
        }
        return .success
    }

    /// `--minisig`: the detached signature of a local file, checked as `minisign -V` does.
    static func minisig(_ file: String, _ args: Arguments) throws -> ExitStatus {
        guard args.operands.count == 1, ArchiveLocation.kind(of: file) == .file, file != "-" else {
            throw UsageError("--minisig checks one local FILE")
        }
        guard !args.flag("--partial", "--json") else { throw UsageError("--minisig takes neither --partial nor --json") }
        let keyFiles = args.allValues("-p")
        guard !keyFiles.isEmpty else { throw UsageError("--minisig needs -p PUBFILE") }
        let keys = try KeyOptions.trustedKeys(atPaths: keyFiles)
        let signature = try MinisignSignature.verify(fileAt: file, signatureFile: args.value("-x"), trustedKeys: keys)
        if !args.flag("-q", "--quiet") {
            Output.out("Signature and comment signature verified: \(file) signed by key \(signature.keyID)")
            Output.out("Trusted comment: \(signature.trustedComment)")
        }
        return .success
    }

    /// The outer offset of the sealed block of the encrypted file `archive` that holds inner
    /// offset `inner` (`Spec/0004-trusted-archives.md §6.3`), from its envelope record.
    ///
    /// - Throws: `CairnError` naming the file when it cannot be read or its envelope is bad.
    static func outerStart(_ archive: String, holding inner: UInt64) async throws(CairnError) -> UInt64 {
        let source = try await ArchiveLocation.file(path: archive).openRandomAccess()
        defer { source.close() }
        let (record, prefix) = try OpenedEnvelope.readRecord(from: source)
        let layout = SealedBlockLayout(dataStart: UInt64(prefix.count), blockSize: UInt64(record.blockSize), innerSize: inner)
        return layout.outerStart(ofBlockHolding: inner)
    }

    static func partial(_ archive: String, json: Bool, trustedKeys: [PublicKey], decryption: ArchiveDecryption) async throws -> ExitStatus {
        if archive == "-", !decryption.isEmpty {
            throw UsageError("--partial with --identity reads a local copy (its sealed blocks are read at random), not -")
        }
        let result =
            archive == "-"
            ? try await Extractor.verifyPrefix(reading: FileDescriptor.standardInput, path: archive, trustedKeys: trustedKeys, keying: nil)
            : try await Extractor.verifyPrefix(at: .file(path: archive), trustedKeys: trustedKeys, decryption: decryption)
        // An encrypted copy's lengths are inner offsets: the copy itself is cut at the start of
        // the sealed block holding the verified length, and the rest sent from there as stored.
        let outerCut = decryption.isEmpty ? nil : try await Self.outerStart(archive, holding: result.verifiedLength)
        if json {
            var object: [String: Any] = [
                "verifiedLength": result.verifiedLength, "resumeToken": result.resumeToken.description,
                "complete": result.isComplete, "fileBytes": result.fileBytes, "entryCount": result.entryCount,
                "contentBytes": result.contentBytes,
            ]
            object["stopReason"] = result.stopReason.map { $0.description as Any } ?? NSNull()
            if let cut = outerCut { object["outerResumeOffset"] = cut }
            Output.out(Output.json(object))
        } else {
            Output.out("verified length: \(result.verifiedLength)")
            // The token names inner offsets, which cat --expect-token cannot check against the
            // stored bytes: an encrypted copy gets the outer offset to cut at instead (below).
            if decryption.isEmpty { Output.out("resume token: \(result.resumeToken)") }
            Output.out(
                !decryption.isEmpty
                    ? (result.isComplete
                        ? "complete: the archive inside the sealed blocks verifies to its footer (\(result.fileBytes) bytes)"
                        : "\(result.stopReason.map { $0.code != .truncated } == true ? "damaged" : "incomplete"): \(result.fileBytes - result.verifiedLength) of the \(result.fileBytes) bytes of the archive inside the sealed blocks are after the last valid commit (lengths are inner offsets, Spec/0004 §6.9)")
                    : result.isComplete
                    ? "complete: the archive verifies to its footer (\(result.fileBytes) bytes)"
                    : result.stopReason.map { $0.code != .truncated } == true
                        ? "damaged: the \(result.fileBytes - result.verifiedLength) of \(result.fileBytes) bytes after the last valid commit do not verify (not merely missing); cut the copy to \(result.verifiedLength) bytes and ask the sender for the rest from offset \(result.verifiedLength)"
                        : "incomplete: \(result.fileBytes - result.verifiedLength) of \(result.fileBytes) bytes are after the last valid commit; ask the sender for the rest from offset \(result.verifiedLength)")
            if let outerCut, !result.isComplete {
                Output.out(
                    "to resume this encrypted copy, cut it to \(outerCut) bytes (the start of the sealed block holding inner offset \(result.verifiedLength)) "
                        + "and ask the sender for the rest as stored: cairn cat ARCHIVE --from-offset \(outerCut)")
            }
            if let reason = result.stopReason { Output.err("cairn: stopped at: \(reason.description)") }
        }
        return .success
    }
}
