extension StagingDirectory {
    /// What a journal's first line says an extraction was (`Spec/0003-command-line.md §4.1`): a
    /// resumed extraction continues only the journal it would have begun itself.
    enum JournalIdentity {
        /// Every entry, read front to back, or at random by a remote resume (which keeps the
        /// stream's journal): `cairn-journal 1 stream`.
        case stream(ExtractionOptions)
        /// The entries `selection` of the seekable archive at `archivePath`, whose footer holds
        /// `chainDigest`: `cairn-journal 1 seekable DIGEST SELECTION`.
        case seekable(chainDigest: Digest, selection: [[UInt8]]?, archivePath: String, options: ExtractionOptions)

        /// The journal's first line, ending in the options that change where entries go.
        var line: String {
            switch self {
            case .stream(let options):
                "cairn-journal 1 stream" + options.journalSuffix
            case .seekable(let digest, let selection, _, let options):
                "cairn-journal 1 seekable \(digest.hexString) \(Extractor.selectionDigest(selection))" + options.journalSuffix
            }
        }

        /// Why a journal whose first line is `found` cannot be continued as this one.
        func mismatch(_ found: String?) -> String {
            switch self {
            case .stream:
                found?.hasPrefix("cairn-journal 1 seekable") == true
                    ? "the interrupted extraction staged here is of selected entries: rerun it with the same PATHs and --resume"
                    : "the interrupted extraction staged here used other options (--strip-components) or is not a Cairn extraction"
            case .seekable(_, _, let archivePath, _):
                found?.hasPrefix("cairn-journal 1 stream") == true
                    ? "the interrupted extraction staged here is of every entry: rerun it without PATHs and with --resume"
                    : "the interrupted extraction staged here is of another archive than \(archivePath), "
                        + "or of another selection or --strip-components"
            }
        }
    }

    /// The one check of a journal before an extraction writes into this staging directory: a
    /// new staging directory's journal begins with `identity`'s line; a resumed one's must begin
    /// with it, and what it records is how far the interrupted run got.
    ///
    /// - Parameter path: the path `.notResumable` names (the destination), if any.
    /// - Returns: the resumed journal's progress; none for a new one.
    /// - Throws: `.notResumable` saying what the staged extraction was, when its journal is of
    ///   another kind, archive, selection or options (the staging directory is released, kept for
    ///   the run that can continue it); `.io` when the first line cannot be written.
    func continueJournal(as identity: JournalIdentity, path: String? = nil) throws(CairnError) -> JournalProgress {
        guard isResumed else {
            try appendJournal(identity.line)
            return JournalProgress()
        }
        let lines = journal()
        guard lines.first == identity.line else {
            release()
            throw CairnError(.notResumable, identity.mismatch(lines.first), path: path)
        }
        return Self.progress(of: lines)
    }
}
