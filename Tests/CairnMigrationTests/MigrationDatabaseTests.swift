import Cairn
import CairnMigration
import CairnMigrationTesting
import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import cairn_migration_sample

/// An import over an app's existing database (issue 23, fault 2): the container's database
/// and its `-wal`, `-journal` and `-shm` are moved aside and put back as one, so the imported
/// database never opens beside the old one's log (`Spec/0003-command-line.md §4` item 12).
@Suite("Migration import over an existing database")
struct MigrationDatabaseTests {
    static let sqlite3 = URL(fileURLWithPath: "/usr/bin/sqlite3")

    static func sqlite(_ database: URL, _ sql: String) throws -> ChildProcess.Result {
        try ChildProcess.run(sqlite3, ["-bail", database.path(percentEncoded: false), sql], timeout: 60)
    }

    /// `PRAGMA integrity_check` and the row count of `t`.
    static func rows(_ database: URL) throws -> [String] {
        let result = try sqlite(database, "PRAGMA integrity_check; SELECT count(*) FROM t;")
        return result.status == 0 ? result.stdoutLines : ["sqlite3 failed: \(result.stderr)"]
    }

    static func contents(_ url: URL) throws -> [UInt8] {
        try RawFileSystem.contents(ofFile: Array(url.path(percentEncoded: false).utf8))
    }

    static func exists(_ url: URL) -> Bool { RawFileSystem.exists(Array(url.path(percentEncoded: false).utf8)) }

    @Test("an import over a database a killed writer left: the imported database has its own rows and no stale -wal or -shm beside it; a failed import puts the old database back with both")
    func importOverStaleDatabase() async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let source = try scratch.source()
        let exported = source.applicationSupportDirectory.appending(path: "app.db")
        let created = try Self.sqlite(
            exported,
            """
            PRAGMA journal_mode=wal;
            CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);
            WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < 1000)
            INSERT INTO t SELECT x, randomblob(100) FROM s;
            """)
        try #require(created.status == 0, "\(created.stderr)")

        // The destination's database: its writer made 200 commits with the autocheckpoint off and
        // was killed with SIGKILL, so they are only in its -wal, beside its -shm.
        let destination = try scratch.populatedDestination()
        let database = destination.applicationSupportDirectory.appending(path: "app.db")
        let writer = try ChildProcess.run(
            URL(fileURLWithPath: FaultProxy.python),
            [
                "-c",
                """
                import os, signal, sqlite3, sys
                con = sqlite3.connect(sys.argv[1], isolation_level=None)
                con.execute("PRAGMA journal_mode=wal")
                con.execute("PRAGMA wal_autocheckpoint=0")
                con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)")
                for k in range(1, 201):
                    con.execute("INSERT INTO t VALUES(?, randomblob(100))", (k,))
                os.kill(os.getpid(), signal.SIGKILL)
                """,
                database.path(percentEncoded: false),
            ], timeout: 60)
        try #require(writer.killed || writer.status != 0, "the writer was killed")
        let support = destination.applicationSupportDirectory
        try #require(try Self.contents(support.appending(path: "app.db-wal")).count > 32 * 4096)
        try #require(Self.exists(support.appending(path: "app.db-shm")))

        // A failed import puts the database back with its -wal and -shm, byte for byte.
        let before = try ContainerSnapshot(of: destination)
        let failing = MigrationTester(
            exporter: NotesExporter(container: source), importer: FailingImporter(container: destination),
            appIdentifier: NotesApp.identifier, container: destination, workDirectory: try scratch.work("failing"))
        let archive = try await failing.exportController.exportResources()
        await #expect(throws: FailingImporter.Failure.self) {
            try await failing.importController.importResources(from: archive.archiveURL)
        }
        let after = try ContainerSnapshot(of: destination)
        #expect(after == before, "\(after.diff(before))")

        // A successful import: the exported database alone, nothing of the old one beside it.
        let tester = notesTester(source: source, destination: destination, work: try scratch.work())
        let second = try await tester.exportController.exportResources()
        try await tester.importController.importResources(from: second.archiveURL)
        #expect(!Self.exists(support.appending(path: "app.db-wal")), "no stale -wal beside the imported database")
        #expect(!Self.exists(support.appending(path: "app.db-shm")), "no stale -shm beside the imported database")
        #expect(try Self.contents(database) == Self.contents(exported))
        #expect(try Self.rows(database) == ["ok", "1000"])
    }
}
