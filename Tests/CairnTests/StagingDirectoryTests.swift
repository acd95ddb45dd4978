import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import Cairn

/// What extraction does at the destination (`Spec/0003-command-line.md §4`, `§4.1`, `§11`;
/// issue 8, "Nothing lost by accident"): the staging directory's layout and lock, the
/// existing-file policies of its commit, and that it never stays behind when it holds nothing.
@Suite("Staging directory")
struct StagingDirectoryTests {
    // MARK: - Helpers

    static func bytes(_ path: String) -> [UInt8] { Array(path.utf8) }

    /// The staging root of `destination` as a path, for writing staged items in a test.
    static func stagedRoot(of destination: String) -> String {
        String(decoding: StagingLocation.path(for: bytes(destination)), as: UTF8.self) + "/root"
    }

    static func text(_ path: String) throws -> String {
        String(decoding: try RawFileSystem.contents(ofFile: bytes(path)), as: UTF8.self)
    }

    static func link(_ path: String) throws -> String {
        try FileManager.default.destinationOfSymbolicLink(atPath: path)
    }

    /// The staging directory of `destination` is gone, and nothing like one is beside or inside it.
    static func expectNoStaging(
        _ destination: String, in work: TemporaryDirectory, allowing allowed: Set<String> = [],
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        #expect(!RawFileSystem.exists(StagingLocation.path(for: bytes(destination))), sourceLocation: sourceLocation)
        let beside = try RawFileSystem.names(atPath: bytes(work.path)).map { String(decoding: $0, as: UTF8.self) }
        #expect(beside.allSatisfy { !$0.contains("cairn-staging") }, "\(beside)", sourceLocation: sourceLocation)
        if RawFileSystem.exists(bytes(destination)) {
            let inside = try RawFileSystem.names(atPath: bytes(destination)).map { String(decoding: $0, as: UTF8.self) }
            #expect(
                inside.allSatisfy { !$0.hasPrefix(".cairn-staging.") || allowed.contains($0) }, "\(inside)",
                sourceLocation: sourceLocation)
        }
    }

    /// `destination` without the staging directory's items and the root's mtime (which staging
    /// inside it changes).
    static func snapshotWithoutStaging(_ destination: String) throws -> TreeSnapshot {
        var snapshot = try TreeSnapshot(at: destination)
        snapshot.nodes[[]]?.modificationTime = nil
        snapshot.nodes = snapshot.nodes.filter { !$0.key.starts(with: bytes(".cairn-staging")) }
        return snapshot
    }

    /// The existing destination every policy test starts from.
    static func existingDestination() -> TreeBuilder {
        var tree = TreeBuilder()
        tree.file("keep.txt", Array("old\n".utf8))
        tree.directory("dir", mode: 0o750, mtime: 1_500_000_000_000_000_000)
        tree.file("dir/old.txt", Array("old\n".utf8))
        tree.file("dir/same.txt", Array("old\n".utf8))
        tree.symlink("link", target: "keep.txt")
        return tree
    }

    /// What the archive brings, staged: names that clash with ``existingDestination()`` and new
    /// ones.
    static func incoming() -> TreeBuilder {
        var tree = TreeBuilder()
        tree.directory("dir", mode: 0o700, mtime: 1_600_000_000_000_000_000)
        tree.file("dir/same.txt", Array("new\n".utf8))
        tree.file("dir/new.txt", Array("new\n".utf8))
        tree.file("fresh.txt", Array("new\n".utf8))
        tree.file("keep.txt", Array("new\n".utf8))
        tree.symlink("link", target: "fresh.txt")
        return tree
    }

    /// A destination made from ``existingDestination()`` and a staging directory for it, holding
    /// ``incoming()``, with `policy`.
    static func stage(in work: TemporaryDirectory, policy: ExistingFilePolicy, incoming: TreeBuilder = incoming())
        throws -> (destination: String, staging: StagingDirectory)
    {
        let destination = work.appending("dest")
        try existingDestination().materialize(at: destination)
        let staging = try StagingDirectory(for: bytes(destination), existingFiles: policy)
        try staging.appendJournal("cairn-journal 1 test")
        try incoming.materialize(at: stagedRoot(of: destination))
        return (destination, staging)
    }

    // MARK: - Reserved names

    /// An archive whose top-level names are the staging directory's and the journal's.
    static func reservedNamesArchive(in work: TemporaryDirectory) async throws -> (archive: String, source: String) {
        let source = work.appending("src")
        var tree = TreeBuilder()
        tree.file(".cairn-staging/inside.txt", Array("staged name\n".utf8))
        tree.file(".cairn-staging/root/deeper.txt", Array("deeper\n".utf8))
        tree.file(".cairn-journal", Array("cairn-journal 1 stream\nnot a journal\n".utf8))
        tree.file("root", Array("a file named root\n".utf8))
        tree.file(".cairn-staging.committing-1-0", Array("a name like an aside one\n".utf8))
        try tree.materialize(at: source)
        let archive = work.appending("reserved.cairn")
        let archiver = try await Archiver(writingTo: .file(path: archive))
        for name in [".cairn-staging", ".cairn-journal", "root", ".cairn-staging.committing-1-0"] {
            try await archiver.appendItem(at: URL(fileURLWithPath: source + "/" + name))
        }
        _ = try await archiver.finish()
        return (archive, source)
    }

    @Test("an archive with top-level .cairn-staging, .cairn-journal and root extracts into an existing and a new destination, seekable and streamed")
    func reservedNamesExtract() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-staging-reserved")
        defer { work.remove() }
        let (archive, source) = try await Self.reservedNamesArchive(in: work)
        let expected = try TreeSnapshot(at: source)
        for (index, existing) in [true, false].enumerated() {
            for stream in [false, true] {
                let destination = work.appending("dest-\(index)-\(stream)")
                if existing { try FileManager.default.createDirectory(atPath: destination, withIntermediateDirectories: false) }
                let url = URL(fileURLWithPath: destination)
                if stream {
                    let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: archive))
                    defer { try? handle.close() }
                    _ = try await Extractor.extractStream(from: handle, to: url)
                } else {
                    let extractor = try await Extractor(at: .file(path: archive))
                    defer { extractor.close() }
                    try await extractor.extractAll(to: url)
                }
                var extracted = try TreeSnapshot(at: destination)
                extracted.nodes[[]] = expected.nodes[[]]
                #expect(extracted == expected, "existing \(existing), stream \(stream): \(extracted.diff(expected))")
                try Self.expectNoStaging(destination, in: work, allowing: [".cairn-staging.committing-1-0"])
            }
        }
    }

    @Test("after an archive brought a .cairn-staging directory into DEST, the next extraction stages beside it, resumes there and leaves it alone")
    func stagingNameTakenByData() throws {
        let work = try TemporaryDirectory(prefix: "cairn-staging-taken")
        defer { work.remove() }
        let destination = work.appending("dest")
        var data = TreeBuilder()
        data.file(".cairn-staging/mine.txt", Array("mine\n".utf8))
        try data.materialize(at: destination)
        let before = try TreeSnapshot(at: destination + "/.cairn-staging")

        #expect(StagingLocation.path(for: Self.bytes(destination)) == Self.bytes(destination + "/.cairn-staging.1"))
        let first = try StagingDirectory(for: Self.bytes(destination))
        try first.appendJournal("cairn-journal 1 test")
        var staged = TreeBuilder()
        staged.file("new.txt", Array("new\n".utf8))
        try staged.materialize(at: Self.stagedRoot(of: destination))
        try first.appendJournal("done 0")
        first.release()  // interrupted: kept for --resume, where location(for:) says
        #expect(RawFileSystem.exists(Self.bytes(destination + "/.cairn-staging.1/root/new.txt")))

        let resumed = try StagingDirectory(for: Self.bytes(destination), resume: true)
        #expect(resumed.isResumed)
        #expect(resumed.journal() == ["cairn-journal 1 test", "done 0"])
        try resumed.commit()
        #expect(try Self.text(destination + "/new.txt") == "new\n")
        #expect(try TreeSnapshot(at: destination + "/.cairn-staging") == before)
        #expect(try RawFileSystem.names(atPath: Self.bytes(destination)) == [Self.bytes(".cairn-staging"), Self.bytes("new.txt")])
    }

    // MARK: - Busy or interrupted

    @Test("a staging directory held by a running extraction is busy, with or without --resume; once released it is interrupted")
    func busyBeforeInterrupted() throws {
        let work = try TemporaryDirectory(prefix: "cairn-staging-busy")
        defer { work.remove() }
        for existing in [false, true] {
            let destination = work.appending("dest-\(existing)")
            if existing { try FileManager.default.createDirectory(atPath: destination, withIntermediateDirectories: false) }
            let running = try StagingDirectory(for: Self.bytes(destination))
            try running.appendJournal("cairn-journal 1 test")
            try RawFileSystem.writeFile(Self.bytes(Self.stagedRoot(of: destination) + "/half"), Array("x".utf8))
            // Something verified, so a release keeps it (a staging directory that holds nothing
            // verified is removed instead).
            try running.appendJournal("done 0")
            for resume in [false, true] {
                do {
                    _ = try StagingDirectory(for: Self.bytes(destination), resume: resume)
                    Issue.record("a second staging directory was opened while the first is held")
                } catch {
                    #expect(error.code == .busy, "\(error)")
                    #expect(error.message.contains("another cairn process is extracting into \(destination); wait for it to finish"))
                    #expect(!error.message.contains("--resume") && !error.message.contains("remove"), "\(error)")
                }
            }
            // A child forked by another thread, between its fork and exec, holds a copy of the
            // locked descriptor (close-on-exec acts only at exec), as a duplicate here does: the
            // release must free the lock at once all the same.
            let forkedCopy = try Self.duplicateDescriptor(of: StagingLocation.path(for: Self.bytes(destination)))
            defer { close(forkedCopy) }
            running.release()
            do {
                _ = try StagingDirectory(for: Self.bytes(destination))
                Issue.record("an interrupted staging directory was taken without --resume")
            } catch {
                #expect(error.code == .alreadyExists, "\(error)")
                #expect(error.message.contains("continue it with --resume"), "\(error)")
            }
            let resumed = try StagingDirectory(for: Self.bytes(destination), resume: true)
            #expect(resumed.isResumed)
            #expect(!resumed.holdsNothing)
            resumed.discard()
            try Self.expectNoStaging(destination, in: work)
        }
    }

    /// A duplicate of this process's open descriptor of `path` (found through /proc/self/fd),
    /// sharing its open file description and so its `flock(2)` lock.
    static func duplicateDescriptor(of path: [UInt8]) throws -> Int32 {
        let target = String(decoding: path, as: UTF8.self)
        for name in try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            guard let fd = Int32(name),
                (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(name)")) == target
            else { continue }
            let copy = dup(fd)
            if copy >= 0 { return copy }
        }
        throw FileSystemTestError("no open descriptor of", path: path)
    }

    // MARK: - Nothing left where nothing verified

    @Test("a staging directory left by a kill before its first journal line is replaced, with or without --resume")
    func killedBeforeTheFirstLine() throws {
        let work = try TemporaryDirectory(prefix: "cairn-staging-killed-early")
        defer { work.remove() }
        let destination = work.appending("dest")
        for resume in [false, true] {
            // As a kill leaves it: renamed into place, journal empty, nothing staged, lock gone.
            let killed = try StagingDirectory(for: Self.bytes(destination))
            #expect(killed.journal().isEmpty)
            killed.abandonForTesting()
            #expect(RawFileSystem.exists(StagingLocation.path(for: Self.bytes(destination))))
            let again = try StagingDirectory(for: Self.bytes(destination), resume: resume)
            #expect(!again.isResumed, "nothing verified was staged, so there is nothing to resume")
            try again.appendJournal("cairn-journal 1 stream")
            again.discard()
            try Self.expectNoStaging(destination, in: work)
        }
        // A directory at the staging name that is not a staging directory is never removed.
        let location = StagingLocation.path(for: Self.bytes(destination))
        try FileManager.default.createDirectory(atPath: String(decoding: location, as: UTF8.self), withIntermediateDirectories: true)
        try RawFileSystem.writeFile(location + Array("/keep".utf8), Array("mine".utf8))
        let beside = try StagingDirectory(for: Self.bytes(destination))
        beside.discard()
        #expect(RawFileSystem.exists(location + Array("/keep".utf8)))
    }

    @Test("release() keeps a staging directory that holds something and removes one that holds nothing")
    func releaseOfNothing() throws {
        let work = try TemporaryDirectory(prefix: "cairn-staging-release")
        defer { work.remove() }
        let destination = work.appending("dest")
        let empty = try StagingDirectory(for: Self.bytes(destination))
        try empty.appendJournal("cairn-journal 1 stream")
        #expect(empty.holdsNothing)
        empty.release()
        try Self.expectNoStaging(destination, in: work)

        let journaled = try StagingDirectory(for: Self.bytes(destination))
        try journaled.appendJournal("cairn-journal 1 stream")
        try journaled.appendJournal("commit 1 00")
        #expect(!journaled.holdsNothing)
        journaled.release()
        #expect(RawFileSystem.exists(StagingLocation.path(for: Self.bytes(destination))))
        // A resumed one is never removed by release(), even if it holds nothing new.
        let resumed = try StagingDirectory(for: Self.bytes(destination), resume: true)
        resumed.release()
        resumed.release()  // a second call does nothing
        #expect(RawFileSystem.exists(StagingLocation.path(for: Self.bytes(destination))))
    }

    @Test("an empty or garbage stream on standard input leaves no staging directory and no destination", arguments: [0, 1, 100])
    func emptyOrGarbageStream(length: Int) async throws {
        let work = try TemporaryDirectory(prefix: "cairn-staging-empty-stream")
        defer { work.remove() }
        var generator = SeededGenerator(seed: UInt64(0x5747 + length))
        let input = work.appending("input")
        try RawFileSystem.writeFile(Self.bytes(input), generator.bytes(length))
        for existing in [false, true] {
            let destination = work.appending("dest-\(existing)")
            if existing { try FileManager.default.createDirectory(atPath: destination, withIntermediateDirectories: false) }
            let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: input))
            defer { try? handle.close() }
            await #expect(throws: CairnError.self) {
                _ = try await Extractor.extractStream(from: handle, to: URL(fileURLWithPath: destination))
            }
            #expect(RawFileSystem.exists(Self.bytes(destination)) == existing)
            if existing { #expect(try RawFileSystem.names(atPath: Self.bytes(destination)).isEmpty) }
            try Self.expectNoStaging(destination, in: work)
        }
    }

    /// Whether `unshare -rm` can mount a small tmpfs here (a real full disk for a child).
    static let canMountTmpfs: Bool = {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare") else { return false }
        guard let probe = try? ChildProcess.run(
            URL(fileURLWithPath: "/usr/bin/unshare"),
            ["-rm", "/bin/sh", "-c", "mount -t tmpfs -o size=64k tmpfs /tmp"])
        else { return false }
        return probe.status == 0
    }()

    @Test(
        "a full disk before the first entry (ENOSPC on the journal) leaves no staging directory, seekable and streamed",
        .enabled(if: StagingDirectoryTests.canMountTmpfs, "needs unshare -rm and tmpfs for a real full disk"))
    func fullDiskBeforeFirstEntry() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-staging-enospc")
        defer { work.remove() }
        var tree = TreeBuilder()
        tree.file("a.txt", Array("alpha\n".utf8))
        try tree.materialize(at: work.appending("src"))
        let archive = work.appending("a.cairn")
        _ = try await RoundTrip.archive(path: work.appending("src"), to: archive)
        let cairn = try ChildProcess.cairnExecutable(besideBundle: Bundle.module.bundleURL)
        let mount = work.appending("full")
        try FileManager.default.createDirectory(atPath: mount, withIntermediateDirectories: false)
        // A 64 KiB tmpfs filled to the last block: mkdir and an empty file still work, the
        // journal's first write fails with ENOSPC.
        let script = """
            mount -t tmpfs -o size=64k tmpfs "$1" && cd "$1" || exit 99
            dd if=/dev/zero of=fill bs=4k 2>/dev/null
            "$2" extract -q "$3" -C new; echo "seekable=$?"
            mkdir old; "$2" extract -q "$3" -C old; echo "existing=$?"
            "$2" extract -q - -C streamed < "$3"; echo "stream=$?"
            ls -A; ls -A old
            """
        let result = try ChildProcess.run(
            URL(fileURLWithPath: "/usr/bin/unshare"), ["-rm", "/bin/sh", "-c", script, "sh", mount, cairn.path, archive])
        #expect(result.stdoutLines == ["seekable=1", "existing=1", "stream=1", "fill", "old"], "\(result.stdout) \(result.stderr)")
        #expect(result.stderr.contains("No space left on device"), "\(result.stderr)")
    }

    // MARK: - Read-only directories

    @Test("removeTree removes directories of mode 0o000 and 0o555 and never follows a symlink")
    func removeTreeReadOnly() throws {
        let work = try TemporaryDirectory(prefix: "cairn-staging-remove")
        defer { work.remove() }
        var outside = TreeBuilder()
        outside.file("kept.txt", Array("kept\n".utf8))
        outside.rootMode = 0o555
        try outside.materialize(at: work.appending("outside"))
        var tree = TreeBuilder()
        tree.file("a/b/f.txt", Array("f\n".utf8))
        tree.directory("a/b", mode: 0o000)
        tree.directory("a", mode: 0o555)
        tree.file("c/g.txt", Array("g\n".utf8))
        tree.directory("c", mode: 0o500)
        tree.symlink("a-link", target: work.appending("outside"))
        try tree.materialize(at: work.appending("tree"))
        let directory = try FileSystem.openDirectory(Self.bytes(work.path), in: nil, display: work.path)
        defer { _ = try? directory.close() }
        FileSystem.removeTree(Self.bytes("tree"), in: directory)
        #expect(!RawFileSystem.exists(Self.bytes(work.appending("tree"))))
        let status = try RawFileSystem.status(Self.bytes(work.appending("outside")))
        #expect(status.st_mode & 0o7777 == 0o555, "the symlink's target was not changed")
        #expect(try Self.text(work.appending("outside/kept.txt")) == "kept\n")
        _ = chmod(work.appending("outside"), 0o755)
    }

    /// Runs `cairn` as an ordinary user: itself when the tests are not root, else through
    /// `setpriv` as `nobody` (root would remove a read-only tree anyway, hiding the bug).
    static func runAsUser(_ arguments: [String]) throws -> ChildProcess.Result {
        let cairn = try ChildProcess.cairnExecutable(besideBundle: Bundle.module.bundleURL)
        guard getuid() == 0 else { return try ChildProcess.run(cairn, arguments) }
        return try ChildProcess.run(
            URL(fileURLWithPath: "/usr/bin/setpriv"),
            ["--reuid=65534", "--regid=65534", "--clear-groups", cairn.path] + arguments)
    }

    @Test(
        "an extraction refused at the end as a non-root user removes its staging directory, read-only directories included",
        .enabled(if: getuid() != 0 || FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), "needs setpriv to drop root"))
    func readOnlyTreeRemovedAsUser() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-staging-readonly")
        defer { work.remove() }
        var tree = TreeBuilder()
        tree.file("tree/ro/f.txt", Array("f\n".utf8))
        tree.file("tree/ro/locked/g.txt", Array("g\n".utf8))
        tree.directory("tree/ro/locked", mode: 0o000)
        tree.directory("tree/ro", mode: 0o555)
        try tree.materialize(at: work.appending("src"))
        let archive = work.appending("ro.cairn")
        _ = try await RoundTrip.archive(path: work.appending("src/tree"), to: archive)
        let destination = work.appending("dest")
        var existing = TreeBuilder()
        existing.file("tree", Array("already here\n".utf8))
        try existing.materialize(at: destination)
        if getuid() == 0 {
            for path in [work.path, destination, destination + "/tree", archive] { _ = chown(path, 65534, 65534) }
        }
        let result = try Self.runAsUser(["extract", "-q", archive, "-C", destination])
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains("already exists"), "\(result.stderr)")
        #expect(try RawFileSystem.names(atPath: Self.bytes(destination)) == [Self.bytes("tree")], "no staging directory remains")
        #expect(try Self.text(destination + "/tree") == "already here\n")
    }

    // MARK: - Existing-file policies

    @Test("refuse: one existing top-level name moves nothing; every clash is named; checkTopLevelName fails early")
    func refusePolicy() throws {
        let work = try TemporaryDirectory(prefix: "cairn-staging-refuse")
        defer { work.remove() }
        let (destination, staging) = try Self.stage(in: work, policy: .refuse)
        let before = try TreeSnapshot(at: destination + "/dir")
        #expect(throws: CairnError.self) { try staging.checkTopLevelName(Self.bytes("keep.txt")) }
        try staging.checkTopLevelName(Self.bytes("fresh.txt"))
        try staging.checkTopLevelName(Self.bytes(".cairn-staging"))  // its own name: moved aside at commit
        do {
            try staging.commit()
            Issue.record("commit replaced existing names")
        } catch {
            #expect(error.code == .alreadyExists)
            #expect(error.path == destination + "/dir", "\(error)")
            #expect(error.additionalErrors.map(\.path) == [destination + "/keep.txt", destination + "/link"])
        }
        #expect(!RawFileSystem.exists(Self.bytes(destination + "/fresh.txt")), "nothing was moved")
        #expect(try Self.text(destination + "/keep.txt") == "old\n")
        #expect(try Self.link(destination + "/link") == "keep.txt")
        #expect(try TreeSnapshot(at: destination + "/dir") == before)
        try Self.expectNoStaging(destination, in: work)
    }

    @Test("overwrite: directories merged (their mode and mtime kept), files and symlinks replaced, new names moved in")
    func overwritePolicy() throws {
        let work = try TemporaryDirectory(prefix: "cairn-staging-overwrite")
        defer { work.remove() }
        let (destination, staging) = try Self.stage(in: work, policy: .overwrite)
        let directoryBefore = try RawFileSystem.status(Self.bytes(destination + "/dir"))
        try staging.checkTopLevelName(Self.bytes("keep.txt"))
        try staging.commit()
        #expect(try Self.text(destination + "/keep.txt") == "new\n")
        #expect(try Self.link(destination + "/link") == "fresh.txt")
        #expect(try Self.text(destination + "/fresh.txt") == "new\n")
        #expect(try Self.text(destination + "/dir/same.txt") == "new\n")
        #expect(try Self.text(destination + "/dir/new.txt") == "new\n")
        #expect(try Self.text(destination + "/dir/old.txt") == "old\n")
        let directoryAfter = try RawFileSystem.status(Self.bytes(destination + "/dir"))
        #expect(directoryAfter.st_mode & 0o7777 == 0o750)
        #expect(directoryAfter.st_ino == directoryBefore.st_ino, "merged into, not replaced")
        try Self.expectNoStaging(destination, in: work)
    }

    @Test("overwrite: a directory against a file (either way) is an error naming each, found before anything moves")
    func overwriteTypeClash() throws {
        let work = try TemporaryDirectory(prefix: "cairn-staging-clash")
        defer { work.remove() }
        var incoming = TreeBuilder()
        incoming.file("dir/old.txt/inner.txt", Array("a directory where a file is\n".utf8))
        incoming.file("fresh.txt", Array("new\n".utf8))
        incoming.file("keep.txt", Array("new\n".utf8))
        incoming.file("link/x", Array("a directory where a symlink is\n".utf8))
        let (destination, staging) = try Self.stage(in: work, policy: .overwrite, incoming: incoming)
        var replacedDirectory = TreeBuilder()
        replacedDirectory.file("sub/inside.txt", Array("x\n".utf8))
        try replacedDirectory.materialize(at: destination + "/dir2")
        let before = try Self.snapshotWithoutStaging(destination)
        do {
            try staging.commit()
            Issue.record("a type clash was merged")
        } catch {
            #expect(error.code == .alreadyExists)
            #expect(error.path == destination + "/dir/old.txt", "\(error)")
            #expect(error.additionalErrors.map(\.path) == [destination + "/link"])
        }
        #expect(try Self.snapshotWithoutStaging(destination) == before, "nothing moved, nothing deleted")
        try Self.expectNoStaging(destination, in: work)

        // The other way round: a file in the archive where the destination has a directory.
        let other = work.appending("other")
        try replacedDirectory.materialize(at: other)
        let staging2 = try StagingDirectory(for: Self.bytes(other), existingFiles: .overwrite)
        var file = TreeBuilder()
        file.file("sub", Array("a file where a directory is\n".utf8))
        try file.materialize(at: Self.stagedRoot(of: other))
        #expect(throws: CairnError.self) { try staging2.commit() }
        #expect(try Self.text(other + "/sub/inside.txt") == "x\n")
        try Self.expectNoStaging(other, in: work)
    }

    @Test("keepOld: everything new is moved in, existing names are kept and then reported, each one")
    func keepOldPolicy() throws {
        let work = try TemporaryDirectory(prefix: "cairn-staging-keep")
        defer { work.remove() }
        let (destination, staging) = try Self.stage(in: work, policy: .keepOld)
        try staging.checkTopLevelName(Self.bytes("keep.txt"))
        do {
            try staging.commit()
            Issue.record("keepOld did not report the existing names")
        } catch {
            #expect(error.code == .alreadyExists)
            #expect(error.path == destination + "/dir/same.txt", "\(error)")
            #expect(error.additionalErrors.map(\.path) == [destination + "/keep.txt", destination + "/link"])
        }
        try Self.expectKeptOld(destination)
        try Self.expectNoStaging(destination, in: work)
    }

    @Test("skipOld: as keepOld, silently")
    func skipOldPolicy() throws {
        let work = try TemporaryDirectory(prefix: "cairn-staging-skip")
        defer { work.remove() }
        let (destination, staging) = try Self.stage(in: work, policy: .skipOld)
        try staging.commit()
        try Self.expectKeptOld(destination)
        try Self.expectNoStaging(destination, in: work)
    }

    /// The destination after keepOld or skipOld.
    static func expectKeptOld(_ destination: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(try text(destination + "/keep.txt") == "old\n", sourceLocation: sourceLocation)
        #expect(try link(destination + "/link") == "keep.txt", sourceLocation: sourceLocation)
        #expect(try text(destination + "/dir/same.txt") == "old\n", sourceLocation: sourceLocation)
        #expect(try text(destination + "/dir/old.txt") == "old\n", sourceLocation: sourceLocation)
        #expect(try text(destination + "/dir/new.txt") == "new\n", sourceLocation: sourceLocation)
        #expect(try text(destination + "/fresh.txt") == "new\n", sourceLocation: sourceLocation)
        #expect(try RawFileSystem.status(bytes(destination + "/dir")).st_mode & 0o7777 == 0o750, sourceLocation: sourceLocation)
    }

    @Test("a missing destination: the staging root becomes DEST, whatever the policy")
    func missingDestination() throws {
        let work = try TemporaryDirectory(prefix: "cairn-staging-missing")
        defer { work.remove() }
        for policy in [ExistingFilePolicy.refuse, .overwrite, .keepOld, .skipOld] {
            let destination = work.appending("new-\(policy)")
            let staging = try StagingDirectory(for: Self.bytes(destination), existingFiles: policy)
            try staging.checkTopLevelName(Self.bytes("fresh.txt"))
            try Self.incoming().materialize(at: Self.stagedRoot(of: destination))
            try staging.commit()
            #expect(try Self.text(destination + "/keep.txt") == "new\n")
            #expect(try Self.text(destination + "/dir/new.txt") == "new\n")
            try Self.expectNoStaging(destination, in: work)
            #expect(throws: CairnError.self) { try staging.commit() }
        }
    }
}
