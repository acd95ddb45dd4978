import Glibc

/// Names of one staged directory that move into the same directory of an existing destination
/// as one decision (`Spec/0003-command-line.md §4` item 12): a name alone, or an SQLite
/// database's files, which are moved in, replaced, kept or refused together, so the destination
/// never holds a database beside another database's `-wal` or `-journal` (which SQLite would
/// replay into it) or without its own.
///
/// A staged name `N` belongs to a database when `N` is a sidecar name (``SQLiteFileNames``) of a
/// file that is a database (``SQLiteSnapshot/isDatabase(named:in:)``, the probe the archiver uses) in
/// the staged directory or in the destination, or else when `N` itself is a database there.
/// Only regular files are read to tell, never through a symlink.
struct StagedGroup {
    /// The staged names, in the order they are moved in: a database's main file before its
    /// sidecars (so that no moment leaves a sidecar without the database it belongs to).
    var incoming: [[UInt8]]
    /// The database's files; nil for a name alone.
    var database: SQLiteFileNames?
    /// The database's files that exist in the destination but are not staged: its sidecars, and
    /// its main file when only sidecars are staged. Empty for a name alone.
    var companions: [[UInt8]] = []

    /// Groups the names staged in `source` against `target`, the same directory of the
    /// destination, in the order of ``DirectoryReader/names(in:)`` (a database where its first
    /// staged file is).
    ///
    /// - Throws: `.io` when `source` cannot be read.
    static func groups(in source: FileDescriptor, against target: FileDescriptor) throws(CairnError) -> [StagedGroup] {
        let names = try DirectoryReader.names(in: source)
        let staged = Set(names)
        var groups: [StagedGroup] = []
        var position: [[UInt8]: Int] = [:]
        for name in names {
            guard let files = database(of: name, staged: staged, source: source, target: target) else {
                groups.append(StagedGroup(incoming: [name]))
                continue
            }
            if let index = position[files.main] {
                groups[index].incoming.append(name)
            } else {
                position[files.main] = groups.count
                groups.append(StagedGroup(incoming: [name], database: files))
            }
        }
        var claimed = staged
        for index in groups.indices {
            guard let files = groups[index].database else { continue }
            let members = [files.main] + files.sidecars
            groups[index].incoming.sort { (members.firstIndex(of: $0) ?? 0) < (members.firstIndex(of: $1) ?? 0) }
            for member in members where !claimed.contains(member) && exists(member, in: target) {
                claimed.insert(member)
                groups[index].companions.append(member)
            }
        }
        return groups
    }

    /// The staged names of this group that exist in `target`, then its ``companions``: what
    /// keeps, refuses or is replaced by it.
    func existing(in target: FileDescriptor) -> [[UInt8]] {
        incoming.filter { Self.exists($0, in: target) } + companions
    }

    /// Whether `name` exists in `directory` (a symlink counts, it is not followed).
    static func exists(_ name: [UInt8], in directory: FileDescriptor) -> Bool {
        (try? FileStatus.of(name, relativeTo: directory)) != nil
    }

    /// The database whose file the staged `name` is, if any (see the type's description). A
    /// database none of whose sidecars is staged or in `target` is left alone: grouped or not,
    /// it moves the same way, and its file is not read.
    private static func database(of name: [UInt8], staged: Set<[UInt8]>, source: FileDescriptor, target: FileDescriptor)
        -> SQLiteFileNames?
    {
        func isDatabase(_ name: [UInt8]) -> Bool {
            SQLiteSnapshot.isDatabase(named: name, in: source) || SQLiteSnapshot.isDatabase(named: name, in: target)
        }
        if let files = SQLiteFileNames(sidecar: name), isDatabase(files.main) { return files }
        let files = SQLiteFileNames(main: name)
        guard files.sidecars.contains(where: { staged.contains($0) || exists($0, in: target) }),
            isDatabase(name)
        else { return nil }
        return files
    }
}
