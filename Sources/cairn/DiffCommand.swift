import Cairn
import Foundation

/// `cairn diff ARCHIVE DIR [--json]`
enum DiffCommand {
    static let usage = """
        usage: cairn diff ARCHIVE DIR [--json] [--trusted-key PUBFILE]... [--identity FILE]... [--connections N] [--timeout S]

        Compares the archive's entries (ARCHIVE: a file, an http(s):// URL or s3://BUCKET/KEY,
        read through range requests) with the tree at DIR (entry paths are taken relative to
        DIR, as 'cairn extract ARCHIVE -C DIR' writes them) without extracting anything. File
        contents are compared by chunking each local file as the archive did and comparing
        content digests. Symlinks are never followed. One line per differing path:

          M PATH: ASPECT (DETAIL)[; ASPECT (DETAIL)...]   in both, but different; ASPECT is
                                                          type, content, mode, mtime or link target
          - PATH                                          in the archive, missing in DIR
          + PATH                                          in DIR, not in the archive (a directory
                                                          once, not what is below it)

        Exit status 0 when nothing differs, 1 when something does (or on an error).

        options:
          --json        a JSON array, one object per difference: path, change (modified,
                        missing, extra), aspects (array of strings), details
          -q, --quiet   print nothing; only the exit status tells
          --s3-endpoint URL   the object store of an s3:// ARCHIVE (default: AWS_ENDPOINT_URL)

        \(TransferOptions.connectionsHelp)
        \(TransferOptions.timeoutHelp)

        \(KeyOptions.trustedKeyHelp)

        \(EncryptionOptions.readingHelp)
        """

    static func run(_ raw: [[UInt8]]) async throws -> ExitStatus {
        let args = try Arguments(
            raw, valued: Set([KeyOptions.trustedKeyOption, ArchiveOperand.endpointOption]).union(EncryptionOptions.readingOptions).union(TransferOptions.valued),
            flags: [EncryptionOptions.passphraseFlag, "--json", "-q", "--quiet"])
        guard args.operands.count == 2 else { throw UsageError("diff takes ARCHIVE and DIR") }
        let archive = String(decoding: args.operands[0], as: UTF8.self)
        guard archive != "-" else { throw UsageError("diff needs a seekable ARCHIVE, not -") }
        // An encrypted archive's entries are compared with its keyed chunker and ids, which
        // `keying` carries from the key block (`Spec/0004 §6.6–§6.7`).
        // A URL or s3:// object is read through range requests, as list and extract read it.
        let extractor = try await ArchiveOperand.open(archive, args, remote: TransferOptions.remoteReading(args))
        defer { extractor.close() }
        let differences = try ArchiveDiff.compare(
            entries: try extractor.entriesWithContentDigests(), chunking: extractor.header.chunking, keying: extractor.keying,
            with: args.operands[1])
        if args.flag("--json") {
            let objects = differences.map { difference -> String in
                Output.json([
                    "path": PathBytes.escaped(difference.path), "change": difference.change.rawValue,
                    "aspects": difference.aspects.map(\.rawValue), "details": difference.details,
                ])
            }
            Output.out(objects.isEmpty ? "[]" : "[\n" + objects.joined(separator: ",\n") + "\n]")
        } else if !args.flag("-q", "--quiet") {
            for difference in differences { Output.out(Self.line(difference)) }
        }
        return differences.isEmpty ? .success : .failure
    }

    /// One difference as a line: `M path: mode (0644 in the archive, 0600 here)`, `- path`,
    /// `+ path`; paths escaped as `cairn list` prints them.
    static func line(_ difference: TreeDifference) -> String {
        let path = PathBytes.escaped(difference.path)
        switch difference.change {
        case .missing: return "- \(path)"
        case .extra: return "+ \(path)"
        case .modified:
            let parts = zip(difference.aspects, difference.details).map { "\($0.rawValue) (\($1))" }
            return "M \(path): " + parts.joined(separator: "; ")
        }
    }
}
