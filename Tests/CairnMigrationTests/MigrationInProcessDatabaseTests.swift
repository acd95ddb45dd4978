import CSQLite
import Cairn
import CairnMigration
import CairnMigrationTesting
import CairnTestSupport
import Foundation
import Glibc
import Testing

/// An app that exports its own open database from its own process (the AppMigrationKit case):
/// POSIX record locks belong to the process, so Cairn must never close a descriptor of the
/// database while the app's connection holds locks on it (`ProcessRecordLocks`).
@Suite("An app exporting its own open database in-process")
struct MigrationInProcessDatabaseTests {
    /// The app's own connection, in the test process, through the same libsqlite3 as Cairn.
    final class AppConnection {
        private var handle: OpaquePointer?

        init(_ path: String) throws {
            var opened: OpaquePointer?
            let code = sqlite3_open_v2(path, &opened, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nil)
            handle = opened
            try #require(code == SQLITE_OK, "sqlite3_open_v2 \(path): \(code)")
        }

        func execute(_ sql: String) throws {
            let code = sqlite3_exec(handle, sql, nil, nil, nil)
            try #require(code == SQLITE_OK, "\(sql): \(String(cString: sqlite3_errmsg(handle)))")
        }

        func close() {
            sqlite3_close_v2(handle)
            handle = nil
        }
    }

    /// Appends one directory as `Application Support`.
    struct DirectoryExporter: ResourcesExporting, Sendable {
        var directory: URL
        var resourcesSizeEstimate: Int { 1 << 20 }
        var resourcesVersion: String { "1" }
        var resourcesCompressible: Bool { true }

        nonisolated(nonsending) func exportResources(to archiver: ResourcesArchiver, request: ResourcesExportRequest) async throws {
            try await archiver.appendItem(at: directory, pathInArchive: "Application Support")
        }
    }

    static func sqlite(_ database: String, _ sql: String) throws -> ChildProcess.Result {
        try ChildProcess.run(URL(filePath: "/usr/bin/sqlite3"), ["-bail", database, sql], timeout: 30)
    }

    @Test(
        "an app exporting its own open WAL database in-process keeps its connection's locks: another process's connection does not delete the -wal under it, the app's later commit reaches other processes, and the archive holds the state at export"
    )
    func exportKeepsTheAppsLocks() async throws {
        let scratch = try MigrationScratch()
        defer { scratch.remove() }
        let support = try scratch.work("Application Support")
        let database = support.appending(path: "app.db").path(percentEncoded: false)
        let app = try AppConnection(database)
        var appOpen = true
        defer { if appOpen { app.close() } }
        try app.execute(
            """
            PRAGMA journal_mode=WAL;
            CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);
            WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < 200)
            INSERT INTO t SELECT x, randomblob(500) FROM s;
            """)
        #expect(FileManager.default.fileExists(atPath: database + "-wal"))

        let archive = scratch.url.appending(path: "app.cairn")
        let session = MigrationExportSession(
            exporter: DirectoryExporter(directory: support),
            appIdentifier: MigrationAppIdentifier(platform: .linux, bundleIdentifier: "org.example.in-process"))
        _ = try await session.exportResources(to: archive)
        #expect(ProcessRecordLocks.keptCount >= 1, "the database's descriptor is kept open while the app's connection is")

        // Another process's connection closes: SQLite checkpoints and deletes the -wal on close
        // only when it holds the last connection, which it decides from the file's locks.
        let reader = try Self.sqlite(database, "SELECT count(*) FROM t;")
        #expect(reader.status == 0 && reader.stdoutLines == ["200"], "\(reader.stderr)")
        #expect(FileManager.default.fileExists(atPath: database + "-wal"), "the -wal was deleted while the app had it open")
        try app.execute("INSERT INTO t(v) VALUES (randomblob(500));")
        let later = try Self.sqlite(database, "SELECT count(*) FROM t;")
        #expect(later.stdoutLines == ["201"], "the app's commit after the export is not seen by another process: \(later.stderr)")

        let extracted = scratch.url.appending(path: "extracted", directoryHint: .isDirectory)
        try await Extractor.withExtractor(at: .file(path: archive.path(percentEncoded: false))) { try await $0.extractAll(to: extracted) }
        let copy = extracted.appending(path: "Application Support/app.db").path(percentEncoded: false)
        let restored = try Self.sqlite(copy, "PRAGMA integrity_check; SELECT count(*) FROM t;")
        #expect(restored.stdoutLines == ["ok", "200"], "\(restored.stderr)")

        app.close()
        appOpen = false
        // The next close finds the app's locks gone and closes the kept descriptor.
        ProcessRecordLocks.close(try FileDescriptor.open(database, flags: O_RDONLY))
        #expect(ProcessRecordLocks.keptCount == 0)
    }
}
