import Cairn
import Glibc

/// The zstd habit (`Spec/0003-command-line.md §1`): an archive is binary, so it is never written
/// to a terminal, and a terminal is never read as one (a user who forgot a `<` or a `|` would
/// otherwise see garbage, or wait for input that never comes).
enum Terminal {
    /// Refuses an archive on a standard stream that is a terminal.
    ///
    /// - Parameters:
    ///   - descriptor: 0 when the archive is read from standard input (`extract -`,
    ///     `verify -`), 1 when it is written to standard output (`create -o -`).
    ///   - instead: for standard output, what to do instead (`create` adds its -o FILE).
    /// - Throws: `CairnError` `.invalidArgument` (exit 1) naming the stream and what to do
    ///   instead, when that descriptor is a terminal.
    static func refuseArchive(on descriptor: Int32, instead: String = "redirect standard output to a file or pipe it") throws(CairnError) {
        guard isatty(descriptor) == 1 else { return }
        if descriptor == 0 {
            throw CairnError(
                .invalidArgument,
                "refusing to read an archive from a terminal; give a file, or redirect or pipe the archive into standard input",
                path: "<stdin>")
        }
        throw CairnError(
            .invalidArgument,
            "refusing to write an archive to a terminal; \(instead)",
            path: "<stdout>")
    }
}
