/// Finds where an interrupted archive can be resumed (`Spec/0001-container-format.md §10.4`).
///
/// Reads the file front to back with an ``ArchiveScanner`` (CRC-32s, record rules and chain
/// digests; chunk payloads are not decompressed, pack contents are, to learn their chunks' ids
/// for deduplication), remembering every commit. Only archives of the version this library
/// writes are resumed. Reading stops at the
/// end of the file, at the first torn or invalid record, or at the footer. Everything up to the
/// last valid commit is vouched for by its chain digest; everything after it is discarded.
package struct ArchiveRecovery {
    /// The state at one commit record.
    package struct Checkpoint: Sendable {
        /// Offset just after the commit record: the length of the valid prefix.
        package var end: UInt64
        package var commit: CommitRecord
        /// The commit record's bytes as on disk (the chain hash continues over them).
        package var framed: [UInt8]
        /// Manifest reference-table length at this commit.
        package var referenceCount: Int
        /// This commit's link before it was finalized (format 2.x, not commit 0).
        package var linkBefore: [Digest]?
    }

    package var header: ArchiveHeader
    /// The last valid commit.
    package var last: Checkpoint
    /// The last valid commit with no file open (the start of an entry).
    package var lastBoundary: Checkpoint
    /// Everything the scan rebuilt, possibly past ``last``; cut it with ``writerState(at:)``.
    package var manifest: Manifest
    /// The id of every chunk the scan read, by index (packed chunks' too: they are hashed).
    package var chunkIDs: [Digest]
    /// Whether a valid footer was found (the archive was complete).
    package var wasComplete: Bool
    /// Why reading stopped before the footer, if it did (for messages).
    package var stopReason: CairnError?

    /// Scans the archive readable from `descriptor` (positioned at its start).
    ///
    /// - Throws: `.notResumable` when not even the header and the first commit are valid;
    ///   `.unsupportedVersion` for an archive of another version than this writer writes.
    package static func scan(_ descriptor: FileDescriptor, path: String) throws -> ArchiveRecovery {
        let stream = RecordStream(descriptor: descriptor)
        let scanner = ArchiveScanner()
        do throws(CairnError) {
            try scanner.start(stream)
        } catch {
            throw CairnError(.notResumable, "the archive's header is not readable: \(error.message)", path: path, offset: error.offset)
        }
        var last: Checkpoint?
        var boundary: Checkpoint?
        var stopReason: CairnError?
        do {
            while let record = try stream.next() {
                try scanner.consume(record) { event in
                    guard case .commit(let end, let commit) = event else { return }
                    let checkpoint = Checkpoint(
                        end: end, commit: commit, framed: record.framed,
                        referenceCount: scanner.manifestSoFar.references.count, linkBefore: scanner.linkBeforeLastCommit)
                    last = checkpoint
                    if commit.openEntry == CommitRecord.noOpenEntry { boundary = checkpoint }
                }
                if scanner.footer != nil { break }
            }
        } catch let error as CairnError {
            stopReason = error
        }
        guard scanner.version == .current else {
            // Not `.notResumable` (which `create --resume` answers by starting over): the file
            // may hold hours of committed work that another cairn can still finish.
            throw CairnError(
                .unsupportedVersion,
                "the archive is format \(scanner.version); this version continues only format \(FormatVersion.current) archives: "
                    + "finish it with the cairn that began it",
                path: path)
        }
        guard let header = scanner.header, let last, let boundary else {
            throw CairnError(.notResumable, "the archive has no valid commit record to resume from", path: path)
        }
        return ArchiveRecovery(
            header: header, last: last, lastBoundary: boundary, manifest: scanner.manifestSoFar,
            chunkIDs: scanner.chunkIDs, wasComplete: scanner.footer != nil, stopReason: stopReason)
    }

    /// What an ``ArchiveWriter`` needs to continue after `checkpoint`.
    package func writerState(at checkpoint: Checkpoint) -> ArchiveWriter.RecoveredState {
        let commit = checkpoint.commit
        var cut = Manifest()
        cut.entries = Manifest.EntryTable(manifest.entries.prefix(Int(clamping: commit.entryCount)))
        cut.chunks = Array(manifest.chunks.prefix(Int(clamping: commit.chunkCount)))
        cut.references = Array(manifest.references.prefix(checkpoint.referenceCount))
        cut.packs = Array(manifest.packs.prefix { $0.firstEntry < cut.entries.count })
        var open: ArchiveWriter.RecoveredState.OpenFile?
        if commit.openEntry != CommitRecord.noOpenEntry, commit.openEntry < UInt64(cut.entries.count) {
            let index = Int(clamping: commit.openEntry)
            open = .init(
                index: index, bytes: commit.openEntryBytes, firstReference: Int(cut.entries[index].firstReference))
        }
        return ArchiveWriter.RecoveredState(
            manifest: cut, chunkIDs: Array(chunkIDs.prefix(cut.chunks.count)), contentBytes: commit.contentBytes, storedBytes: commit.storedBytes,
            nextCommitSequence: commit.sequence + 1, chainDigest: commit.chainDigest, commitRecord: checkpoint.framed,
            offset: checkpoint.end, linkBeforeCommit: checkpoint.linkBefore, openFile: open,
            boundary: boundary(at: open == nil ? checkpoint : lastBoundary))
    }

    /// The writer's item boundary at `checkpoint` (a commit with no file open).
    private func boundary(at checkpoint: Checkpoint) -> ArchiveWriter.Boundary {
        let commit = checkpoint.commit
        let chunkCount = min(Int(clamping: commit.chunkCount), manifest.chunks.count)
        // Distinct ids: a chunk stored packed and again as a record is one chunk of content.
        var seen = Set<Digest>()
        var uniqueBytes: UInt64 = 0
        for (row, id) in zip(manifest.chunks.prefix(chunkCount), chunkIDs) where seen.insert(id).inserted {
            uniqueBytes += UInt64(row.rawLength)
        }
        let entryCount = min(Int(clamping: commit.entryCount), manifest.entries.count)
        return ArchiveWriter.Boundary(
            entryCount: entryCount, chunkCount: chunkCount, packCount: manifest.packs.prefix { $0.firstEntry < entryCount }.count,
            referenceCount: checkpoint.referenceCount, contentBytes: commit.contentBytes, storedBytes: commit.storedBytes,
            uniqueBytes: uniqueBytes, nextCommitSequence: commit.sequence + 1, chainDigest: commit.chainDigest,
            commitRecord: checkpoint.framed, offset: checkpoint.end)
    }
}
