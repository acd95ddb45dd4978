import Cairn
import Foundation
import Glibc

/// `cairn cat ARCHIVE [--from-offset N] [--expect-token T]`
enum CatCommand {
    static let usage = """
        usage: cairn cat ARCHIVE [--from-offset N] [--expect-token T] [--trusted-key PUBFILE]... [--identity FILE]...
                   [--connections N] [--timeout S]

        Writes the archive's bytes from offset N (default 0) to the end on standard output: the
        sender's half of resuming a transfer. The receiver runs 'cairn verify --partial COPY' to
        learn N and T, cuts its copy to N bytes (truncate -s N COPY: bytes after the last valid
        commit are not trusted), then appends what this prints; the result is identical to
        ARCHIVE. With --expect-token, refuses (exit 1) unless the receiver's prefix is a prefix of
        ARCHIVE; the token holds N, so --from-offset may be left out (if given, it must agree).
        Offsets are plain byte offsets, so HTTP range requests work the same way: ARCHIVE may be
        an http:// or https:// URL, whose bytes from N are fetched with range requests (the
        token is checked against the record before N first, one small range request), or
        an s3://BUCKET/KEY object, read the same way with signed requests (--s3-endpoint URL or
        AWS_ENDPOINT_URL; AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION); each 8 MiB block
        is fetched in up to --connections range requests at once.
        With --trusted-key, the archive's root signature is checked from its tail (a few small
        reads) before any byte is written. With --identity, an encrypted archive's key block
        must open first (a plain archive is then refused); the bytes sent are still the stored,
        sealed ones, for a receiver that holds the identity too.

        \(TransferOptions.connectionsHelp)
        \(TransferOptions.timeoutHelp)

        \(KeyOptions.trustedKeyHelp)

        \(EncryptionOptions.readingHelp)
        """

    static func run(_ raw: [[UInt8]]) async throws -> ExitStatus {
        let args = try Arguments(
            raw, valued: Set(["--from-offset", "--expect-token", ArchiveOperand.endpointOption, KeyOptions.trustedKeyOption]).union(EncryptionOptions.readingOptions)
                .union(TransferOptions.valued),
            flags: [EncryptionOptions.passphraseFlag])
        let trustedKeys = try KeyOptions.trustedKeys(args)
        let remote = try TransferOptions.remoteReading(args)
        let archive = try CommandLineTool.archiveOperand(args)
        var offset: UInt64?
        if let text = args.value("--from-offset") {
            guard let value = UInt64(text) else { throw UsageError("--from-offset takes a byte offset") }
            offset = value
        }
        var token: ResumeToken?
        if let text = args.value("--expect-token") {
            guard let parsed = ResumeToken(text) else { throw UsageError("--expect-token: malformed token '\(text)'") }
            // The token holds the receiver's length: --from-offset may be left out, and if given
            // must agree.
            if let offset, parsed.length != offset {
                throw UsageError("the token names offset \(parsed.length) but --from-offset is \(offset)")
            }
            offset = parsed.length
            token = parsed
        }
        try Terminal.refuseArchive(on: 1)
        let source = try await ArchiveOperand.location(archive, args).openRandomAccess(remote: remote)
        defer { source.close() }
        // The bytes sent are the archive as stored (sealed blocks and all). Given identities, its
        // key block must open first, as for every reader (a plain archive or one no identity
        // opens is refused, Spec/0003 §14.5); given trusted keys, its signed root must check.
        let decryption = try EncryptionOptions.decryption(args)
        if !trustedKeys.isEmpty || !decryption.isEmpty {
            let inner: any ArchiveSource =
                decryption.isEmpty ? source : try SealedArchiveSource.open(source) { (record) throws(CairnError) in try decryption.openKeyBlock(record) }
            if !trustedKeys.isEmpty { _ = try ArchiveReader.requireTrustedRoot(of: inner, trustedKeys: trustedKeys) }
        }
        try ArchiveTransfer.send(source, from: offset ?? 0, expecting: token, to: FileHandle.standardOutput)
        return .success
    }
}
