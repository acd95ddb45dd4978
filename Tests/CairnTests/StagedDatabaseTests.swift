import CairnTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

@testable import Cairn

/// How the staging directory's commit moves an SQLite database's files into an existing
/// destination (`Spec/0003-command-line.md §4` item 12): together, by ``StagedGroup``. Databases
/// here are files that start with the SQLite header, the rule the archiver uses; the suite
/// "Extraction over an existing database" does the same with real databases and `sqlite3`.
@Suite("Staging directory: SQLite databases")
struct StagedDatabaseTests {
    static func bytes(_ path: String) -> [UInt8] { Array(path.utf8) }

    /// File contents that start like an SQLite database, then `tag`.
    static func database(_ tag: String) -> [UInt8] { SQLiteSnapshot.header + Array(tag.utf8) }

    static func contents(_ path: String) throws -> [UInt8] { try RawFileSystem.contents(ofFile: bytes(path)) }

    /// The warnings a staging directory reported.
    final class Warnings: Sendable {
        let list = Mutex<[CairnError]>([])
        var all: [CairnError] { list.withLock { $0 } }
    }

    /// A staging directory for `existing` (made at `work/dest`), holding `staged`, with `policy`;
    /// its warnings go to the returned box.
    static func stage(_ existing: TreeBuilder, _ staged: TreeBuilder, policy: ExistingFilePolicy, in work: TemporaryDirectory)
        throws -> (destination: String, staging: StagingDirectory, warnings: Warnings)
    {
        let destination = work.appending("dest")
        try existing.materialize(at: destination)
        let warnings = Warnings()
        let staging = try StagingDirectory(for: bytes(destination), existingFiles: policy) { warning in
            warnings.list.withLock { $0.append(warning) }
        }
        try staging.appendJournal("cairn-journal 1 test")
        try staged.materialize(at: String(decoding: StagingLocation.path(for: bytes(destination)), as: UTF8.self) + "/root")
        return (destination, staging, warnings)
    }

    @Test("overwrite: every sidecar of the replaced database is moved aside to a free name, with a warning each; the archive's -wal comes after its main file")
    func overwriteMovesSidecarsAside() throws {
        let work = try TemporaryDirectory(prefix: "cairn-staged-db")
        defer { work.remove() }
        var existing = TreeBuilder()
        existing.file("d/app.db", Self.database("old"))
        existing.file("d/app.db-wal", Array("old log".utf8))
        existing.file("d/app.db-shm", Array("old index".utf8))
        existing.file("d/app.db-shm.cairn-aside", Array("taken".utf8))
        var staged = TreeBuilder()
        staged.file("d/app.db", Self.database("new"))
        staged.file("d/app.db-wal", Array("new log".utf8))
        let (destination, staging, warnings) = try Self.stage(existing, staged, policy: .overwrite, in: work)
        try staging.commit()
        #expect(try Self.contents(destination + "/d/app.db") == Self.database("new"))
        #expect(try Self.contents(destination + "/d/app.db-wal") == Array("new log".utf8))
        #expect(!RawFileSystem.exists(Self.bytes(destination + "/d/app.db-shm")))
        #expect(try Self.contents(destination + "/d/app.db-wal.cairn-aside") == Array("old log".utf8))
        #expect(try Self.contents(destination + "/d/app.db-shm.cairn-aside") == Array("taken".utf8))
        #expect(try Self.contents(destination + "/d/app.db-shm.cairn-aside.1") == Array("old index".utf8))
        let reported = warnings.all
        #expect(reported.map(\.path) == [destination + "/d/app.db-wal", destination + "/d/app.db-shm"], "\(reported)")
        #expect(reported.allSatisfy { $0.code == .alreadyExists && $0.message.contains("app.db-") && $0.message.contains(".cairn-aside") })
    }

    @Test("overwrite: an archive's -wal for a database it does not hold is refused, naming it; nothing moves")
    func overwriteRefusesSidecarWithoutDatabase() throws {
        let work = try TemporaryDirectory(prefix: "cairn-staged-db")
        defer { work.remove() }
        var existing = TreeBuilder()
        existing.file("app.db", Self.database("old"))
        var staged = TreeBuilder()
        staged.file("app.db-wal", Array("a log".utf8))
        staged.file("other.txt", Array("x".utf8))
        let (destination, staging, _) = try Self.stage(existing, staged, policy: .overwrite, in: work)
        do {
            try staging.commit()
            Issue.record("a -wal was written beside a database the archive does not hold")
        } catch {
            #expect(error.code == .alreadyExists)
            #expect(error.path == destination + "/app.db-wal", "\(error)")
            #expect(error.message.contains("\(destination)/app.db, which the archive does not hold"), "\(error)")
        }
        #expect(!RawFileSystem.exists(Self.bytes(destination + "/app.db-wal")))
        #expect(!RawFileSystem.exists(Self.bytes(destination + "/other.txt")), "nothing was moved")
    }

    @Test("keepOld: a database kept by one existing file keeps all of its files; each staged one is reported")
    func keepOldKeepsTheWholeDatabase() throws {
        let work = try TemporaryDirectory(prefix: "cairn-staged-db")
        defer { work.remove() }
        var existing = TreeBuilder()
        existing.file("app.db-journal", Array("a hot journal".utf8))
        var staged = TreeBuilder()
        staged.file("app.db", Self.database("new"))
        staged.file("app.db-wal", Array("new log".utf8))
        staged.file("fresh.txt", Array("new".utf8))
        let (destination, staging, _) = try Self.stage(existing, staged, policy: .keepOld, in: work)
        do {
            try staging.commit()
            Issue.record("keepOld reported nothing")
        } catch {
            #expect(error.code == .alreadyExists)
            #expect(error.path == destination + "/app.db", "\(error)")
            #expect(error.message.contains("\(destination)/app.db-journal, which exists"), "\(error)")
            #expect(error.additionalErrors.map(\.path) == [destination + "/app.db-wal"])
        }
        #expect(!RawFileSystem.exists(Self.bytes(destination + "/app.db")))
        #expect(!RawFileSystem.exists(Self.bytes(destination + "/app.db-wal")))
        #expect(try Self.contents(destination + "/fresh.txt") == Array("new".utf8))
    }

    @Test("names like sidecars beside files that are not databases move as any other name")
    func notADatabase() throws {
        let work = try TemporaryDirectory(prefix: "cairn-staged-db")
        defer { work.remove() }
        var existing = TreeBuilder()
        existing.file("notes", Array("old notes".utf8))
        existing.file("notes-wal", Array("mine".utf8))
        var staged = TreeBuilder()
        staged.file("notes", Array("new notes".utf8))
        let (destination, staging, warnings) = try Self.stage(existing, staged, policy: .overwrite, in: work)
        try staging.commit()
        #expect(try Self.contents(destination + "/notes") == Array("new notes".utf8))
        #expect(try Self.contents(destination + "/notes-wal") == Array("mine".utf8))
        #expect(warnings.all.isEmpty)
    }
}
