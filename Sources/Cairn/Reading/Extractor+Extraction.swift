import Glibc

extension Extractor {
    /// Extracts the selected entries into `destination` through a ``StagingDirectory``.
    /// - Returns: the entries and content bytes extracted.
    @discardableResult
    nonisolated(nonsending) package func extract(selection: [[UInt8]]?, to destination: [UInt8], options: ExtractionOptions)
        async throws -> (entries: Int, contentBytes: UInt64)
    {
        let plan = try makePlan(selection: selection, stripComponents: options.stripComponents)
        guard plan.outputBytes <= options.maximumOutputBytes else {
            throw CairnError(
                .limitExceeded,
                "the archive declares \(plan.outputBytes) bytes of output, over the limit of \(options.maximumOutputBytes)",
                path: reader.path)
        }
        if selection == nil {
            if options.resume, !reader.walkedRecords, let resumed = try await resumeEverything(plan, to: destination, options: options) {
                return resumed
            }
            return try await extractEverything(plan, to: destination, options: options)
        }
        let staging = try StagingDirectory(for: destination, options: options)
        try checkBeforeWriting(plan, staging: staging, destination: destination, options: options)
        let identity = StagingDirectory.JournalIdentity.seekable(
            chainDigest: reader.footer.chainDigest, selection: selection, archivePath: reader.path, options: options)
        let completed = try staging.continueJournal(as: identity, path: PathBytes.display(destination)).done
        progress.totalUnitCount = Int64(clamping: plan.outputBytes)
        progress.completedUnitCount = 0
        do {
            try await write(plan, into: staging, skipping: completed, options: options)
            try staging.commit()
            return (plan.indices.count, plan.outputBytes)
        } catch is CancellationError {
            // Cancelled like a kill: keep what is verified for --resume.
            staging.release()
            throw CancellationError()
        } catch where staging.isResumed {
            // Never throw away progress an earlier run verified; the error says what went wrong.
            staging.release()
            throw namingUsers(error)
        } catch {
            staging.discard()
            throw namingUsers(error)
        }
    }

    /// An error about a damaged chunk, naming every entry that uses it.
    private func namingUsers(_ error: any Error) -> any Error {
        guard let failure = error as? CairnError else { return error }
        return reader.manifest.namingUsers(of: failure)
    }

    /// Extracting everything verifies everything it reads before anything is moved into place
    /// (the Design article of the Cairn documentation, "One meaning"): one pass over every record
    /// of the file through the same checker as `verify` and `extract -` (``StreamExtractor``), so
    /// an archive that `verify` rejects imports nothing. The manifest only serves the checks that must come before the
    /// first byte is written: the output limit, the free space and progress.
    nonisolated(nonsending) private func extractEverything(_ plan: ExtractionPlan, to destination: [UInt8], options: ExtractionOptions)
        async throws -> (entries: Int, contentBytes: UInt64)
    {
        let staging = try StagingDirectory(for: destination, options: options)
        try checkBeforeWriting(plan, staging: staging, destination: destination, options: options)
        // Decoding the manifest freed its transient tables: return them before the stream's.
        LargeBuffers.returnFreeMemory()
        let input: SequentialArchiveBytes
        do {
            // A remote archive's GET waits for the server: on a thread of its own, never the pool's.
            let source = reader.source
            input =
                source.isRemote
                ? try await DedicatedThread.run { () throws(CairnError) in try source.openSequential() } : try source.openSequential()
        } catch {
            if staging.isResumed { staging.release() } else { staging.discard() }
            throw error
        }
        let extractor: StreamExtractor
        do {
            extractor = try StreamExtractor(
                staging: staging, options: options, progress: progress, expectedOutput: plan.outputBytes, manifest: reader.manifest,
                trustedKeys: reader.trustedKeys, keying: reader.keying, input: input)
        } catch {
            input.cancel()
            throw error
        }
        let report: VerificationReport
        do {
            report = try await extractor.run(RecordStream(descriptor: input.descriptor))
        } catch {
            let failure = Extractor.ending(input, after: error, path: reader.path)
            if let failure = failure as? CairnError { throw failure.withPath(reader.path) }
            throw failure
        }
        try input.finish()
        return (report.entryCount, report.contentBytes)
    }

    /// What must be refused before the first byte is written (so that a 2 GiB extraction does
    /// not fail at 100%): top-level names that exist in DEST under the all-or-nothing policy, and
    /// declared output beyond the free space. On a refusal the staging directory is removed, or
    /// kept when an interrupted run's work is in it.
    func checkBeforeWriting(
        _ plan: ExtractionPlan, staging: StagingDirectory, destination: [UInt8], options: ExtractionOptions
    ) throws(CairnError) {
        do throws(CairnError) {
            var seen = Set<[UInt8]>()
            for index in plan.indices {
                guard let path = Extractor.strippedPath(reader.manifest.entries[index].entry.pathBytes, components: options.stripComponents),
                    let top = PathValidator.components(path).first, seen.insert(top).inserted
                else { continue }
                try staging.checkTopLevelName(top)
            }
            if options.checkFreeSpace, let free = staging.availableBytes, plan.outputBytes > free {
                throw CairnError(
                    .limitExceeded, "the archive declares \(plan.outputBytes) bytes of output but only \(free) bytes are free",
                    path: PathBytes.display(destination))
            }
        } catch {
            if staging.isResumed { staging.release() } else { staging.discard() }
            throw error
        }
    }

    /// A digest naming the selection, so a resumed extraction uses the same one.
    static func selectionDigest(_ selection: [[UInt8]]?) -> String {
        guard let selection else { return "all" }
        var bytes: [UInt8] = []
        for path in selection { bytes += path + [0] }
        return (try? SHA256.hash(bytes).hexString) ?? "unknown"
    }

    /// Writes the plan's entries, journaling each one once it is complete; the first `skipping`
    /// entries were completed by an interrupted run. From an archive whose records were not
    /// walked (a remote one), the records of every entry to be written are checked against the
    /// manifest first (§13.7).
    nonisolated(nonsending) func write(
        _ plan: ExtractionPlan, into staging: StagingDirectory, skipping: Int, options: ExtractionOptions
    ) async throws {
        let rows = reader.manifest.entries
        // Pack records the checks read, kept for the prefetcher (remote: fetched once).
        let kept: KeptRecords? = reader.walkedRecords ? nil : KeptRecords(in: staging)
        defer { kept?.close() }
        if !reader.walkedRecords { try checkRecords(of: plan, skipping: skipping, keeping: kept) }
        // The entry whose content an entry of the plan is written with: a file its own, a hard
        // link copied for --strip-components its target's; nil for entries without content.
        func content(of index: Int) -> Int? { rows[index].entry.kind == .file ? index : plan.copiedHardLinks[index] }
        // Holes: the zero chunk is decoded once, not once per reference (see `writeFile`); and a
        // chunk used again is read back from where it was written (``ChunkReuse``), so its
        // record is read (over HTTP: fetched) once per run.
        var zeros = RepeatedZeroChunk(chunks: reader.manifest.chunks, maximum: reader.header.chunking.maximum, ids: reader.idFunction)
        var zerosWhileWriting = zeros
        var reuse = ChunkReuse(
            chunks: reader.manifest.chunks, ids: reader.idFunction, references: plan.indices.compactMap(content(of:)).map(reader.references(ofEntry:)))
        var reuseWhileWriting = reuse
        let held = heldPrefixes(of: plan, in: staging, skipping: skipping, options: options)
        var order: [Int] = []
        for (position, index) in plan.indices.enumerated() {
            guard let contentIndex = content(of: index) else { continue }
            let references = reader.references(ofEntry: contentIndex)
            if position < skipping {
                reuse.planSkipped(references)
                continue
            }
            let heldCount = held[position] ?? 0
            reuse.planSkipped(references.prefix(heldCount))
            for reference in references.dropFirst(heldCount) where zeros.needsDecoding(reference) && reuse.planDecodes(reference) {
                order.append(Int(reference))
            }
        }
        var source = ChunkPrefetcher.Source(reader: reader)
        source.kept = kept
        let chunks = ChunkPrefetcher(source: source, order: order)
        defer { chunks.cancel() }
        var directories: [(path: [UInt8], entry: ArchiveEntry)] = []
        var symlinks: [ArchiveEntry] = []
        for (position, index) in plan.indices.enumerated() {
            try Task.checkCancellation()
            // The plan holds only entries that keep a path.
            guard let entry = Extractor.destinationEntry(for: rows[index].entry, stripping: options.stripComponents) else { continue }
            let display = entry.path
            let name = PathBytes.lastComponent(entry.pathBytes)
            if position < skipping {
                if entry.kind == .directory { directories.append((entry.pathBytes, entry)) }
                if entry.kind == .symlink { symlinks.append(entry) }
                if entry.kind == .file { progress.completedUnitCount += Int64(clamping: entry.size) }
                if let contentIndex = content(of: index) {
                    reuseWhileWriting.recordSkipped(reader.references(ofEntry: contentIndex), path: entry.pathBytes)
                }
                continue
            }
            if staging.isResumed, entry.kind != .directory, held[position] == nil { try staging.removeLeftover(entry.pathBytes) }
            switch entry.kind {
            case .directory:
                let parent = try staging.parentDirectory(of: entry.pathBytes)
                // An earlier entry may have created it as an implicit parent; it must really be a
                // directory then.
                if (try? FileStatus.of(name, relativeTo: parent))?.kind != .directory {
                    try FileSystem.makeDirectory(name, in: parent, mode: 0o700, display: display)
                }
                directories.append((entry.pathBytes, entry))
            case .file:
                try await writeFile(
                    entry, contentOf: index, in: staging, chunks: chunks, zeros: &zerosWhileWriting, reuse: &reuseWhileWriting,
                    held: held[position] ?? 0, options: options)
            case .hardLink:
                if let target = plan.copiedHardLinks[index] {
                    try await writeFile(
                        entry, contentOf: target, in: staging, chunks: chunks, zeros: &zerosWhileWriting, reuse: &reuseWhileWriting,
                        held: held[position] ?? 0, options: options)
                } else {
                    let parent = try staging.parentDirectory(of: entry.pathBytes)
                    try FileSystem.makeHardLink(
                        from: entry.linkTarget, in: staging.descriptor, to: name, in: parent, display: display)
                }
            case .symlink:
                symlinks.append(entry)
            case .fifo, .characterDevice, .blockDevice:
                let parent = try staging.parentDirectory(of: entry.pathBytes)
                if try SpecialFiles.make(entry, named: name, in: parent, options: options) {
                    try SpecialFiles.finish(entry, named: name, in: parent, options: options)
                }
            default:
                throw CairnError(.unsupportedFileType, "entry kind \(entry.kind) cannot be extracted", path: display)
            }
            options.onEntry?(entry)
            // Journal only what is complete: a kill before this line redoes the entry.
            if entry.kind != .symlink { try staging.journalDone(position) }
        }
        // Symlinks last, so no entry is ever written through one.
        for entry in symlinks {
            let parent = try staging.parentDirectory(of: entry.pathBytes)
            let name = PathBytes.lastComponent(entry.pathBytes)
            try FileSystem.makeSymlink(name, target: entry.linkTarget, in: parent, display: entry.path)
            ExtendedAttributes.restore(entry.extendedAttributes, to: .name(name, in: parent), display: entry.path, options: options)
            try SpecialFiles.setModificationTime(entry, named: name, in: parent, options: options)
        }
        // Directory modes and times last, deepest first, after their contents are complete.
        for (path, entry) in directories.sorted(by: { $0.path.count > $1.path.count }) {
            ExtendedAttributes.restore(
                entry.extendedAttributes, to: .name(path, in: staging.descriptor), display: entry.path, options: options)
            try FileSystem.setExtractedPermissions(path, in: staging.descriptor, mode: entry.permissions, display: entry.path)
            try SpecialFiles.setModificationTime(entry, named: path, in: staging.descriptor, options: options)
        }
    }

    /// The files an interrupted run left in the staging directory at positions from `skipping` on,
    /// mapped to how many chunk references each holds verified from its start
    /// (``ChunkLocations/verifiedPrefix(of:references:chunks:ids:staging:)``): those chunks are not
    /// read (over HTTP: fetched) again. Entries are written in plan order, so the search ends at
    /// the first file the staging directory holds nothing of.
    private func heldPrefixes(
        of plan: ExtractionPlan, in staging: StagingDirectory, skipping: Int, options: ExtractionOptions
    ) -> [Int: Int] {
        guard staging.isResumed else { return [:] }
        let rows = reader.manifest.entries
        var held: [Int: Int] = [:]
        for (position, index) in plan.indices.enumerated() where position >= skipping {
            let contentIndex = rows[index].entry.kind == .file ? index : plan.copiedHardLinks[index]
            guard let contentIndex,
                let entry = Extractor.destinationEntry(for: rows[index].entry, stripping: options.stripComponents)
            else { continue }
            let references = reader.references(ofEntry: contentIndex)
            if references.isEmpty { continue }
            let count = ChunkLocations.verifiedPrefix(
                of: entry.pathBytes, references: references, chunks: reader.manifest.chunks, ids: reader.idFunction, staging: staging)
            guard count > 0 else { break }
            held[position] = count
        }
        return held
    }

    /// Checks the records of the plan's entries from position `skipping` on against the manifest
    /// (§13.7), keeping the pack records read in `kept`.
    private func checkRecords(of plan: ExtractionPlan, skipping: Int, keeping kept: KeptRecords?) throws(CairnError) {
        var checked: [Int] = []
        for (position, index) in plan.indices.enumerated() where position >= skipping {
            checked.append(index)
            if let target = plan.copiedHardLinks[index] { checked.append(target) }
        }
        do throws(CairnError) {
            try ArchiveScanner.checkRecords(
                ofEntries: checked, in: reader.manifest, version: reader.version, source: reader.source,
                limit: reader.footer.manifestOffset, keeping: kept)
        } catch {
            // The error names the entry; say which archive too.
            var named = error.withPath(reader.path)
            if named.path != reader.path { named.message += " (in \(reader.path))" }
            throw named
        }
    }

    /// Writes a file whose content is that of manifest entry `contentIndex`; its chunks come,
    /// verified, from `chunks` in order, except the repeated references to the zero chunk that
    /// `zeros` leaves out (holes) and the chunks `reuse` kept the location of (read back).
    nonisolated(nonsending) private func writeFile(
        _ entry: ArchiveEntry, contentOf contentIndex: Int, in staging: StagingDirectory, chunks: ChunkPrefetcher,
        zeros: inout RepeatedZeroChunk, reuse: inout ChunkReuse, held: Int,
        options: ExtractionOptions
    ) async throws {
        let parent = try staging.parentDirectory(of: entry.pathBytes)
        let name = PathBytes.lastComponent(entry.pathBytes)
        let references = reader.references(ofEntry: contentIndex)
        let heldLength = references.prefix(held).reduce(UInt64(0)) { $0 + UInt64(reader.manifest.chunks[Int($1)].rawLength) }
        // Read and write: a chunk the file repeats is read back from it. A file an interrupted
        // run left keeps its first `held` chunks, verified, and continues after them.
        let fd = try FileDescriptor.open(
            name, flags: held > 0 ? O_RDWR | O_NOFOLLOW : O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o600, relativeTo: parent)
        let file = FileDescriptor(rawValue: fd.rawValue, path: entry.path)
        do {
            let digest = SHA256()
            var written: UInt64 = 0
            if held > 0 {
                try file.truncate(to: heldLength)
                reuse.recordSkipped(references.prefix(held), path: entry.pathBytes)
            }
            // Zero chunks are not written: holes come back as holes.
            var sparse = SparseWriter(file: file, offset: heldLength)
            for (number, reference) in references.enumerated() {
                let row = reader.manifest.chunks[Int(reference)]
                if number < held {
                    // Verified in place (``heldPrefixes(of:in:skipping:options:)``).
                } else if !zeros.needsDecoding(reference) {
                    sparse.skip(UInt64(row.rawLength))
                } else if let kept = reuse.kept(reference) {
                    if kept.isZero {
                        sparse.skip(UInt64(row.rawLength))
                    } else {
                        try sparse.write(try chunks.readBack(
                                reference, from: kept, staging: staging, open: (entry.pathBytes, file), entryPath: entry.path))
                    }
                } else {
                    let bytes = try await chunks.next(reference)
                    try reuse.recordDecoded(reference, bytes: bytes, path: entry.pathBytes, offset: written)
                    try sparse.write(bytes)
                }
                row.id.withUnsafeBytes { digest.update($0) }
                written += UInt64(row.rawLength)
                progress.completedUnitCount += Int64(row.rawLength)
            }
            try sparse.finish(size: written)
            let contentRow = reader.manifest.entries[contentIndex]
            // A packed file's chunk was checked through its pack's content digest (§7.5).
            let digestMatches = try digest.finalize() == contentRow.contentDigest || contentRow.pack != nil
            guard digestMatches, written == contentRow.entry.size else {
                throw CairnError(.corrupted, "content does not match the entry's digest", path: entry.path)
            }
            // A hard link copied for --strip-components gets its target's attributes, as its content.
            ExtendedAttributes.restore(
                contentRow.entry.extendedAttributes, to: .descriptor(file), display: entry.path, options: options)
            try FileSystem.setExtractedPermissions(name, in: parent, mode: entry.permissions, display: entry.path)
            try SpecialFiles.setModificationTime(of: file, entry, options: options)
        } catch {
            _ = try? file.close()
            throw error
        }
        try file.close()
    }
}
