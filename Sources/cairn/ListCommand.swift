import Cairn
import Foundation

/// `cairn list ARCHIVE [--long] [--json]`
enum ListCommand {
    static let usage = """
        usage: cairn list ARCHIVE [--long] [--json] [--trusted-key PUBFILE]... [--identity FILE]... [--connections N] [--timeout S]

        Prints one line per entry: its path, with the bytes of control characters (C0, DEL, C1)
        and bytes that are not UTF-8 escaped as \\xHH and backslashes doubled (reversible).
        --long adds kind, mode, size and mtime; --json prints a JSON array with one object per
        entry and line. ARCHIVE may be an
        http:// or https:// URL (the server must support range requests: the footer and the
        manifest are fetched, and for --json the packs holding files), or an s3://BUCKET/KEY object, read the same way with signed requests (--s3-endpoint URL or
        AWS_ENDPOINT_URL; AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION). A large manifest
        is fetched in up to --connections range requests at once.

        \(TransferOptions.connectionsHelp)
        \(TransferOptions.timeoutHelp)

        \(KeyOptions.trustedKeyHelp)

        \(EncryptionOptions.readingHelp)
        """

    static func run(_ raw: [[UInt8]]) async throws -> ExitStatus {
        let args = try Arguments(raw, valued: Set([ArchiveOperand.endpointOption, KeyOptions.trustedKeyOption]).union(EncryptionOptions.readingOptions).union(TransferOptions.valued), flags: [EncryptionOptions.passphraseFlag, "--json", "-l", "--long", "-q", "--quiet"])
        let archive = try CommandLineTool.archiveOperand(args)
        let extractor = try await ArchiveOperand.open(archive, args, remote: TransferOptions.remoteReading(args))
        defer { extractor.close() }
        if args.flag("--json") {
            var lines = ["["]
            let entries = try extractor.entriesWithContentDigests()
            for (i, entry) in entries.enumerated() {
                let comma = i + 1 < entries.count ? "," : ""
                lines.append(Output.json(Self.json(entry)) + comma)
            }
            lines.append("]")
            Output.out(lines.joined(separator: "\n"))
        } else if args.flag("-l", "--long") {
            Output.out(extractor.entries.map(Self.long).joined(separator: "\n"))
        } else {
            Output.out(extractor.entries.map(\.path).joined(separator: "\n"))
        }
        return .success
    }

    static func json(_ entry: ArchiveEntry) -> [String: Any] {
        var object: [String: Any] = [
            "path": entry.path, "kind": entry.kind.description, "mode": entry.permissions,
            "modeOctal": String(entry.permissions, radix: 8), "mtimeSeconds": entry.modificationTime.seconds,
            "mtimeNanoseconds": entry.modificationTime.nanoseconds,
            "size": entry.size, "uid": entry.userID, "gid": entry.groupID,
        ]
        if entry.kind == .symlink || entry.kind == .hardLink { object["target"] = entry.linkTargetDisplay }
        if let device = entry.device {
            object["deviceMajor"] = device.major
            object["deviceMinor"] = device.minor
        }
        if let digest = entry.contentDigest {
            object["contentDigest"] = digest.hexString
            object["chunkCount"] = entry.chunkCount
        }
        if !entry.extendedAttributes.isEmpty {
            object["xattrs"] = entry.extendedAttributes.map { attribute in
                ["name": PathBytes.escaped(attribute.name), "value": Data(attribute.value).base64EncodedString()]
            }
        }
        return object
    }

    static func long(_ entry: ArchiveEntry) -> String {
        let kind: String
        switch entry.kind {
        case .directory: kind = "d"
        case .symlink: kind = "l"
        case .hardLink: kind = "h"
        case .fifo: kind = "p"
        case .characterDevice: kind = "c"
        case .blockDevice: kind = "b"
        default: kind = "-"
        }
        let mode = String(entry.permissions, radix: 8)
        let padded = String(repeating: "0", count: max(0, 4 - mode.count)) + mode
        let size = String(entry.size)
        // Whole seconds, truncated as `ls` does (floor: 0.9 s before 1970 shows 23:59:59).
        let seconds = Double(entry.modificationTime.seconds)
        let date = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: seconds))
        var line = "\(kind) \(padded) \(String(repeating: " ", count: max(0, 12 - size.count)))\(size) \(date) \(entry.path)"
        if entry.kind == .symlink { line += " -> \(entry.linkTargetDisplay)" }
        if entry.kind == .hardLink { line += " link to \(entry.linkTargetDisplay)" }
        if let device = entry.device { line += " (device \(device.major), \(device.minor))" }
        return line
    }
}
