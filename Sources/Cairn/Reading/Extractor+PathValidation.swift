extension Extractor {
    /// The entries to extract, checked before anything is written.
    package struct ExtractionPlan {
        /// Manifest entry indices, in archive order.
        var indices: [Int]
        /// Hard links whose target is not extracted: written as copies of the target's content.
        var copiedHardLinks: [Int: Int] = [:]
        /// Total bytes of file content the plan writes.
        var outputBytes: UInt64 = 0
    }

    /// Checks every selected entry: path rules (`Spec/0001-container-format.md §6.2`), no
    /// duplicates, no entry below a non-directory entry (it would be written through a symlink or
    /// file), hard links only to earlier file entries, declared sizes equal to the chunks' sizes.
    ///
    /// - Parameter selection: paths to extract (with everything below them), or nil for all.
    /// - Throws: `.unsafePath` naming the entry, `.corrupted` for inconsistent sizes, `.notFound`
    ///   for a selected path that is not in the archive.
    package func makePlan(selection: [[UInt8]]?) throws(CairnError) -> ExtractionPlan {
        let rows = reader.manifest.entries
        var kinds: [[UInt8]: (kind: ArchiveEntry.Kind, index: Int)] = [:]
        for (index, row) in rows.enumerated() {
            let entry = row.entry
            if let problem = PathValidator.problem(with: entry.pathBytes) {
                throw CairnError(.unsafePath, "entry path \(problem)", path: entry.path, offset: row.recordOffset)
            }
            guard kinds[entry.pathBytes] == nil else {
                throw CairnError(.unsafePath, "entry path appears twice", path: entry.path, offset: row.recordOffset)
            }
            if entry.kind == .hardLink {
                guard let target = kinds[entry.linkTarget], target.kind == .file else {
                    throw CairnError(
                        .unsafePath, "hard link target \(entry.linkTargetDisplay) is not an earlier file of this archive",
                        path: entry.path, offset: row.recordOffset)
                }
            }
            if entry.kind == .symlink, entry.linkTarget.isEmpty || entry.linkTarget.contains(0) {
                throw CairnError(.corrupted, "symlink target is empty or contains NUL", path: entry.path, offset: row.recordOffset)
            }
            if entry.kind == .file {
                var total: UInt64 = 0
                for reference in reader.references(ofEntry: index) {
                    total += UInt64(reader.manifest.chunks[Int(reference)].rawLength)
                }
                guard total == entry.size else {
                    throw CairnError(
                        .corrupted, "entry declares \(entry.size) bytes but its chunks hold \(total)", path: entry.path,
                        offset: row.recordOffset)
                }
            }
            kinds[entry.pathBytes] = (entry.kind, index)
        }
        for row in rows {
            var parent = PathValidator.parent(row.entry.pathBytes)
            while !parent.isEmpty {
                if let found = kinds[parent], found.kind != .directory {
                    throw CairnError(
                        .unsafePath, "entry would be written through the \(found.kind) \(PathBytes.display(parent))",
                        path: row.entry.path, offset: row.recordOffset)
                }
                parent = PathValidator.parent(parent)
            }
        }
        var plan = ExtractionPlan(indices: [])
        var selected = Set<Int>()
        for (index, row) in rows.enumerated() where Extractor.isSelected(row.entry.pathBytes, by: selection) {
            plan.indices.append(index)
            selected.insert(index)
        }
        if let selection {
            for path in selection where kinds[path] == nil {
                throw CairnError(.notFound, "no such entry in the archive", path: PathBytes.display(path))
            }
        }
        for index in plan.indices {
            let entry = rows[index].entry
            if entry.kind == .file {
                plan.outputBytes += entry.size
            } else if entry.kind == .hardLink, let target = kinds[entry.linkTarget], !selected.contains(target.index) {
                plan.copiedHardLinks[index] = target.index
                plan.outputBytes += rows[target.index].entry.size
            }
        }
        return plan
    }

    /// Whether `path` is one of `selection` or below one of them.
    static func isSelected(_ path: [UInt8], by selection: [[UInt8]]?) -> Bool {
        guard let selection else { return true }
        for prefix in selection {
            if path == prefix { return true }
            if path.count > prefix.count, path[prefix.count] == 0x2F, path.starts(with: prefix) { return true }
        }
        return false
    }
}
