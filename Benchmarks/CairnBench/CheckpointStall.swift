import CSQLite
import Foundation
import Glibc

/// Issue 23's checkpoint case (`--only checkpoint`): how long an app's own checkpoint waits
/// while `cairn create` holds the read transaction of its WAL database (`Spec/0003 §3.2`
/// item 9).
///
/// The harness plays the app: it keeps one connection open on `<work>/checkpoint/data/app.db`
/// (WAL mode, automatic checkpoints off, so every commit stays in the `-wal`), grows the `-wal`
/// to about `--checkpoint-mib` MiB, starts `cairn create` on the directory, waits until cairn's
/// connection holds its read lock (a POSIX lock of cairn's pid on the database in `/proc/locks`),
/// then checkpoints with a 600 s busy timeout and times the call. Each round measures
/// `wal_checkpoint(TRUNCATE)` and `(PASSIVE)`, each alone (a fresh database, no export) and
/// during an export.
struct CheckpointStallBenchmark {
    var cairn: String
    var work: String
    var mib: Int
    var runs: Int

    /// One checkpoint, timed.
    struct Measurement {
        /// Seconds the `sqlite3_wal_checkpoint_v2` call took.
        var seconds: Double
        /// Its result code (0 `SQLITE_OK`, 5 `SQLITE_BUSY`).
        var code: Int32
        /// Frames in the `-wal` and frames checkpointed, as the call reported them.
        var logFrames: Int32
        var checkpointedFrames: Int32
    }

    struct Row {
        var mode: String
        var walBytes: UInt64
        var alone: [Measurement]
        var duringExport: [Measurement]
        /// Wall seconds of each `cairn create`, start to exit.
        var exportSeconds: [Double]
    }

    func run() throws -> [Row] {
        let directory = work + "/checkpoint"
        var rows: [Row] = []
        for (name, mode) in [("TRUNCATE", SQLITE_CHECKPOINT_TRUNCATE), ("PASSIVE", SQLITE_CHECKPOINT_PASSIVE)] {
            var row = Row(mode: name, walBytes: 0, alone: [], duringExport: [], exportSeconds: [])
            for round in 1...runs {
                log("checkpoint \(name), round \(round)/\(runs): alone")
                var app = try App(directory: directory, mib: mib)
                row.walBytes = app.walBytes
                row.alone.append(app.checkpoint(mode))
                app.close()

                log("checkpoint \(name), round \(round)/\(runs): during cairn create")
                let (measurement, seconds) = try duringExport(mode, directory: directory)
                row.duringExport.append(measurement)
                row.exportSeconds.append(seconds)
            }
            rows.append(row)
        }
        return rows
    }

    /// The checkpoint during a `cairn create` of a fresh database, and the export's wall seconds.
    /// A small database can be read before its read lock is seen; then the export runs again, up
    /// to 5 times.
    private func duringExport(_ mode: Int32, directory: String) throws -> (Measurement, Double) {
        for attempt in 1...5 {
            var app = try App(directory: directory, mib: mib)
            defer { app.close() }
            let archive = directory + "/app.cairn"
            unlink(archive)
            let started = monotonicSeconds()
            let export = Process()
            export.executableURL = URL(fileURLWithPath: cairn)
            export.arguments = ["create", "--quiet", "-o", archive, directory + "/data"]
            try export.run()
            let seen = app.waitForReadLock(of: export)
            let measurement = seen ? app.checkpoint(mode) : nil
            export.waitUntilExit()
            let ended = monotonicSeconds()
            guard export.terminationStatus == 0 else { throw BenchError("cairn create exited with status \(export.terminationStatus)") }
            if let measurement { return (measurement, ended - started) }
            log("cairn create ended before its read lock was seen (attempt \(attempt)); again")
        }
        throw BenchError("cairn create ended before its read lock was seen, 5 times: use a larger --checkpoint-mib")
    }

    /// The app's connection on a fresh database whose `-wal` holds about `mib` MiB.
    struct App {
        private var handle: OpaquePointer?
        let database: String
        let walBytes: UInt64

        init(directory: String, mib: Int) throws {
            try? FileManager.default.removeItem(atPath: directory + "/data")
            try FileManager.default.createDirectory(atPath: directory + "/data", withIntermediateDirectories: true)
            database = directory + "/data/app.db"
            var opened: OpaquePointer?
            guard sqlite3_open_v2(database, &opened, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil) == SQLITE_OK else {
                sqlite3_close_v2(opened)
                throw BenchError("sqlite3_open_v2 failed for \(database)")
            }
            handle = opened
            let rows = max(1, mib * 256)  // 4000-byte blobs, about 256 per MiB
            try Self.execute(
                opened,
                """
                PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;
                CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);
                WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < \(rows))
                INSERT INTO t SELECT x, randomblob(4000) FROM s;
                """)
            sqlite3_busy_timeout(opened, 600_000)
            var info = stat()
            walBytes = stat(database + "-wal", &info) == 0 ? UInt64(info.st_size) : 0
        }

        static func execute(_ handle: OpaquePointer?, _ sql: String) throws {
            guard sqlite3_exec(handle, sql, nil, nil, nil) == SQLITE_OK else {
                throw BenchError("SQLite: \(String(cString: sqlite3_errmsg(handle)))")
            }
        }

        func checkpoint(_ mode: Int32) -> Measurement {
            var logFrames: Int32 = 0
            var checkpointed: Int32 = 0
            let start = monotonicSeconds()
            let code = sqlite3_wal_checkpoint_v2(handle, nil, mode, &logFrames, &checkpointed)
            return Measurement(seconds: monotonicSeconds() - start, code: code, logFrames: logFrames, checkpointedFrames: checkpointed)
        }

        /// Waits until `/proc/locks` lists a POSIX lock of `process` on the database (its read
        /// lock); false when the process ends first.
        func waitForReadLock(of process: Process) -> Bool {
            var info = stat()
            guard stat(database, &info) == 0 else { return false }
            let inode = ":\(info.st_ino) "
            let pid = " \(process.processIdentifier) "
            while process.isRunning {
                let table = (try? String(contentsOfFile: "/proc/locks", encoding: .utf8)) ?? ""
                if table.split(separator: "\n").contains(where: { $0.contains(" POSIX ") && $0.contains(pid) && $0.contains(inode) }) {
                    return true
                }
                usleep(500)
            }
            return false
        }

        mutating func close() {
            sqlite3_close_v2(handle)
            handle = nil
        }
    }
}

extension Report {
    /// The Markdown section of ``CheckpointStallBenchmark``'s rows.
    func checkpointSection(_ rows: [CheckpointStallBenchmark.Row]) -> [String] {
        var lines = [
            "## An app's checkpoint during an export (issue 23)", "",
            "The app's connection checkpoints its WAL database while `cairn create` holds the database's read transaction "
                + "(Spec/0003 §3.2 item 9); busy timeout 600 s. Medians of \(runs) rounds; export = `cairn create` start to exit.", "",
            "| mode | -wal | checkpoint alone | during the export | export | result during the export (log / checkpointed frames) |",
            "|---|---|---|---|---|---|",
        ]
        func median(_ values: [Double]) -> String {
            let sorted = values.sorted()
            return sorted.isEmpty ? "–" : String(format: "%.3f s", sorted[sorted.count / 2])
        }
        for row in rows {
            let last = row.duringExport.last
            let result = last.map { "\($0.code == 0 ? "SQLITE_OK" : "code \($0.code)") (\($0.logFrames) / \($0.checkpointedFrames))" } ?? "–"
            lines.append(
                "| \(row.mode) | \(String(format: "%.1f MiB", Double(row.walBytes) / 1_048_576)) | \(median(row.alone.map(\.seconds))) | "
                    + "\(median(row.duringExport.map(\.seconds))) | \(median(row.exportSeconds)) | \(result) |")
        }
        lines.append("")
        return lines
    }
}
