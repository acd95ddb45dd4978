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

    /// The entries to extract and the output they declare. The entries were checked when the
    /// archive was opened (``ArchiveReader/init(path:verifyingStructure:trustedKeys:)``: ``EntryRules`` on
    /// every record or row), so this only selects.
    ///
    /// - Parameter selection: paths to extract (with everything below them), or nil for all.
    /// - Throws: `.notFound` for a selected path that is not in the archive.
    /// - Parameter stripComponents: entries left with no path are not extracted; a hard link to
    ///   such a file is written as a copy of its content.
    package func makePlan(selection: [[UInt8]]?, stripComponents: Int = 0) throws(CairnError) -> ExtractionPlan {
        let rows = reader.manifest.entries
        var files: [[UInt8]: Int] = [:]
        var paths: Set<[UInt8]> = []
        for (index, row) in rows.enumerated() {
            if row.entry.kind == .file { files[row.entry.pathBytes] = index }
            if selection != nil { paths.insert(row.entry.pathBytes) }
        }
        var plan = ExtractionPlan(indices: [])
        var selected = Set<Int>()
        for (index, row) in rows.enumerated() where Extractor.isSelected(row.entry.pathBytes, by: selection) {
            guard Extractor.strippedPath(row.entry.pathBytes, components: stripComponents) != nil else { continue }
            plan.indices.append(index)
            selected.insert(index)
        }
        if let selection {
            for path in selection where !paths.contains(path) {
                throw CairnError(.notFound, "no such entry in the archive", path: PathBytes.display(path))
            }
        }
        for index in plan.indices {
            let entry = rows[index].entry
            if entry.kind == .file {
                plan.outputBytes += entry.size
            } else if entry.kind == .hardLink, let target = files[entry.linkTarget], !selected.contains(target) {
                plan.copiedHardLinks[index] = target
                plan.outputBytes += rows[target].entry.size
            }
        }
        return plan
    }

    /// `path` without its first `count` components (tar's `--strip-components`), or nil when
    /// nothing is left. The one place that mapping is decided, for every extraction path.
    package static func strippedPath(_ path: [UInt8], components count: Int) -> [UInt8]? {
        guard count > 0 else { return path }
        var rest = path[...]
        for _ in 0..<count {
            guard let slash = rest.firstIndex(of: 0x2F) else { return nil }
            rest = rest[(slash + 1)...]
        }
        return rest.isEmpty ? nil : Array(rest)
    }

    /// `entry` as it is written at the destination: its path (and a hard link's target) after
    /// ``strippedPath(_:components:)``; nil when the entry itself is dropped.
    package static func destinationEntry(for entry: ArchiveEntry, stripping count: Int) -> ArchiveEntry? {
        guard count > 0 else { return entry }
        guard let path = strippedPath(entry.pathBytes, components: count) else { return nil }
        var mapped = entry
        mapped.pathBytes = path
        if entry.kind == .hardLink {
            // A dropped target keeps its archive path; extractors link their copy of its content.
            mapped.linkTarget = strippedPath(entry.linkTarget, components: count) ?? entry.linkTarget
        }
        return mapped
    }

    /// Whether `path` is one of `selection`, below one of them, or the sidecar of one of them
    /// (``SQLiteFileNames``: selecting a database `X` selects the `X-wal` archived with it, one
    /// unit, `Spec/0003-command-line.md §4`).
    static func isSelected(_ path: [UInt8], by selection: [[UInt8]]?) -> Bool {
        guard let selection else { return true }
        let database = SQLiteFileNames(sidecar: path)?.main
        for prefix in selection {
            if path == prefix || database == prefix { return true }
            if path.count > prefix.count, path[prefix.count] == 0x2F, path.starts(with: prefix) { return true }
        }
        return false
    }
}
