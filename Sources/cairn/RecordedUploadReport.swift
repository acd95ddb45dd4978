import Cairn
import Foundation

/// What `cairn info` says of an interrupted upload's state file (`Spec/0003-command-line.md §6`):
/// the object, the upload id, the parts the store acknowledged and their bytes, and the exact
/// `cairn create --resume` that continues it. One place builds it, for `info FILE` and
/// `info s3://B/K --uploads`.
struct RecordedUploadReport {
    let state: MultipartUploadState
    let statePath: String

    /// Whether `path` is a local file that holds an upload state (it starts with `{`, as a JSON
    /// line does; a Cairn archive starts with its magic).
    static func isStateFile(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        return (try? handle.read(upToCount: 1)) == Data("{".utf8)
    }

    /// The parts acknowledged, by number.
    var partNumbers: [Int] { state.parts.map(\.number) }
    /// The bytes of the parts acknowledged.
    var bytesDone: UInt64 { state.parts.reduce(0) { $0 + $1.size } }
    /// Whether the last part (manifest and footer) was acknowledged: only
    /// `CompleteMultipartUpload` remained (a resume then checks whether it went through).
    var lastPartSent: Bool { state.parts.last?.isLast ?? false }
    var encrypted: Bool { state.envelope != nil }

    /// The parts as ranges of numbers: `1-5, 7` (a gap is a part in flight when the run ended).
    var partRanges: String {
        var ranges: [String] = []
        var start: Int?
        var previous = 0
        for number in partNumbers + [Int.max] {
            if let first = start, number != previous + 1 {
                ranges.append(first == previous ? "\(first)" : "\(first)-\(previous)")
                start = number
            } else if start == nil {
                start = number
            }
            previous = number
        }
        return ranges.isEmpty ? "none" : ranges.joined(separator: ", ")
    }

    /// The sources the interrupted run recorded in its header (`cairn.sources`), shell-quoted,
    /// or `PATH...` when they are not known (an encrypted upload, whose header is sealed).
    var sources: String {
        guard let payload = state.header,
            let header = try? ArchiveHeader.decode(payload, offset: UInt64(Prelude.length + RecordFraming.headerLength))
        else { return "PATH..." }
        return InfoCommand.recordedSources(header) ?? "PATH..."
    }

    /// The object and how to find its upload again, as words of a command: the `s3://` operand,
    /// `--s3-endpoint` unless it is AWS's own (giving one would switch to path-style addressing),
    /// and `--upload-state` unless the file is the default one for the object.
    var objectWords: [String] {
        var words = [Shell.quoted(Array("s3://\(state.bucket)/\(state.key)".utf8))]
        let aws = state.endpoint.hasPrefix("https://s3.") && state.endpoint.hasSuffix(".amazonaws.com")
        if !aws { words += [ArchiveOperand.endpointOption, Shell.quoted(Array(state.endpoint.utf8))] }
        let absolute = statePath.hasPrefix("/") ? statePath : FileManager.default.currentDirectoryPath + "/" + statePath
        let standard = try? ArchiveLocation.uploadStatePath(of: S3Location(parsing: "s3://\(state.bucket)/\(state.key)"), endpoint: state.endpoint)
        if standard.map({ URL(fileURLWithPath: $0).standardized.path }) != URL(fileURLWithPath: absolute).standardized.path {
            words += ["--upload-state", Shell.quoted(Array(URL(fileURLWithPath: absolute).standardized.path.utf8))]
        }
        return words
    }

    /// The command that continues the upload, with `--identity IDENTITY_FILE` to fill in for an
    /// encrypted one, run from the directory the interrupted run was started in (its sources
    /// are relative to it, as for a `.partial`).
    var resumeCommand: String {
        var words = ["cairn", "create", "--resume", "-o"] + objectWords
        if encrypted { words += [EncryptionOptions.identityOption, Interruption.identityPlaceholder] }
        return (words + [sources]).joined(separator: " ")
    }

    /// The command that gives the upload up (`Spec/0003-command-line.md §16`).
    var abortCommand: String { (["cairn", "abort"] + objectWords).joined(separator: " ") }

    /// The text lines, or the JSON object.
    func print(json: Bool) {
        if json {
            let object: [String: Any] = [
                "complete": false, "upload": [
                    "stateFile": statePath, "endpoint": state.endpoint, "bucket": state.bucket, "key": state.key,
                    "uploadID": state.uploadID, "partsDone": partNumbers.count, "partNumbers": partNumbers, "bytesDone": bytesDone,
                    "partSize": state.partSize, "lastPartSent": lastPartSent, "encrypted": encrypted, "resumeCommand": resumeCommand, "abortCommand": abortCommand,
                ] as [String: Any],
            ]
            Output.out(Output.json(object))
            return
        }
        var lines = [
            "upload state:      \(statePath)",
            "object:            s3://\(state.bucket)/\(state.key) at \(state.endpoint)",
            "upload id:         \(state.uploadID)",
            "complete:          no (a multipart upload in progress\(encrypted ? ", encrypted" : ""))",
            "parts done:        \(partNumbers.count) (\(partRanges))\(lastPartSent ? "; the last part too: only the completion is left" : "")",
            "bytes done:        \(Output.bytes(bytesDone)) (\(bytesDone) bytes)",
            "part size:         \(Output.bytes(state.partSize))",
            "continue it with:  \(resumeCommand)",
            "give it up with:   \(abortCommand)",
        ]
        if encrypted { lines.append("                   (\(Interruption.identityPlaceholder): an age identity file of one of its recipients)") }
        Output.out(lines.joined(separator: "\n"))
    }
}
