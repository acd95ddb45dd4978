import Cairn
import Foundation

/// `cairn`: create, list, inspect, verify and extract Cairn archives.
enum CommandLineTool {
    static let usage = """
        usage: cairn <command> [options]

        commands:
          create   -o ARCHIVE [options] PATH...   archive files and directories (--resume)
          extract  ARCHIVE [-C DEST] [PATH...]    extract all or some entries, all-or-nothing
          list     ARCHIVE [--long] [--json]      one line per entry
          info     ARCHIVE [--json]               header metadata and totals (or an upload's
                                                  state: info s3://BUCKET/KEY --uploads)
          verify   ARCHIVE [--partial] [--json]   check every byte against its checksum
          cat      ARCHIVE [--from-offset N] [--expect-token T]
                                                  send the rest of an archive (resume a transfer)
          diff     ARCHIVE DIR [--json]           what differs between an archive and a tree
          fetch    URL -o FILE [--seed ARCHIVE]...
                                                  download an archive, verified, resuming by
                                                  itself, only what the seeds lack
          verify   --minisig FILE -p PUBFILE [-x SIGFILE]
                                                  check a detached minisign signature
          sign     -s SECFILE FILE                write FILE.minisig, as minisign -S does
          key      generate -p PUBFILE -s SECFILE [-W] [-f]
                                                  a minisign key pair (Spec/0004 §2)
          abort    s3://BUCKET/KEY                give up an interrupted upload (its parts dropped)
          demo     [--size-mib N] [--keep DIR]    run create/list/verify/extract on sample data

        ARCHIVE may be - for standard input (verify, extract) or output (create), an
        http:// or https:// URL (list, info, verify, extract, cat, fetch; Spec/0003 §1.1), or
        an s3://BUCKET/KEY object (those, and create -o; --s3-endpoint or AWS_ENDPOINT_URL;
        Spec/0003 §1.2).
        Run 'cairn <command> --help' for a command's options.
        Exit status: 0 success, 1 failure (diff: differences found), 2 usage error, 3 completed
        with warnings, 130/143 interrupted by SIGINT/SIGTERM.
        """

    static func run(_ arguments: [[UInt8]]) async -> ExitStatus {
        guard let first = arguments.first else {
            Output.err(usage)
            return .usage
        }
        let command = String(decoding: first, as: UTF8.self)
        let rest = Array(arguments.dropFirst())
        let handler: (@Sendable ([[UInt8]]) async throws -> ExitStatus)?
        let help: String
        switch command {
        case "create": (handler, help) = (CreateCommand.run, CreateCommand.usage)
        case "extract": (handler, help) = (ExtractCommand.run, ExtractCommand.usage)
        case "list": (handler, help) = (ListCommand.run, ListCommand.usage)
        case "info": (handler, help) = (InfoCommand.run, InfoCommand.usage)
        case "verify": (handler, help) = (VerifyCommand.run, VerifyCommand.usage)
        case "demo": (handler, help) = (DemoCommand.run, DemoCommand.usage)
        case "cat": (handler, help) = (CatCommand.run, CatCommand.usage)
        case "diff": (handler, help) = (DiffCommand.run, DiffCommand.usage)
        case "fetch": (handler, help) = (FetchCommand.run, FetchCommand.usage)
        case "sign": (handler, help) = (SignCommand.run, SignCommand.usage)
        case "key": (handler, help) = (KeyCommand.run, KeyCommand.usage)
        case "abort": (handler, help) = (AbortCommand.run, AbortCommand.usage)
        case "-h", "--help", "help":
            Output.out(usage)
            return .success
        case "--version":
            Output.out(
                "cairn 0.1.0 (writes format \(FormatVersion.current), 2.\(Prelude.signedMinorVersion) signed, "
                    + "\(EnvelopeRecord.majorVersion).\(EnvelopeRecord.minorVersion) encrypted; reads 1.x, 2.x and 3.x)")
            return .success
        default:
            Output.err("cairn: unknown command '\(command)'\n\n\(usage)")
            return .usage
        }
        if rest.contains(where: { $0 == Array("--help".utf8) || $0 == Array("-h".utf8) }) {
            Output.out(help)
            return .success
        }
        guard let handler else { return .usage }
        if command == "create" {
            // CreateCommand's own code is unchanged by interruption: the line is made from its
            // arguments here.
            Interruption.describe(lastResort: { Interruption.createLastResortLine(rest) }) { await Interruption.createLine(rest) }
        }
        let outcome = await Interruption.run {
            do {
                return try await handler(rest)
            } catch let error as UsageError {
                Output.err("cairn \(command): \(error.message)\n\n\(help)")
                return .usage
            } catch let error as CairnError where SmallFile.isTooOpen(error) {
                // A secret file its group or others may read: refused as ssh refuses such a key,
                // a mistake in what was given, exit 2 (`Spec/0003 §14`), whichever command read it.
                Output.error(error)
                return .usage
            } catch {
                Output.error(error)
                return .failure
            }
        }
        switch outcome {
        case .finished(let status):
            return status
        case .interrupted(let signal):
            await Interruption.report()
            return Interruption.exitStatus(for: signal)
        }
    }

    /// The archive operand of list/info/verify/cat/extract: the first operand. Only `extract`
    /// takes more (the PATHs to select); the others refuse any, naming it, rather than ignore it.
    static func archiveOperand(_ arguments: Arguments, takingPaths: Bool = false) throws(UsageError) -> String {
        guard let first = arguments.operands.first else { throw UsageError("missing ARCHIVE") }
        if !takingPaths, arguments.operands.count > 1 {
            throw UsageError("unexpected operand '\(String(decoding: arguments.operands[1], as: UTF8.self))': this command takes one ARCHIVE")
        }
        return String(decoding: first, as: UTF8.self)
    }
}
