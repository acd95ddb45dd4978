/// The rules every entry of an archive must follow before anything is written for it, applied
/// in entry order (`Spec/0001-container-format.md §6.2`, §6.5, §13.2): the one place they are
/// decided. The streaming checker (``ArchiveScanner``) applies them to entry records, and the
/// seekable reader to the manifest's entry rows, so `verify`, `list` and every extraction refuse
/// the same archives.
///
/// An entry is admitted when:
/// 1. its path is valid (``PathValidator``) and not used by an earlier entry;
/// 2. no ancestor of it is an earlier entry of another kind than directory (it would be written
///    through a symlink, a file or a hard link);
/// 3. it is a directory, or no earlier entry lies below it (a later symlink or file must not turn
///    a directory that earlier entries implied into something else);
/// 4. a hard link names an earlier file entry;
/// 5. a symlink's target is not empty and holds no NUL byte.
///
/// - Complexity: O(depth) dictionary operations per entry; memory O(entries + directories).
package struct EntryRules {
    /// Every path admitted so far and its kind.
    /// Kept in a ``PathTable`` (the kind's raw value with each path): no heap block per path.
    private var kinds = PathTable()
    /// Every proper ancestor of an admitted path (directories implied by the entries so far).
    private var implied = PathTable()

    package init() {}

    /// The kind of the admitted entry at `path`, if any.
    package func kind(of path: [UInt8]) -> ArchiveEntry.Kind? { kinds.value(of: path).map(ArchiveEntry.Kind.init(rawValue:)) }

    /// Checks `entry` against the entries admitted before it and admits it.
    ///
    /// - Parameter offset: the entry record's offset, for the error.
    /// - Throws: `.unsafePath` naming the entry for rules 1–4, `.corrupted` for rule 5.
    package mutating func admit(_ entry: ArchiveEntry, offset: UInt64?) throws(CairnError) {
        let path = entry.pathBytes
        if let problem = PathValidator.problem(with: path) {
            throw CairnError(.unsafePath, "entry path \(problem)", path: entry.path, offset: offset)
        }
        guard !kinds.contains(path) else {
            throw CairnError(.unsafePath, "entry path appears twice", path: entry.path, offset: offset)
        }
        if entry.kind != .directory, implied.contains(path) {
            throw CairnError(
                .unsafePath, "\(entry.kind.words) entry would replace the directory that earlier entries are stored in",
                path: entry.path, offset: offset)
        }
        var parent = PathValidator.parent(path)
        var newAncestors: [[UInt8]] = []
        while !parent.isEmpty {
            if let kind = kind(of: parent), kind != .directory {
                throw CairnError(
                    .unsafePath, "entry would be written through the \(kind.noun) \(PathBytes.display(parent))",
                    path: entry.path, offset: offset)
            }
            if implied.contains(parent) { break }  // its ancestors were checked when it was implied
            newAncestors.append(parent)
            parent = PathValidator.parent(parent)
        }
        if entry.kind == .hardLink, kind(of: entry.linkTarget) != .file {
            throw CairnError(
                .unsafePath, "hard link target \(entry.linkTargetDisplay) is not an earlier file of this archive",
                path: entry.path, offset: offset)
        }
        if entry.kind == .symlink, entry.linkTarget.isEmpty || entry.linkTarget.contains(0) {
            throw CairnError(.corrupted, "symlink target is empty or contains NUL", path: entry.path, offset: offset)
        }
        for ancestor in newAncestors { implied.insert(ancestor) }
        kinds.insert(path, value: entry.kind.rawValue)
    }
}
