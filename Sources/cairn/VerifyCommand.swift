import Cairn
import Foundation

/// `cairn verify ARCHIVE [--json]`
enum VerifyCommand {
    static let usage = """
        usage: cairn verify ARCHIVE [--json]

        Reads the archive front to back (ARCHIVE may be - for standard input) and checks every
        record's CRC-32, every chunk's SHA-256, every commit's chain digest, every file's size
        and digest, the manifest and the footer. Exit status 0 when everything verifies, 1 with
        the offset of the first problem otherwise.
        """

    static func run(_ raw: [[UInt8]]) async throws -> ExitStatus {
        let args = try Arguments(raw, valued: [], flags: ["--json"])
        let archive = try CommandLineTool.archiveOperand(args)
        let started = monotonicSeconds()
        let report = try await Extractor.verifyArchive(atPath: archive)
        let seconds = monotonicSeconds() - started
        if args.flag("--json") {
            Output.out(
                Output.json([
                    "ok": true, "archiveBytes": report.archiveBytes, "entryCount": report.entryCount,
                    "fileCount": report.fileCount, "chunkCount": report.chunkCount, "contentBytes": report.contentBytes,
                    "commitCount": report.commitCount, "wallSeconds": seconds,
                ]))
        } else {
            Output.out(
                "OK \(archive): \(report.entryCount) entries, \(report.chunkCount) chunks, \(Output.bytes(report.contentBytes)) of content verified "
                    + "(\(Output.bytes(report.archiveBytes)) read in \(String(format: "%.2f", seconds)) s, \(Output.rate(report.archiveBytes, seconds: seconds)))")
        }
        return .success
    }
}
