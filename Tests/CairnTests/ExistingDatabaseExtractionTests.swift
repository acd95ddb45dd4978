import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import Cairn

/// Extraction over an existing database (issue 23, fault 2; `Spec/0003-command-line.md §4`
/// item 12): a database and its `-wal`, `-journal` and `-shm` are replaced, kept or refused
/// together, so the destination never holds a database beside another one's log.
///
/// The stale log is made as a crash makes it: a `sqlite3` process commits with the
/// autocheckpoint off and is killed with SIGKILL, leaving its commits only in the `-wal`, and
/// its `-shm`.
@Suite("Extraction over an existing database")
struct ExistingDatabaseExtractionTests {
    static func cairn() throws -> URL { try ChildProcess.cairnExecutable(besideBundle: Bundle.module.bundleURL) }

    static func bytes(_ path: String) -> [UInt8] { Array(path.utf8) }

    /// A WAL database at `path` whose table `t` holds `rows` rows (ids 1...rows), closed: SQLite
    /// checkpointed and removed its `-wal` and `-shm`, so only the main file is left.
    static func makeClosedDatabase(_ path: String, rows: Int) throws {
        let result = try LiveDatabaseTests.sqlite(
            path,
            """
            PRAGMA journal_mode=wal;
            CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);
            WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < \(rows))
            INSERT INTO t SELECT x, randomblob(100) FROM s;
            """)
        try #require(result.status == 0, "\(result.stderr)")
        try #require(!RawFileSystem.exists(bytes(path + "-wal")), "a closed WAL database has no -wal")
    }

    /// A WAL database at `path` as a writer killed with SIGKILL leaves it: an empty table `t` in
    /// the main file, `commits` one-row commits only in the `-wal`, and the `-shm`.
    ///
    /// - Returns: the `-wal`'s and the `-shm`'s bytes.
    static func makeStaleDatabase(_ path: String, commits: Int) throws -> (log: [UInt8], index: [UInt8]) {
        let created = try LiveDatabaseTests.sqlite(path, "PRAGMA journal_mode=wal; CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);")
        try #require(created.status == 0, "\(created.stderr)")
        let inserts = (1...commits).map { "INSERT INTO t VALUES(\($0), randomblob(100));\n" }.joined()
        let writer = try HeldConnection(path, running: "PRAGMA wal_autocheckpoint=0;\n" + inserts)
        writer.kill()
        let log = try RawFileSystem.contents(ofFile: bytes(path + "-wal"))
        let index = try RawFileSystem.contents(ofFile: bytes(path + "-shm"))
        try #require(log.count > 32 * 4096, "the killed writer left its commits in the -wal")
        // What a crash leaves reads as the writer's last commit: SQLite replays the -wal.
        let copy = path + ".probe"
        try RawFileSystem.writeFile(bytes(copy), try RawFileSystem.contents(ofFile: bytes(path)))
        try RawFileSystem.writeFile(bytes(copy + "-wal"), log)
        try #require(try rows(copy) == ["ok", "\(commits)"])
        for name in [copy, copy + "-wal", copy + "-shm"] { unlink(name) }
        return (log, index)
    }

    /// `PRAGMA integrity_check` and the row count of `t`, as `sqlite3` prints them.
    static func rows(_ database: String) throws -> [String] {
        let result = try LiveDatabaseTests.sqlite(database, "PRAGMA integrity_check; SELECT count(*) FROM t;")
        return result.status == 0 ? result.stdoutLines : ["sqlite3 failed: \(result.stderr)"]
    }

    /// `cairn create -q -o ARCHIVE PATHS` in `directory`; the archive's entry paths.
    static func create(_ archive: String, _ paths: [String], in directory: String) throws -> [String] {
        let result = try ChildProcess.run(try cairn(), ["create", "-q", "-o", archive] + paths, in: directory)
        try #require(result.status == 0, "\(result.stderr)")
        let extractor = try Extractor(reader: ArchiveReader(path: archive.hasPrefix("/") ? archive : directory + "/" + archive))
        defer { extractor.close() }
        return extractor.entries.map(\.path)
    }

    /// `cairn extract` of `archive` into `destination`, from the file or as a stream on
    /// standard input.
    static func extract(_ archive: String, into destination: String, _ options: [String], stream: Bool) throws -> ChildProcess.Result {
        try ChildProcess.run(
            try cairn(), ["extract", "-q"] + options + [stream ? "-" : archive, "-C", destination],
            standardInput: stream ? archive : nil)
    }

    @Test(
        "--overwrite over a database a killed writer left: the archive's database replaces it, its stale -wal and -shm are moved aside (not deleted, not replayed), with a warning",
        arguments: [false, true])
    func overwriteMovesStaleSidecarsAside(stream: Bool) throws {
        let work = try TemporaryDirectory(prefix: "cairn-db-overwrite")
        defer { work.remove() }
        try FileManager.default.createDirectory(atPath: work.appending("src"), withIntermediateDirectories: true)
        try Self.makeClosedDatabase(work.appending("src/app.db"), rows: 1000)
        let archive = work.appending("a.cairn")
        #expect(try Self.create(archive, ["src"], in: work.path) == ["src", "src/app.db"])

        let destination = work.appending("dest")
        try FileManager.default.createDirectory(atPath: destination + "/src", withIntermediateDirectories: true)
        let stale = try Self.makeStaleDatabase(destination + "/src/app.db", commits: 200)

        let result = try Self.extract(archive, into: destination, ["--overwrite"], stream: stream)
        #expect(result.status == 3, "\(result.stderr)")
        for sidecar in ["app.db-wal", "app.db-shm"] {
            #expect(
                result.stderr.contains("cairn: warning: \(destination)/src/\(sidecar): "), "\(sidecar) named: \(result.stderr)")
            #expect(!RawFileSystem.exists(Self.bytes(destination + "/src/" + sidecar)), "\(sidecar) is not beside the new database")
        }
        let restored = destination + "/src/app.db"
        #expect(try RawFileSystem.contents(ofFile: Self.bytes(restored)) == RawFileSystem.contents(ofFile: Self.bytes(work.appending("src/app.db"))))
        #expect(try Self.rows(restored) == ["ok", "1000"], "the archive's database, not the stale log replayed into it")
        #expect(try RawFileSystem.contents(ofFile: Self.bytes(restored + "-wal.cairn-aside")) == stale.log, "moved aside, not deleted")
        #expect(try RawFileSystem.contents(ofFile: Self.bytes(restored + "-shm.cairn-aside")) == stale.index, "moved aside, not deleted")
    }

    @Test(
        "--skip-old-files and --keep-old-files keep an existing database with its files: the archive's -wal is not written beside it",
        arguments: [("--skip-old-files", Int32(0)), ("--keep-old-files", 1)])
    func keptDatabaseGetsNoForeignLog(option: String, status: Int32) throws {
        let work = try TemporaryDirectory(prefix: "cairn-db-keep")
        defer { work.remove() }
        try FileManager.default.createDirectory(atPath: work.appending("src"), withIntermediateDirectories: true)
        let source = work.appending("src/app.db")
        try Self.makeClosedDatabase(source, rows: 1000)
        // An open connection keeps the -wal (and its last commit only there): archived beside the database.
        let holder = try HeldConnection(source, running: "PRAGMA wal_autocheckpoint=0;\nINSERT INTO t VALUES(1001, randomblob(100));\n")
        let archive = work.appending("a.cairn")
        let entries = try Self.create(archive, ["src"], in: work.path)
        holder.close()
        #expect(entries == ["src", "src/app.db", "src/app.db-wal"])

        let destination = work.appending("dest")
        try FileManager.default.createDirectory(atPath: destination + "/src", withIntermediateDirectories: true)
        try Self.makeClosedDatabase(destination + "/src/app.db", rows: 5)
        let before = try RawFileSystem.contents(ofFile: Self.bytes(destination + "/src/app.db"))

        let result = try Self.extract(archive, into: destination, [option], stream: false)
        #expect(result.status == status, "\(result.stderr)")
        if option == "--keep-old-files" {
            #expect(result.stderr.contains("\(destination)/src/app.db: already exists"), "\(result.stderr)")
            #expect(result.stderr.contains("\(destination)/src/app.db-wal: "), "\(result.stderr)")
        }
        #expect(!RawFileSystem.exists(Self.bytes(destination + "/src/app.db-wal")), "no foreign -wal beside the kept database")
        #expect(try RawFileSystem.contents(ofFile: Self.bytes(destination + "/src/app.db")) == before)
        #expect(try Self.rows(destination + "/src/app.db") == ["ok", "5"])
    }

    @Test("without a policy, a stale -wal and -shm where the archive puts a database refuse the extraction, naming them; nothing is moved", arguments: [false, true])
    func staleSidecarsRefuse(stream: Bool) throws {
        let work = try TemporaryDirectory(prefix: "cairn-db-refuse")
        defer { work.remove() }
        try FileManager.default.createDirectory(atPath: work.appending("src"), withIntermediateDirectories: true)
        try Self.makeClosedDatabase(work.appending("src/app.db"), rows: 1000)
        let archive = work.appending("a.cairn")
        #expect(try Self.create(archive, ["app.db"], in: work.appending("src")) == ["app.db"])

        // The database file is gone, its killed writer's -wal and -shm are not.
        let destination = work.appending("dest")
        try FileManager.default.createDirectory(atPath: destination, withIntermediateDirectories: true)
        let stale = try Self.makeStaleDatabase(destination + "/app.db", commits: 200)
        unlink(destination + "/app.db")

        let result = try Self.extract(archive, into: destination, [], stream: stream)
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains("\(destination)/app.db-wal: "), "\(result.stderr)")
        #expect(result.stderr.contains("\(destination)/app.db-shm: "), "\(result.stderr)")
        #expect(!RawFileSystem.exists(Self.bytes(destination + "/app.db")), "nothing was moved in")
        #expect(try RawFileSystem.contents(ofFile: Self.bytes(destination + "/app.db-wal")) == stale.log)
        #expect(try RawFileSystem.contents(ofFile: Self.bytes(destination + "/app.db-shm")) == stale.index)
    }

    @Test("a PATH naming a database selects the -wal archived with it: the extracted database opens as the archived state, not an older one")
    func selectedDatabaseBringsItsLog() throws {
        let work = try TemporaryDirectory(prefix: "cairn-db-select")
        defer { work.remove() }
        try FileManager.default.createDirectory(atPath: work.appending("src"), withIntermediateDirectories: true)
        let source = work.appending("src/app.db")
        try Self.makeClosedDatabase(source, rows: 1000)
        try RawFileSystem.writeFile(Self.bytes(work.appending("src/app.dbx")), Array("not a sidecar".utf8))
        // An open connection keeps its last commit only in the -wal, archived beside the database.
        let holder = try HeldConnection(source, running: "PRAGMA wal_autocheckpoint=0;\nINSERT INTO t VALUES(1001, randomblob(100));\n")
        let archive = work.appending("a.cairn")
        let entries = try Self.create(archive, ["src"], in: work.path)
        holder.close()
        #expect(entries == ["src", "src/app.db", "src/app.db-wal", "src/app.dbx"])

        let destination = work.appending("dest")
        let result = try ChildProcess.run(try Self.cairn(), ["extract", "-q", archive, "-C", destination, "src/app.db"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(RawFileSystem.exists(Self.bytes(destination + "/src/app.db-wal")), "the -wal came with its database")
        #expect(!RawFileSystem.exists(Self.bytes(destination + "/src/app.dbx")), "a name that only starts alike is not selected")
        #expect(try Self.rows(destination + "/src/app.db") == ["ok", "1001"], "the archived state, with the commit in the -wal")
    }
}
