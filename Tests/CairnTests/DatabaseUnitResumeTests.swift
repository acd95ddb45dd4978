import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import Cairn

/// A database and the `-wal` read with it under one read transaction are one unit, also across
/// `create --resume` (issue 23, fault 1; `Spec/0003-command-line.md §3.2` item 6): a resume whose
/// last commit falls after the database's entry but before its `-wal` is complete reads both
/// again; a database's `-shm` is never archived, on a resumed run either.
///
/// The interrupted run is the uninterrupted archive cut right after one of its commits (what a
/// kill at that point leaves, `Spec/0001 §10.4`), so the cut points are exact, not raced.
@Suite("A database and its -wal stay one unit across a resume")
struct DatabaseUnitResumeTests {
    /// Where the interrupted run stopped.
    enum Cut: String, CaseIterable, CustomTestStringConvertible {
        /// Right after the commit that ends the database's entry: its `-wal` not begun.
        case afterDatabase
        /// After a commit inside the database's `-wal`.
        case insideLog
        /// Right after the commit that ends the `-wal`'s entry: the unit is complete.
        case afterLog

        var testDescription: String { rawValue }
    }

    /// The source tree and the uninterrupted archive of it.
    struct Fixture {
        let work: TemporaryDirectory
        let holder: HeldConnection
        let reference: [UInt8]
        /// The end of the commit each cut keeps.
        let cuts: [Cut: UInt64]
        var database: String { work.appending("src/app.db") }

        /// `src/app.db` in WAL mode, held open by a `sqlite3` that wrote 6000 rows (about
        /// 6.5 MiB) into its `-wal` only (no checkpoint), and `src/z.txt`.
        init() async throws {
            work = try TemporaryDirectory()
            try FileManager.default.createDirectory(atPath: work.appending("src"), withIntermediateDirectories: true)
            try LiveDatabaseTests.makeDatabase(work.appending("src/app.db"), journalMode: "wal")
            holder = try HeldConnection(
                work.appending("src/app.db"),
                running: "PRAGMA wal_autocheckpoint=0;\nBEGIN; " + DatabaseUnitResumeTests.insert(1...6000) + " COMMIT;\n")
            try Data("after the database\n".utf8).write(to: work.url(appending: "src/z.txt"))
            try #require(RawFileSystem.exists(Array(work.appending("src/app.db-shm").utf8)))
            let made = try await RoundTrip.archive(
                path: work.appending("src"), to: work.appending("reference.cairn"), configuration: ResumeFixture.configuration)
            reference = made.bytes
            let extractor = try await Extractor(at: .file(path: work.appending("reference.cairn")))
            let paths = extractor.entries.map(\.path)
            extractor.close()
            try #require(paths == ["src", "src/app.db", "src/app.db-wal", "src/z.txt"])
            var cuts: [Cut: UInt64] = [:]
            for (end, commit) in try DatabaseUnitResumeTests.commits(of: work.appending("reference.cairn")) {
                if commit.openEntry == CommitRecord.noOpenEntry, commit.entryCount == 2 { cuts[.afterDatabase] = end }
                if commit.openEntry == 2, cuts[.insideLog] == nil { cuts[.insideLog] = end }
                if commit.openEntry == CommitRecord.noOpenEntry, commit.entryCount == 3 { cuts[.afterLog] = end }
            }
            try #require(cuts.count == 3, "a commit after the database, one inside its -wal and one after it: \(cuts)")
            self.cuts = cuts
        }

        /// Leaves `<target>.partial` as a run killed just after `cut`'s commit leaves it.
        func interrupt(at cut: Cut, target: String) throws {
            let end = Int(try #require(cuts[cut]))
            try RawFileSystem.writeFile(Array((target + ".partial").utf8), Array(reference[0..<(end + 1000)]))
        }

        /// Resumes `target` with the same source.
        func resume(_ target: String) async throws -> ExportProperties {
            let archiver = try Archiver(resuming: .file(path: target), configuration: ResumeFixture.configuration)
            try await archiver.appendItem(at: work.url(appending: "src"))
            return try await archiver.finish()
        }

        func close() {
            holder.close()
            work.remove()
        }
    }

    /// SQL inserting rows `ids` into `t` and setting `c` to the last id.
    static func insert(_ ids: ClosedRange<Int>) -> String {
        "WITH RECURSIVE s(x) AS (SELECT \(ids.lowerBound) UNION ALL SELECT x + 1 FROM s WHERE x < \(ids.upperBound)) "
            + "INSERT INTO t SELECT x, randomblob(1000) FROM s; UPDATE c SET n = \(ids.upperBound);"
    }

    /// Every commit record of the archive at `path`, with the offset just after it.
    static func commits(of path: String) throws -> [(end: UInt64, commit: CommitRecord)] {
        let descriptor = try FileDescriptor.open(path, flags: O_RDONLY)
        defer { _ = try? descriptor.close() }
        let stream = RecordStream(descriptor: descriptor)
        let scanner = ArchiveScanner(keying: nil)
        try scanner.start(stream)
        var found: [(end: UInt64, commit: CommitRecord)] = []
        while let record = try stream.next() {
            try scanner.consume(record) { event in
                if case .commit(let end, let commit) = event { found.append((end, commit)) }
            }
            if scanner.footer != nil { break }
        }
        return found
    }

    @Test("a resume cut after the database, inside its -wal or after it, with nothing changed, gives the uninterrupted archive's bytes (no -shm added)", arguments: Cut.allCases)
    func unchangedResumeIsIdentical(cut: Cut) async throws {
        let fixture = try await Fixture()
        defer { fixture.close() }
        let target = fixture.work.appending("resumed.cairn")
        try fixture.interrupt(at: cut, target: target)
        let properties = try await fixture.resume(target)
        #expect(properties.warnings.isEmpty, "\(properties.warnings)")
        #expect(ResumeFixture.same(try RawFileSystem.contents(ofFile: Array(target.utf8)), fixture.reference))
    }

    @Test(
        "a database checkpointed between the interrupted run and the resume is archived again with its new -wal: the restored copy passes integrity_check and holds one committed state; no -shm is stored",
        arguments: [Cut.afterDatabase, .insideLog])
    func checkpointedDatabaseIsReadAgainWhole(cut: Cut) async throws {
        let fixture = try await Fixture()
        defer { fixture.close() }
        let target = fixture.work.appending("resumed.cairn")
        try fixture.interrupt(at: cut, target: target)
        // The app goes on: more rows, a checkpoint that rewrites the main file and empties the
        // -wal, then a few small commits into the new -wal.
        let moved = try LiveDatabaseTests.sqlite(
            fixture.database, Self.insert(6001...8000) + " PRAGMA wal_checkpoint(TRUNCATE); " + Self.insert(8001...8050))
        try #require(moved.status == 0, "\(moved.stderr)")

        let properties = try await fixture.resume(target)
        #expect(properties.warnings.isEmpty, "\(properties.warnings)")
        let extractor = try await Extractor(at: .file(path: target))
        defer { extractor.close() }
        #expect(extractor.entries.map(\.path) == ["src", "src/app.db", "src/app.db-wal", "src/z.txt"])
        try await extractor.extractAll(to: fixture.work.url(appending: "out"))
        let restored = try LiveDatabaseTests.check(fixture.work.appending("out/src/app.db"))
        #expect(restored.integrity == "ok")
        #expect(restored.rows == 8050 && restored.contiguous, "\(restored)")
    }

    @Test("a unit committed whole is kept whole: after a checkpoint the resume keeps the archived database and -wal (both reported changed), stores no -shm, and the copy is the first state")
    func committedUnitIsKept() async throws {
        let fixture = try await Fixture()
        defer { fixture.close() }
        let target = fixture.work.appending("resumed.cairn")
        try fixture.interrupt(at: .afterLog, target: target)
        let moved = try LiveDatabaseTests.sqlite(
            fixture.database, Self.insert(6001...8000) + " PRAGMA wal_checkpoint(TRUNCATE); " + Self.insert(8001...8050))
        try #require(moved.status == 0, "\(moved.stderr)")

        let properties = try await fixture.resume(target)
        #expect(properties.warnings.map(\.code) == [.sourceChanged, .sourceChanged], "\(properties.warnings)")
        let extractor = try await Extractor(at: .file(path: target))
        defer { extractor.close() }
        #expect(extractor.entries.map(\.path) == ["src", "src/app.db", "src/app.db-wal", "src/z.txt"])
        try await extractor.extractAll(to: fixture.work.url(appending: "out"))
        let restored = try LiveDatabaseTests.check(fixture.work.appending("out/src/app.db"))
        #expect(restored.integrity == "ok")
        #expect(restored.rows == 6000 && restored.contiguous, "\(restored)")
    }

    @Test("a database's -wal or -shm appended after it, on its own or again through its directory, is the same item: nothing added, thrown or warned; a -shm given before its database is left out too")
    func sidecarsGivenExplicitly() async throws {
        let fixture = try await Fixture()
        defer { fixture.close() }
        let archive = fixture.work.appending("explicit.cairn")
        let archiver = try await Archiver(writingTo: .file(path: archive))
        try await archiver.appendItem(at: fixture.work.url(appending: "src/app.db-shm"))
        try await archiver.appendItem(at: fixture.work.url(appending: "src/app.db"))
        try await archiver.appendItem(at: fixture.work.url(appending: "src/app.db-wal"))
        try await archiver.appendItem(at: fixture.work.url(appending: "src/app.db-shm"))
        try await archiver.appendItem(at: fixture.work.url(appending: "src"))
        try await archiver.appendItem(at: fixture.work.url(appending: "src/app.db-wal"), pathInArchive: "src/app.db-wal")
        try await archiver.appendItem(at: fixture.work.url(appending: "src/app.db-shm"), pathInArchive: "src/app.db-shm")
        let properties = try await archiver.finish()
        #expect(properties.warnings.isEmpty, "\(properties.warnings)")
        let extractor = try await Extractor(at: .file(path: archive))
        defer { extractor.close() }
        #expect(extractor.entries.map(\.path) == ["app.db", "app.db-wal", "src", "src/app.db", "src/app.db-wal", "src/z.txt"])
        try await extractor.extractAll(to: fixture.work.url(appending: "out"))
        for copy in ["out/app.db", "out/src/app.db"] {
            let restored = try LiveDatabaseTests.check(fixture.work.appending(copy))
            #expect(restored.integrity == "ok" && restored.rows == 6000 && restored.contiguous, "\(copy): \(restored)")
        }
    }

    @Test("a rollback-journal database committed by the interrupted run gets no -journal a later transaction left beside it: the copy is the archived state")
    func laterJournalIsLeftOut() async throws {
        let work = try TemporaryDirectory()
        defer { work.remove() }
        try FileManager.default.createDirectory(atPath: work.appending("src"), withIntermediateDirectories: true)
        let database = work.appending("src/app.db")
        try LiveDatabaseTests.makeDatabase(database, journalMode: "delete")
        // Over the pack limit, so its entry has a commit of its own.
        try RawFileSystem.writeFile(Array(work.appending("src/b.bin").utf8), ResumeFixture.bytes(100_000, seed: 23))
        try Data("last\n".utf8).write(to: work.url(appending: "src/c.txt"))
        let reference = try await RoundTrip.archive(
            path: work.appending("src"), to: work.appending("reference.cairn"), configuration: ResumeFixture.configuration)
        let cut = try #require(
            try Self.commits(of: work.appending("reference.cairn")).first {
                $0.commit.openEntry == CommitRecord.noOpenEntry && $0.commit.entryCount == 3
            }, "the commit after src/b.bin")
        let target = work.appending("resumed.cairn")
        try RawFileSystem.writeFile(Array((target + ".partial").utf8), Array(reference.bytes[0..<(Int(cut.end) + 1000)]))
        // The app commits, then holds a transaction open: its -journal holds pages of that later state.
        let moved = try LiveDatabaseTests.sqlite(database, Self.insert(1...500))
        try #require(moved.status == 0, "\(moved.stderr)")
        let holder = try HeldConnection(database, running: "BEGIN IMMEDIATE; " + Self.insert(501...600) + "\n")
        defer { holder.close() }
        try #require(RawFileSystem.exists(Array(work.appending("src/app.db-journal").utf8)))

        let archiver = try Archiver(resuming: .file(path: target), configuration: ResumeFixture.configuration)
        try await archiver.appendItem(at: work.url(appending: "src"))
        let properties = try await archiver.finish()
        #expect(properties.warnings.map(\.code) == [.sourceChanged], "\(properties.warnings)")
        let extractor = try await Extractor(at: .file(path: target))
        defer { extractor.close() }
        #expect(extractor.entries.map(\.path) == ["src", "src/app.db", "src/b.bin", "src/c.txt"])
        try await extractor.extractAll(to: work.url(appending: "out"))
        let restored = try LiveDatabaseTests.check(work.appending("out/src/app.db"))
        #expect(restored.integrity == "ok" && restored.rows == 0 && restored.contiguous, "\(restored)")
    }
}
