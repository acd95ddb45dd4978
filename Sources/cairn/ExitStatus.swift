/// The `cairn` exit statuses (`Spec/0003-command-line.md §2`).
struct ExitStatus: Sendable {
    let rawValue: Int32
    /// Everything succeeded.
    static let success = ExitStatus(rawValue: 0)
    /// The command failed; an error naming the path, entry or offset was printed.
    static let failure = ExitStatus(rawValue: 1)
    /// The command line was wrong; usage was printed.
    static let usage = ExitStatus(rawValue: 2)
    /// The command completed, but with warnings (files skipped or changed while read).
    static let warnings = ExitStatus(rawValue: 3)
}

/// A command-line mistake: printed with the command's usage, exit status 2.
struct UsageError: Error {
    var message: String
    init(_ message: String) { self.message = message }
}
