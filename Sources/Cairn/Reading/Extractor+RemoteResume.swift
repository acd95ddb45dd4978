extension Extractor {
    /// Continues an interrupted extraction of every entry from an archive read at random (a
    /// remote one: `cairn extract URL -C DEST --resume`, `Spec/0001-container-format.md §13.7`)
    /// instead of reading it again from its start: only the entries the journal does not hold are
    /// written, so only their records and chunks are fetched.
    ///
    /// The staging directory's journal is a streaming extraction's (`commit N DIGEST` after each
    /// entry, §13.4) or this one's (`done P` after each plan position). That the archive is still
    /// the one the journal was started from is proven by its last `commit N DIGEST`: the commit
    /// record that ends where entry N's record starts (or the manifest, for N = every entry) must
    /// hold that chain digest (``ResumeToken/check(against:)``, one small read), and the chain
    /// digest binds every record before it.
    ///
    /// - Returns: the entries and content bytes of the whole extraction, or nil when there is no
    ///   interrupted extraction to continue (the caller extracts everything afresh).
    /// - Throws: `.notResumable` naming the archive when the journal is another kind or the
    ///   archive is not the one it was started from (the staging directory is kept); otherwise
    ///   as extraction.
    nonisolated(nonsending) func resumeEverything(_ plan: ExtractionPlan, to destination: [UInt8], options: ExtractionOptions)
        async throws -> (entries: Int, contentBytes: UInt64)?
    {
        let staging = try StagingDirectory(for: destination, options: options, resume: true)
        guard staging.isResumed else {
            staging.discard()
            return nil
        }
        try checkBeforeWriting(plan, staging: staging, destination: destination, options: options)
        let recorded = try staging.continueJournal(as: .stream(options), path: PathBytes.display(destination))
        var committed = 0
        var digest: Digest?
        let done = recorded.done
        if let commit = recorded.commit {
            committed = commit.entryCount
            digest = commit.chainDigest
        }
        let rows = reader.manifest.entries
        if let digest, committed > 0 {
            guard committed <= rows.count else {
                staging.release()
                throw notTheJournaledArchive(committed, destination: destination)
            }
            let end = committed < rows.count ? rows[committed].recordOffset : reader.footer.manifestOffset
            do throws(CairnError) {
                do throws(CairnError) {
                    try ResumeToken(length: end, chainDigest: digest).check(against: reader.source)
                } catch where error.code == .tokenMismatch && end >= UInt64(SignatureRecord.framedLength) {
                    // In a signed archive the commit's prefix signature may stand between it and
                    // entry N's record (`Spec/0004-trusted-archives.md §3.3` rule 2).
                    let beforeSignature = end - UInt64(SignatureRecord.framedLength)
                    try ResumeToken(length: beforeSignature, chainDigest: digest).check(against: reader.source)
                }
            } catch {
                staging.release()
                throw error.code == .tokenMismatch ? notTheJournaledArchive(committed, destination: destination) : error.withPath(reader.path)
            }
        }
        let skipping = max(done, plan.indices.prefix { $0 < committed }.count)
        progress.totalUnitCount = Int64(clamping: plan.outputBytes)
        progress.completedUnitCount = 0
        do {
            try await write(plan, into: staging, skipping: skipping, options: options)
            try staging.commit()
            return (plan.indices.count, plan.outputBytes)
        } catch {
            // Never throw away what an earlier run verified; the error says what went wrong.
            staging.release()
            if let failure = error as? CairnError { throw reader.manifest.namingUsers(of: failure) }
            throw error
        }
    }

    private func notTheJournaledArchive(_ count: Int, destination: [UInt8]) -> CairnError {
        CairnError(
            .notResumable,
            "the archive at \(reader.path) is not the one whose extraction was interrupted (its records up to entry \(count) differ); "
                + "the staging directory beside \(PathBytes.display(destination)) is kept: remove it to extract afresh",
            path: reader.path)
    }
}
