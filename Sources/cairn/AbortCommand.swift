import Cairn
import Foundation

/// `cairn abort s3://BUCKET/KEY`: gives up the interrupted upload recorded for the object
/// (`Spec/0003-command-line.md §16`).
enum AbortCommand {
    static let usage = """
        usage: cairn abort s3://BUCKET/KEY [--upload-state FILE] [--s3-endpoint URL] [--timeout S] [-q]

        Gives up the interrupted upload to s3://BUCKET/KEY that cairn create recorded: the store
        drops its parts (AbortMultipartUpload), so they stop costing storage, and the state
        file is removed. Only the recorded upload is aborted; in-progress uploads to the key
        that cairn did not record (another tool's) are left alone. 'cairn info s3://BUCKET/KEY
        --uploads' shows it first.

        options:
          --upload-state FILE   the upload's state file (default: the one create keeps for the
                                object in $XDG_STATE_HOME/cairn/uploads, else ~/.local/state/...)
          --s3-endpoint URL     the object store (default: AWS_ENDPOINT_URL, else AWS);
                                credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
          --timeout S           seconds without a byte before the request counts as cut and
                                is retried (default 30)
          -q, --quiet           print nothing on success

        Exit status: 0 aborted; 1 no upload recorded for the object, a cairn process uploading
        with it, or the store's error (the state file is then kept); 2 usage error.
        """

    static func run(_ raw: [[UInt8]]) async throws -> ExitStatus {
        let args = try Arguments(
            raw, valued: [ArchiveOperand.endpointOption, "--upload-state", TransferOptions.timeoutOption], flags: ["-q", "--quiet"])
        guard let first = args.operands.first else { throw UsageError("missing s3://BUCKET/KEY") }
        guard args.operands.count == 1 else { throw UsageError("abort takes one s3://BUCKET/KEY") }
        let operand = String(decoding: first, as: UTF8.self)
        guard ArchiveLocation.kind(of: operand) == .object else { throw UsageError("abort takes an s3://BUCKET/KEY object, not '\(operand)'") }
        var options = ObjectStoreSink.UploadOptions()
        if let timeout = try TransferOptions.timeout(args) { options.stallTimeout = timeout }
        let statePath = try CreateCommand.uploadStatePath(
            operand, given: args.value("--upload-state"), endpoint: args.value(ArchiveOperand.endpointOption))
        // Nothing recorded: said before credentials are needed.
        guard (try MultipartUploadState.load(from: statePath)) != nil else {
            throw CairnError(.notFound, "no interrupted upload to \(operand) is recorded in \(statePath); nothing to abort", path: operand)
        }
        guard case .object(let location, let store) = try ArchiveOperand.location(operand, args) else {
            throw UsageError("abort takes an s3://BUCKET/KEY object")
        }
        let chosen = options
        let state = try await DedicatedThread.run { () throws(CairnError) in
            try ObjectStoreSink.abortRecordedUpload(at: statePath, location: location, configuration: store, options: chosen)
        }
        if !args.flag("-q", "--quiet") {
            let bytes = state.parts.reduce(0) { $0 + $1.size }
            Output.out(
                "aborted the multipart upload to \(operand) (upload id \(state.uploadID), \(Output.count(state.parts.count, "part")), "
                    + "\(Output.bytes(bytes)) dropped); removed \(statePath)")
        }
        return .success
    }
}
