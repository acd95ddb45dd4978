import Cairn

/// The options every command that moves bytes over the network shares (`Spec/0003-command-line.md
/// §1.3`): how many requests it keeps in flight and how long a transfer may stall. One place
/// parses them, so `fetch`, `create -o s3://` and the remote readers take the same values.
enum TransferOptions {
    /// `--connections N`: requests kept in flight at once (ranges of a fetch, coalesced ranges
    /// of a remote read).
    static let connectionsOption = "--connections"
    /// `--timeout S`: seconds without a byte before a transfer counts as cut.
    static let timeoutOption = "--timeout"
    /// `--upload-concurrency M`: parts of a multipart upload kept in flight at once
    /// (`create -o s3://`, `Spec/0003-command-line.md §3.3`).
    static let uploadConcurrencyOption = "--upload-concurrency"
    /// What a command that takes both adds to its valued options.
    static let valued: Set<String> = [connectionsOption, timeoutOption]

    /// The most requests a command keeps in flight.
    static let maximumConnections = RemoteReadOptions.maximumConnections
    /// The default number of requests in flight (issue 26: S3's guidance is many 8–16 MB ranges
    /// over several connections; 4 fills a link that caps each connection at a quarter of it).
    static let defaultConnections = RemoteReadOptions.defaultConnections

    static let connectionsHelp = """
        --connections N requests kept in flight at once, 1 to \(maximumConnections) (default \(defaultConnections))
        """
    /// `create`'s help line for ``uploadConcurrencyOption``, its text aligned with the others.
    static let uploadConcurrencyHelp = """
        --upload-concurrency M    with s3://: parts uploaded at once, 1 to \(ObjectStoreSink.UploadOptions.maximumUploadConcurrency) (default \(ObjectStoreSink.UploadOptions.defaultUploadConcurrency));
                                    memory about (M + 1) x the part size (8 MiB)
        """
    static let timeoutHelp = """
        --timeout S     seconds without a byte before a transfer counts as cut (default 30)
        """

    /// `--connections N` in `args`, or `fallback` when it is not given.
    ///
    /// - Throws: ``UsageError`` (exit 2) for a value that is not a whole number from 1 to 64.
    static func connections(_ args: Arguments, default fallback: Int = defaultConnections) throws -> Int {
        guard let text = args.value(connectionsOption) else { return fallback }
        guard let value = Int(text), value >= 1, value <= maximumConnections else {
            throw UsageError("\(connectionsOption) takes a count from 1 to \(maximumConnections), not '\(text)'")
        }
        return value
    }

    /// `--upload-concurrency M` in `args`, or the default (4) when it is not given.
    ///
    /// - Throws: ``UsageError`` (exit 2) for a value that is not a whole number from 1 to 64.
    static func uploadConcurrency(_ args: Arguments) throws -> Int {
        let maximum = ObjectStoreSink.UploadOptions.maximumUploadConcurrency
        guard let text = args.value(uploadConcurrencyOption) else { return ObjectStoreSink.UploadOptions.defaultUploadConcurrency }
        guard let value = Int(text), value >= 1, value <= maximum else {
            throw UsageError("\(uploadConcurrencyOption) takes a count from 1 to \(maximum), not '\(text)'")
        }
        return value
    }

    /// The upload options `--upload-concurrency` and `--timeout` in `args` give.
    ///
    /// - Throws: ``UsageError`` (exit 2) for a value out of bounds.
    static func uploadOptions(_ args: Arguments) throws -> ObjectStoreSink.UploadOptions {
        var options = ObjectStoreSink.UploadOptions(uploadConcurrency: try uploadConcurrency(args))
        if let timeout = try timeout(args) { options.stallTimeout = timeout }
        return options
    }

    /// `--timeout S` in `args`, or nil when it is not given.
    ///
    /// - Throws: ``UsageError`` (exit 2) for a value that is not more than 0 and at most 3600.
    static func timeout(_ args: Arguments) throws -> Double? {
        guard let text = args.value(timeoutOption) else { return nil }
        guard let value = Double(text), value > 0, value <= 3600 else {
            throw UsageError("\(timeoutOption) takes seconds, more than 0 and at most 3600, not '\(text)'")
        }
        return value
    }

    /// How `extract`, `list` and `cat` read a remote archive (`Spec/0001-container-format.md
    /// §13.9`): `--connections` and `--timeout` as given, the defaults otherwise. A command that
    /// does not take the options gets the defaults.
    ///
    /// - Throws: ``UsageError`` (exit 2) as ``connections(_:default:)`` and ``timeout(_:)``.
    static func remoteReading(_ args: Arguments) throws -> RemoteReadOptions {
        var options = RemoteReadOptions(connections: try connections(args))
        if let timeout = try timeout(args) { options.stallTimeout = timeout }
        return options
    }
}
