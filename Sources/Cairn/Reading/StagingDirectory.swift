import Glibc

/// A private directory on the destination's file system where extraction writes, so that the
/// destination only ever sees complete results (`Spec/0003-command-line.md §4`, "Guarantees").
///
/// Layout: the staging directory holds the journal (``journalName``) and a subdirectory
/// ``rootName``, under which entry paths are written (``descriptor``). No name in an archive can
/// collide with the journal or with the staging directory itself.
///
/// - If the destination does not exist, the staging directory is `.<name>.cairn-staging` beside
///   it, and ``commit()`` renames its root to the destination.
/// - If the destination is an existing directory, the staging directory is
///   `<destination>/.cairn-staging`; ``commit()`` first renames the staging directory aside (so
///   an archive's own top-level `.cairn-staging` can move in), then moves the root's items into
///   the destination as ``existingFiles`` says.
///
/// Where the staging directory lives is decided in one place, `StagingLocation.path(for:)`. The staging
/// directory is created complete (journal and root) under a temporary name, locked with
/// `flock(2)` and then renamed to its fixed name, so another process never sees a staging
/// directory that is half made or, while this one runs, unlocked.
///
/// - Important: End with exactly one of ``commit()``, ``release()`` or ``discard()``; later
///   calls of ``release()`` and ``discard()`` do nothing.
final class StagingDirectory {
    /// The staging root, open: entry paths (relative, as in the archive) are written below it.
    let descriptor: FileDescriptor
    /// Whether this staging directory was left by an interrupted extraction and reopened.
    let isResumed: Bool
    /// What ``commit()`` does with names that already exist in an existing destination.
    let existingFiles: ExistingFilePolicy
    /// Called by ``commit()`` for each file it moved aside that the archive does not name: a
    /// sidecar of an SQLite database that `overwrite` replaced (`.alreadyExists`, naming it and
    /// where it went).
    let onWarning: (@Sendable (CairnError) -> Void)?

    /// The destination as given, without trailing slashes.
    private let destination: [UInt8]
    private let destinationExists: Bool
    /// The directory that holds the staging directory (the destination, or its parent), open.
    private let container: FileDescriptor
    /// The staging directory itself, open and locked (`flock(2)`) until it is closed.
    private let directory: FileDescriptor
    /// The staging directory's current name in `container` (``commit()`` renames it aside).
    private var name: [UInt8]
    /// The cache of ``parentDirectory(of:)`` (writer threads pass their own).
    private let ownParent = ParentCache()
    private var journalDescriptor: FileDescriptor?
    private var state = State.open

    private enum State { case open, committed, released, discarded }

    /// The journal's, the root's and the staging directory's names, and how many numbered
    /// alternatives are tried: decided with the staging directory's place, in `StagingLocation`.
    static let journalName = StagingLocation.journalName
    static let rootName = StagingLocation.rootName
    private static let insideName = StagingLocation.insideName
    private static let alternativeNames = StagingLocation.alternativeNames

    /// The staging directory an extraction with `options` uses for `destination`: its resume,
    /// existing-file policy, `--force` and warnings, read in this one place for every extraction
    /// (seekable, stream, remote resume).
    ///
    /// - Parameters:
    ///   - destination: the destination directory; it need not exist.
    ///   - options: the extraction's options.
    ///   - resume: overrides `options.resume` (a remote resume always reopens).
    /// - Throws: as ``init(for:resume:existingFiles:discardingInterrupted:onWarning:)``.
    convenience init(for destination: [UInt8], options: ExtractionOptions, resume: Bool? = nil) throws(CairnError) {
        try self.init(
            for: destination, resume: resume ?? options.resume, existingFiles: options.existingFiles,
            discardingInterrupted: options.discardsInterruptedExtraction, onWarning: options.onWarning)
    }

    /// Creates (or, with `resume`, reopens) the staging directory for `destination` (a raw path),
    /// at `StagingLocation.path(for:)`, and locks it.
    ///
    /// - Parameters:
    ///   - destination: the destination directory; it need not exist.
    ///   - resume: reopen the staging directory an interrupted extraction left, if there is one.
    ///   - existingFiles: what ``commit()`` does with names that exist in the destination.
    ///   - discardingInterrupted: remove the staging directory an interrupted extraction left (a
    ///     directory holding a journal, under its lock) and start a new one (`extract --force`);
    ///     nothing in the destination is touched.
    ///   - onWarning: called by ``commit()`` for a file it moved aside (``onWarning``).
    /// - Throws: `.busy` when another process holds the staging directory (a running
    ///   extraction); `.alreadyExists` when the destination exists and is not a directory, or when
    ///   an interrupted extraction's staging directory is there and neither `resume` nor
    ///   `discardingInterrupted` is set; `.notResumable` when that directory has no staging root; `.io`.
    init(
        for destination: [UInt8], resume: Bool = false, existingFiles: ExistingFilePolicy = .refuse,
        discardingInterrupted: Bool = false, onWarning: (@Sendable (CairnError) -> Void)? = nil
    ) throws(CairnError) {
        let trimmed = StagingLocation.trimmed(destination)
        self.destination = trimmed
        self.existingFiles = existingFiles
        self.onWarning = onWarning
        let display = PathBytes.display(trimmed)
        let place = StagingLocation.placement(for: trimmed)
        if let kind = place.destinationKind, kind != .directory {
            throw CairnError(.alreadyExists, "destination exists and is not a directory", path: display)
        }
        destinationExists = place.destinationKind != nil
        // The destination is the caller's choice: a symlink to a directory is followed, as
        // tar -C does. Nothing below it is ever followed.
        let opened =
            destinationExists
            ? try FileDescriptor.open(trimmed, flags: O_RDONLY | O_DIRECTORY)
            : try FileSystem.openDirectory(place.containerPath, in: nil, display: PathBytes.display(place.containerPath))
        container = FileDescriptor(rawValue: opened.rawValue, path: PathBytes.display(place.containerPath))
        let chosen = StagingLocation.stagingName(in: container, base: place.baseName)
        name = chosen
        let stagingDisplay = PathBytes.display(PathBytes.join(place.containerPath, chosen))
        do throws(CairnError) {
            if (try? FileStatus.of(chosen, relativeTo: container)) != nil {
                // A staging directory is there: a running extraction's (locked) or an interrupted one.
                let found = try FileSystem.openDirectory(chosen, in: container, display: stagingDisplay)
                guard flock(found.rawValue, LOCK_EX | LOCK_NB) == 0 else {
                    _ = try? found.close()
                    throw CairnError(
                        .busy, "another cairn process is extracting into \(display); wait for it to finish",
                        path: stagingDisplay)
                }
                if (try? FileStatus.of(Self.journalName, relativeTo: found))?.kind == .regular,
                    Self.journalLines(in: found).count <= 1 || (discardingInterrupted && !resume)
                {
                    // Killed before its first entry verified: it holds nothing worth resuming
                    // (``holdsNothing``); or the caller chose to start over (`--force`). It is
                    // removed, under its lock, and a new one made.
                    FileSystem.removeTree(chosen, in: container)
                    _ = try? found.close()
                    (directory, descriptor, journalDescriptor) = try Self.create(
                        chosen, in: container, display: stagingDisplay, destination: display)
                    isResumed = false
                    return
                }
                directory = found
                guard resume else {
                    _ = try? directory.close()
                    throw CairnError(
                        .alreadyExists,
                        "an interrupted extraction is staged here; continue it with --resume, or start over with --force (which discards it)",
                        path: stagingDisplay)
                }
                guard let root = try? FileSystem.openDirectory(Self.rootName, in: directory, display: stagingDisplay) else {
                    _ = try? directory.close()
                    throw CairnError(
                        .notResumable, "this directory has no Cairn staging root; not resuming into it", path: stagingDisplay)
                }
                descriptor = root
                isResumed = true
            } else {
                (directory, descriptor, journalDescriptor) = try Self.create(
                    chosen, in: container, display: stagingDisplay, destination: display)
                isResumed = false
            }
        } catch {
            _ = try? container.close()
            throw error
        }
    }

    /// Whether nothing verified is staged: the journal holds no line after its first (the line
    /// naming the extraction), so no entry was completed and verified; what the root may hold
    /// (a file cut in the middle) is worth nothing to `--resume`.
    var holdsNothing: Bool {
        guard state == .open else { return false }
        return journal().count <= 1
    }

    /// The journal's complete lines (empty for a new staging directory). A last line without
    /// `\n` (cut by a crash) is left out; at most 64 MiB are read.
    func journal() -> [String] { Self.journalLines(in: directory) }

    /// The complete lines of the journal in the staging directory `directory`.
    private static func journalLines(in directory: FileDescriptor) -> [String] {
        guard let fd = try? FileDescriptor.open(Self.journalName, flags: O_RDONLY, relativeTo: directory) else { return [] }
        defer { _ = try? fd.close() }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while let n = try? chunk.withMutableBytes({ (raw) throws(CairnError) in try fd.read(into: raw) }), n > 0 {
            bytes.append(contentsOf: chunk[0..<n])
            if bytes.count > 64 << 20 { break }
        }
        guard let lastNewline = bytes.lastIndex(of: 0x0A) else { return [] }
        return String(decoding: bytes[..<lastNewline], as: UTF8.self).split(separator: "\n").map(String.init)
    }

    /// How far an interrupted extraction got, from its journal's lines after the first
    /// (`Spec/0003-command-line.md §4.1`): the one reading of the journal's progress lines.
    struct JournalProgress {
        /// Entries of a seekable extraction's plan written: one more than the highest
        /// `done N` (0 for none).
        var done = 0
        /// The last `commit N DIGEST` of a stream extraction: entries committed and the chain
        /// digest there.
        var commit: (entryCount: Int, chainDigest: Digest)?
    }

    /// The progress the journal `lines` (as ``journal()`` returns them) record.
    static func progress(of lines: [String]) -> JournalProgress {
        var progress = JournalProgress()
        for line in lines.dropFirst() {
            let parts = line.split(separator: " ")
            if parts.count == 3, parts[0] == "commit", let count = Int(parts[1]), let digest = Digest(hexString: String(parts[2])) {
                progress.commit = (count, digest)
            }
            if parts.count == 2, parts[0] == "done", let position = Int(parts[1]) { progress.done = max(progress.done, position + 1) }
        }
        return progress
    }

    /// Records that the seekable extraction wrote entry `position` of its plan.
    func journalDone(_ position: Int) throws(CairnError) { try appendJournal("done \(position)") }

    /// Records a stream extraction's commit: `entryCount` entries, and the chain digest there.
    func journalCommit(entryCount: Int, chainDigest: Digest) throws(CairnError) {
        try appendJournal("commit \(entryCount) \(chainDigest.hexString)")
    }

    /// Appends one line (without its `\n`) to the journal, in one `write(2)` with `O_APPEND`.
    ///
    /// If the write fails while nothing is staged yet (a full disk before the first entry), a
    /// staging directory this run created is removed before the error is thrown: it held nothing
    /// worth resuming. Later ``release()`` or ``discard()`` calls then do nothing.
    ///
    /// - Throws: `.io` naming the journal (a full disk, say); `.invalidArgument` after the staging
    ///   directory was committed, released or discarded.
    func appendJournal(_ line: String) throws(CairnError) {
        guard state == .open else { throw closedError }
        do throws(CairnError) {
            if journalDescriptor == nil {
                journalDescriptor = try FileDescriptor.open(
                    Self.journalName, flags: O_WRONLY | O_CREAT | O_APPEND, mode: 0o600, relativeTo: directory)
            }
            try journalDescriptor?.writeAll(Array((line + "\n").utf8))
        } catch {
            if !isResumed, holdsNothing { discard() }
            throw error
        }
    }

    /// Removes `path` (relative to the staging root) if it exists and is not a directory: a file
    /// an interrupted run left half written.
    func removeLeftover(_ path: [UInt8], cache: ParentCache? = nil) throws(CairnError) {
        let parent = try parentDirectory(of: path, cache: cache ?? ownParent)
        let name = PathBytes.lastComponent(path)
        if let status = try? FileStatus.of(name, relativeTo: parent), status.kind != .directory {
            _ = name.withNullTerminated { unlinkat(parent.rawValue, $0, 0) }
        }
    }

    /// Free bytes on the destination's file system (`fstatvfs(2)`, `f_bavail * f_frsize`), or nil
    /// if it cannot be asked.
    var availableBytes: UInt64? {
        var info = statvfs()
        guard fstatvfs(descriptor.rawValue, &info) == 0 else { return nil }
        return UInt64(info.f_bavail).multipliedReportingOverflow(by: UInt64(info.f_frsize)).partialValue
    }

    /// The open directory that will hold `path` (relative to the staging root), creating missing
    /// intermediate directories with mode 0755. Never follows a symlink. The descriptor belongs to
    /// the staging directory (do not close it); it stays valid until the next call.
    func parentDirectory(of path: [UInt8]) throws(CairnError) -> FileDescriptor {
        try parentDirectory(of: path, cache: ownParent)
    }

    /// The directory a writer thread last used (``parentDirectory(of:cache:)``): each thread
    /// that makes files has its own, so threads never share a descriptor they may close.
    final class ParentCache: @unchecked Sendable {
        fileprivate var entry: (path: [UInt8], descriptor: FileDescriptor)?

        /// Closes the cached directory.
        func close() {
            if let entry { _ = try? entry.descriptor.close() }
            entry = nil
        }
    }

    /// ``parentDirectory(of:)`` through `cache` (one per thread). Two threads may create the
    /// same missing intermediate directory at once: the one that finds it made by the other
    /// opens it.
    func parentDirectory(of path: [UInt8], cache: ParentCache) throws(CairnError) -> FileDescriptor {
        let parent = PathValidator.parent(path)
        if parent.isEmpty { return descriptor }
        if let cached = cache.entry, cached.path == parent { return cached.descriptor }
        cache.close()
        var current = descriptor
        var currentPath: [UInt8] = []
        for component in PathValidator.components(parent) {
            currentPath = PathBytes.join(currentPath, component)
            let display = PathBytes.display(currentPath)
            let next: FileDescriptor
            if let existing = try? FileSystem.openDirectory(component, in: current, display: display) {
                next = existing
            } else {
                try FileSystem.makeDirectoryUnlessPresent(component, in: current, mode: 0o755, display: display)
                next = try FileSystem.openDirectory(component, in: current, display: display)
            }
            if current.rawValue != descriptor.rawValue { _ = try? current.close() }
            current = next
        }
        cache.entry = (parent, current)
        return current
    }

    /// Opens the staged file at `path` (relative to the root) for reading, through its parent
    /// directories one at a time, following no symlink, and leaving the cached parent of
    /// ``parentDirectory(of:)`` as it is (a file being written still uses it). The caller closes
    /// the descriptor.
    ///
    /// - Throws: `.io` or `.notFound` naming the path.
    func openStagedFile(_ path: [UInt8]) throws(CairnError) -> FileDescriptor {
        var current = descriptor
        defer { if current.rawValue != descriptor.rawValue { _ = try? current.close() } }
        var currentPath: [UInt8] = []
        for component in PathValidator.components(PathValidator.parent(path)) {
            currentPath = PathBytes.join(currentPath, component)
            let next = try FileSystem.openDirectory(component, in: current, display: PathBytes.display(currentPath))
            if current.rawValue != descriptor.rawValue { _ = try? current.close() }
            current = next
        }
        let fd = try FileDescriptor.open(PathBytes.lastComponent(path), flags: O_RDONLY | O_NOFOLLOW, relativeTo: current)
        return FileDescriptor(rawValue: fd.rawValue, path: PathBytes.display(path))
    }

    /// Throws `.alreadyExists` if `name` (a top-level name of the archive, one path component)
    /// exists in an existing destination and ``existingFiles`` is ``ExistingFilePolicy/refuse``,
    /// so that an extraction that ``commit()`` would refuse fails before writing anything.
    /// Does nothing for a missing destination or another policy. The staging directory's own
    /// name does not count: ``commit()`` moves it aside.
    ///
    /// - Throws: `.alreadyExists` naming `DEST/name`.
    func checkTopLevelName(_ name: [UInt8]) throws(CairnError) {
        guard destinationExists, existingFiles == .refuse,
            let component = PathValidator.components(name).first, component != self.name
        else { return }
        if (try? FileStatus.of(component, relativeTo: container)) != nil {
            throw clashError([Clash(path: component, reason: .exists)], "nothing was extracted")
        }
    }

    /// Moves the result into place (see the type's description), then removes the staging
    /// directory. The journal is removed first, so a kill during the moves leaves nothing that
    /// `--resume` would take for an interrupted extraction. On an error the staging directory is
    /// removed (``discard()``) before it is thrown.
    ///
    /// Into an existing destination, by ``existingFiles``:
    /// - ``ExistingFilePolicy/refuse``: if any top-level name exists, nothing is moved.
    /// - ``ExistingFilePolicy/overwrite``: existing directories are merged into (their own mode
    ///   and mtime are left as they are); an existing file or symlink is replaced by one
    ///   `rename(2)` over it. A directory on one side where the other has a non-directory is an
    ///   error, found before anything is moved; nothing is deleted.
    /// - ``ExistingFilePolicy/keepOld``: merged likewise, existing names are kept and, after
    ///   everything else was moved in, reported as one error.
    /// - ``ExistingFilePolicy/skipOld``: merged likewise, existing names kept silently.
    ///
    /// An SQLite database's files (``StagedGroup``) count as one name for each policy; under
    /// overwrite the replaced database's sidecars are moved aside, each reported to
    /// ``onWarning`` (`Spec/0003-command-line.md §4` item 12).
    ///
    /// - Throws: `.alreadyExists` naming the first clashing path (`DEST/...`), the others in
    ///   ``CairnError/additionalErrors``; `.io` when a rename fails; `.invalidArgument` when
    ///   called twice or after ``release()``/``discard()``.
    func commit() throws(CairnError) {
        guard state == .open else { throw closedError }
        closeCachedParent()
        if let journal = journalDescriptor { _ = try? journal.close() }
        journalDescriptor = nil
        _ = Self.journalName.withNullTerminated { unlinkat(directory.rawValue, $0, 0) }
        let display = PathBytes.display(destination)
        do throws(CairnError) {
            if destinationExists {
                try moveAside()
                try moveItems()
            } else {
                try FileSystem.setPermissions(Self.rootName, in: directory, mode: 0o755 & ~Self.umask, display: display)
                try FileSystem.renameNoReplace(
                    Self.rootName, in: directory, to: PathBytes.lastComponent(destination), in: container, display: display)
            }
        } catch {
            discard()
            throw error
        }
        close(removing: true)
        state = .committed
    }

    /// Closes the staging directory but keeps it and its journal, for `--resume`. A staging
    /// directory this run created that holds nothing (``holdsNothing``: an empty or garbage
    /// stream, a failure before the first entry) is removed instead: there is nothing to resume.
    func release() {
        guard state == .open else { return }
        if !isResumed, holdsNothing {
            discard()
            return
        }
        close(removing: false)
        state = .released
    }

    /// Removes the staging directory and everything in it, read-only directories included
    /// (``FileSystem/removeTree(_:in:)``). The lock is held until it is gone.
    /// Test hook: closes the staging directory without removing it or its journal, as a kill
    /// would leave it.
    package func abandonForTesting() {
        guard state == .open else { return }
        close(removing: false)
        state = .discarded
    }

    func discard() {
        guard state == .open else { return }
        close(removing: true)
        state = .discarded
    }

    // MARK: - Private

    /// The error for a use after commit, release or discard.
    private var closedError: CairnError {
        CairnError(
            .invalidArgument, "the staging directory was already committed or closed",
            path: PathBytes.display(destination))
    }

    /// Closes every descriptor; with `removing`, removes the staging directory first (before the
    /// lock on it is released).
    ///
    /// The lock is released with `flock(LOCK_UN)` before the close: a `flock(2)` lock belongs to
    /// the open file description, which a child forked meanwhile (by any thread of this process)
    /// shares until its `exec`, so a close alone can leave the directory locked for a moment after
    /// this returns.
    private func close(removing: Bool) {
        closeCachedParent()
        if let journal = journalDescriptor { _ = try? journal.close() }
        journalDescriptor = nil
        _ = try? descriptor.close()
        if removing { FileSystem.removeTree(name, in: container) }
        _ = flock(directory.rawValue, LOCK_UN)
        _ = try? directory.close()
        _ = try? container.close()
    }

    private func closeCachedParent() {
        ownParent.close()
    }

    /// Renames the staging directory to a fresh name in the destination that no top-level item
    /// of the root has, so that an archive's own `.cairn-staging` (or any name) can move in.
    private func moveAside() throws(CairnError) {
        let incoming = Set(try DirectoryReader.names(in: descriptor))
        for attempt in 0..<Self.alternativeNames {
            let candidate = Self.insideName + Array(".committing-\(getpid())-\(attempt)".utf8)
            if incoming.contains(candidate) || (try? FileStatus.of(candidate, relativeTo: container)) != nil { continue }
            do {
                try FileSystem.renameNoReplace(
                    name, in: container, to: candidate, in: container,
                    display: PathBytes.display(PathBytes.join(destination, name)))
                name = candidate
                return
            } catch where error.code == .alreadyExists {
                continue
            }
        }
        throw CairnError(
            .alreadyExists, "no free name to move the staging directory aside",
            path: PathBytes.display(PathBytes.join(destination, name)))
    }

    /// Moves the root's items into the existing destination by ``existingFiles``, an SQLite
    /// database's files as one (``StagedGroup``).
    private func moveItems() throws(CairnError) {
        if existingFiles == .refuse {
            let groups = try StagedGroup.groups(in: descriptor, against: container)
            let clashes = groups.flatMap { group in
                group.existing(in: container).map { name in
                    Clash(path: name, reason: group.incoming.contains(name) ? .exists : .companion(of: group.incoming[0]))
                }
            }
            if !clashes.isEmpty { throw clashError(clashes, "nothing was extracted") }
            var moved: [[UInt8]] = []
            for item in groups.flatMap(\.incoming) {
                do {
                    try FileSystem.renameNoReplace(
                        item, in: descriptor, to: item, in: container,
                        display: PathBytes.display(PathBytes.join(destination, item)))
                    moved.append(item)
                } catch {
                    for back in moved.reversed() {
                        try? FileSystem.renameNoReplace(back, in: container, to: back, in: descriptor, display: "")
                    }
                    throw error
                }
            }
            return
        }
        if existingFiles == .overwrite {
            var conflicts: [Clash] = []
            try merge(from: descriptor, into: container, under: [], moving: false, reporting: &conflicts)
            if !conflicts.isEmpty { throw clashError(conflicts, "nothing was extracted") }
        }
        var kept: [Clash] = []
        try merge(from: descriptor, into: container, under: [], moving: true, reporting: &kept)
        if existingFiles == .keepOld, !kept.isEmpty {
            throw clashError(kept, "kept as it was (--keep-old-files); everything else was extracted")
        }
    }

    /// A staged name that the policy does not move in, or refuses, and why.
    private struct Clash {
        /// Relative to the destination.
        var path: [UInt8]
        var reason: Reason

        enum Reason {
            /// The name exists in the destination.
            case exists
            /// A directory on one side, a non-directory on the other (``ExistingFilePolicy/overwrite``).
            case typeClash
            /// The name exists in the destination and is a file of the same database as the
            /// staged name `of` (a relative path).
            case companion(of: [UInt8])
            /// The name is not in the destination, but a file of its database is (`with`, a
            /// relative path), which keeps or refuses the whole database.
            case keptWith([UInt8])
            /// A staged sidecar of a database that exists in the destination (`database`, a
            /// relative path) and that the archive does not hold (``ExistingFilePolicy/overwrite``).
            case sidecarWithout(database: [UInt8])
        }
    }

    /// Walks the staged items of `source` against `target` (the same place in the destination),
    /// by ``StagedGroup``: a database's files go by ``mergeDatabase(_:from:into:under:moving:reporting:)``;
    /// for any other name, a missing name is moved in whole; two directories are merged into
    /// recursively; anything else is a clash, appended to `report` unless the policy is
    /// overwrite and both are non-directories, which are replaced by one rename.
    /// With `moving` false, nothing changes: only the clashes are reported.
    private func merge(
        from source: FileDescriptor, into target: FileDescriptor, under prefix: [UInt8], moving: Bool,
        reporting report: inout [Clash]
    ) throws(CairnError) {
        for group in try StagedGroup.groups(in: source, against: target) {
            if group.database != nil {
                try mergeDatabase(group, from: source, into: target, under: prefix, moving: moving, reporting: &report)
                continue
            }
            let item = group.incoming[0]
            let path = PathBytes.join(prefix, item)
            let display = PathBytes.display(PathBytes.join(destination, path))
            guard let existing = try? FileStatus.of(item, relativeTo: target) else {
                if moving { try FileSystem.renameNoReplace(item, in: source, to: item, in: target, display: display) }
                continue
            }
            let incomingIsDirectory = try FileStatus.of(item, relativeTo: source).kind == .directory
            switch (incomingIsDirectory, existing.kind == .directory) {
            case (true, true):
                let from = try FileSystem.openDirectory(item, in: source, display: display)
                defer { _ = try? from.close() }
                let into = try FileSystem.openDirectory(item, in: target, display: display)
                defer { _ = try? into.close() }
                try merge(from: from, into: into, under: path, moving: moving, reporting: &report)
            case (false, false) where existingFiles == .overwrite:
                if moving { try FileSystem.renameReplacing(item, in: source, to: item, in: target, display: display) }
            case (true, false), (false, true):
                report.append(Clash(path: path, reason: existingFiles == .overwrite ? .typeClash : .exists))
            default:
                report.append(Clash(path: path, reason: .exists))
            }
        }
    }

    /// Merges an SQLite database's staged files (`group`) as one (`Spec/0003-command-line.md §4`
    /// item 12):
    /// - none of its files in `target`: moved in, the main file first;
    /// - keepOld, skipOld: kept whole, every staged file reported as a clash;
    /// - overwrite: every sidecar in `target` is moved aside (``moveSidecarAside(_:in:under:)``),
    ///   then the main file is replaced by one rename and the staged sidecars are moved in. So a
    ///   kill between two renames leaves the old main file alone, the new one alone, or the new
    ///   one with some of its own sidecars: never a main file with another one's log. Staged
    ///   sidecars whose main file exists in `target` but is not staged, and a directory on one
    ///   side where the other has the main file, are clashes.
    /// With `moving` false, nothing changes: only the clashes are reported.
    private func mergeDatabase(
        _ group: StagedGroup, from source: FileDescriptor, into target: FileDescriptor, under prefix: [UInt8], moving: Bool,
        reporting report: inout [Clash]
    ) throws(CairnError) {
        guard let files = group.database else { return }
        let existing = group.existing(in: target)
        let main = PathBytes.join(prefix, files.main)
        func move(_ name: [UInt8], replacing: Bool) throws(CairnError) {
            let display = PathBytes.display(PathBytes.join(destination, PathBytes.join(prefix, name)))
            if replacing {
                try FileSystem.renameReplacing(name, in: source, to: name, in: target, display: display)
            } else {
                try FileSystem.renameNoReplace(name, in: source, to: name, in: target, display: display)
            }
        }
        if existing.isEmpty {
            if moving { for name in group.incoming { try move(name, replacing: false) } }
            return
        }
        guard existingFiles == .overwrite else {
            let first = PathBytes.join(prefix, existing[0])
            for name in group.incoming {
                let path = PathBytes.join(prefix, name)
                report.append(Clash(path: path, reason: existing.contains(name) ? .exists : .keptWith(first)))
            }
            return
        }
        if group.incoming.first != files.main {
            for name in group.incoming {
                report.append(Clash(path: PathBytes.join(prefix, name), reason: .sidecarWithout(database: main)))
            }
            return
        }
        let mainExists = existing.contains(files.main)
        if mainExists {
            let stagedIsDirectory = (try? FileStatus.of(files.main, relativeTo: source))?.kind == .directory
            let existingIsDirectory = (try? FileStatus.of(files.main, relativeTo: target))?.kind == .directory
            if stagedIsDirectory != existingIsDirectory {
                report.append(Clash(path: main, reason: .typeClash))
                return
            }
        }
        guard moving else { return }
        for sidecar in files.sidecars where StagedGroup.exists(sidecar, in: target) {
            try moveSidecarAside(sidecar, in: target, beside: source, under: prefix, database: main)
        }
        try move(files.main, replacing: mainExists)
        for name in group.incoming.dropFirst() { try move(name, replacing: false) }
    }

    /// Renames the sidecar `name` in `target` (the destination's directory `prefix`) to the first
    /// of `NAME.cairn-aside`, `NAME.cairn-aside.1`, ... that neither the destination nor the
    /// staged items (in `source`) have, and reports it through ``onWarning``: it belonged to the database
    /// `database` (a relative path) that is being replaced, and SQLite would read it with the
    /// new one. Nothing is deleted.
    ///
    /// - Throws: `.io` when the rename fails; `.alreadyExists` when no such name is free.
    private func moveSidecarAside(
        _ name: [UInt8], in target: FileDescriptor, beside source: FileDescriptor, under prefix: [UInt8], database: [UInt8]
    ) throws(CairnError) {
        let path = PathBytes.join(destination, PathBytes.join(prefix, name))
        let staged = Set(try DirectoryReader.names(in: source))
        for attempt in 0..<Self.alternativeNames {
            let aside = name + Array(".cairn-aside".utf8) + (attempt == 0 ? [] : Array(".\(attempt)".utf8))
            if staged.contains(aside) { continue }
            do {
                try FileSystem.renameNoReplace(name, in: target, to: aside, in: target, display: PathBytes.display(path))
            } catch where error.code == .alreadyExists {
                continue
            }
            onWarning?(
                CairnError(
                    .alreadyExists,
                    "a file of the SQLite database \(PathBytes.display(PathBytes.join(destination, database))), which the archive "
                        + "puts in place; moved aside to \(PathBytes.display(PathBytes.join(destination, PathBytes.join(prefix, aside)))), "
                        + "so that SQLite does not read it with the extracted database",
                    path: PathBytes.display(path)))
            return
        }
        throw CairnError(.alreadyExists, "no free name to move this SQLite file aside", path: PathBytes.display(path))
    }

    /// `.alreadyExists` naming the first of `clashes` (at least one) as `DEST/path`, the others
    /// as ``CairnError/additionalErrors``; `what` says what became of the extraction.
    private func clashError(_ clashes: [Clash], _ what: String) -> CairnError {
        func display(_ path: [UInt8]) -> String { PathBytes.display(PathBytes.join(destination, path)) }
        var errors = clashes.map { clash in
            let message: String
            switch clash.reason {
            case .exists:
                message = "already exists in the destination; \(what)"
            case .typeClash:
                message = "already exists in the destination; one of the two is a directory and the other is not; \(what)"
            case .companion(let staged):
                message =
                    "already exists in the destination, and it and the archive's \(PathBytes.display(staged)) are files of one "
                    + "SQLite database, extracted together; \(what)"
            case .keptWith(let existing):
                message =
                    "not extracted: it and \(display(existing)), which exists, are files of one SQLite database, kept together; \(what)"
            case .sidecarWithout(let database):
                message =
                    "a file of the SQLite database \(display(database)), which the archive does not hold: a database's files are "
                    + "replaced together; \(what)"
            }
            return CairnError(.alreadyExists, message, path: display(clash.path))
        }
        guard !errors.isEmpty else { return CairnError(.alreadyExists, what, path: PathBytes.display(destination)) }
        var first = errors.removeFirst()
        first.additionalErrors = errors
        return first
    }

    /// Makes a complete, locked staging directory under a temporary name and renames it to
    /// `name`, so no other process sees it half made.
    ///
    /// - Returns: the staging directory, its root and its journal, open.
    private static func create(_ name: [UInt8], in container: FileDescriptor, display: String, destination: String)
        throws(CairnError) -> (FileDescriptor, FileDescriptor, FileDescriptor)
    {
        let temporary = name + Array(".new-\(getpid())".utf8)
        try FileSystem.makeDirectory(temporary, in: container, mode: 0o700, display: display)
        var opened: [FileDescriptor] = []
        do throws(CairnError) {
            let directory = try FileSystem.openDirectory(temporary, in: container, display: display)
            opened.append(directory)
            guard flock(directory.rawValue, LOCK_EX | LOCK_NB) == 0 else {
                throw Errno.current.error("cannot lock the staging directory", path: display)
            }
            try FileSystem.makeDirectory(rootName, in: directory, mode: 0o700, display: display)
            let root = try FileSystem.openDirectory(rootName, in: directory, display: display)
            opened.append(root)
            let journal = try FileDescriptor.open(
                journalName, flags: O_WRONLY | O_CREAT | O_EXCL | O_APPEND, mode: 0o600, relativeTo: directory)
            opened.append(journal)
            do {
                try FileSystem.renameNoReplace(temporary, in: container, to: name, in: container, display: display)
            } catch where error.code == .alreadyExists {
                throw CairnError(
                    .busy, "another cairn process is extracting into \(destination); wait for it to finish", path: display)
            }
            return (directory, root, journal)
        } catch {
            for fd in opened.reversed() { _ = try? fd.close() }
            FileSystem.removeTree(temporary, in: container)
            throw error
        }
    }

    /// The process's file mode creation mask (read by setting and restoring it: call it while no
    /// other thread creates files).
    static var umask: UInt32 {
        let current = Glibc.umask(0o022)
        _ = Glibc.umask(current)
        return UInt32(current)
    }
}
