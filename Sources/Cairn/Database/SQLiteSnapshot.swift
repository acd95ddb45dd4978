internal import CSQLite
import Glibc

/// A read transaction on an SQLite database, held while the archiver copies the database's
/// files, so that the copy is one committed state (`Spec/0003-command-line.md §3.2`).
///
/// In rollback-journal mode the transaction holds the database's SHARED lock: no writer can
/// commit (a commit needs the EXCLUSIVE lock) until ``end()``. In WAL mode it pins a snapshot:
/// a checkpoint copies into the main file only frames that are in that snapshot (and so in the
/// `-wal`, which is copied after the main file), and the WAL is not restarted over them.
///
/// The connection is read-only (`SQLITE_OPEN_READONLY`): it never rolls a hot journal back,
/// never checkpoints, and never writes the database.
///
/// - Important: ``end()`` must be called exactly once; teardown never depends on `deinit`.
///   The caller must keep its own descriptors of the database file open until after ``end()``:
///   POSIX advisory locks belong to the process, and closing any descriptor of the file drops
///   every lock the process holds on it, this connection's SHARED lock included
///   (<https://www.sqlite.org/howtocorrupt.html> §2.2). It closes them with
///   ``ProcessRecordLocks/close(_:)``, which keeps a descriptor open while the process still
///   holds a lock on the file (an app's own connection, when the app exports in-process).
final class SQLiteSnapshot {
    /// The 16 bytes every SQLite 3 database file begins with ("SQLite format 3" and a NUL).
    static let header: [UInt8] = Array("SQLite format 3".utf8) + [0]

    /// How long ``begin(path:display:timeoutMilliseconds:)`` waits for a lock by default: 3 s.
    static let defaultTimeoutMilliseconds: Int32 = 3000

    private var connection: OpaquePointer?
    /// Whether the database is in WAL mode (`PRAGMA journal_mode` answered `wal`).
    let isWriteAheadLog: Bool

    private init(connection: OpaquePointer, isWriteAheadLog: Bool) {
        self.connection = connection
        self.isWriteAheadLog = isWriteAheadLog
    }

    /// Whether a file whose first bytes are `firstBytes` is an SQLite database: they begin with
    /// ``header`` (fewer bytes than the header is no database). The one rule; callers that
    /// already read the start of the file pass those bytes instead of reading it again.
    static func isDatabase(firstBytes: UnsafeRawBufferPointer) -> Bool {
        firstBytes.count >= header.count && header.withUnsafeBytes { header in firstBytes[0..<header.count].elementsEqual(header) }
    }

    /// ``isDatabase(firstBytes:)`` on `file`'s first bytes, read with `pread(2)` at offset 0 (a
    /// short or failed read is not a database).
    static func isDatabase(_ file: FileDescriptor) -> Bool {
        withUnsafeTemporaryAllocation(byteCount: header.count, alignment: 1) { raw in
            let count = (try? file.read(fromAbsoluteOffset: 0, into: raw)) ?? 0
            return isDatabase(firstBytes: UnsafeRawBufferPointer(rebasing: raw[0..<count]))
        }
    }

    /// ``isDatabase(_:)`` on the regular file `name` in `directory` (nil: the working directory),
    /// opened for this with `O_NOFOLLOW | O_NONBLOCK`, so neither a symlink nor a FIFO put there
    /// is followed or waited on. The one way the archiver and the extraction probe a name; the
    /// descriptor is closed through ``ProcessRecordLocks`` (an app exporting or importing in-process
    /// may hold SQLite locks on the file that a plain close would drop).
    static func isDatabase(named name: [UInt8], in directory: FileDescriptor?) -> Bool {
        guard let file = try? FileDescriptor.open(name, flags: O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK, relativeTo: directory)
        else { return false }
        defer { ProcessRecordLocks.close(file) }
        guard let status = try? file.status(), status.kind == .regular, status.size >= UInt64(header.count) else { return false }
        return isDatabase(file)
    }

    /// Whether `file`'s header says WAL mode: file format versions (bytes 18 and 19) both 2.
    static func isWriteAheadLogDatabase(_ file: FileDescriptor) -> Bool {
        var bytes: [UInt8] = [0, 0]
        let count = bytes.withUnsafeMutableBytes { raw in (try? file.read(fromAbsoluteOffset: 18, into: raw)) ?? 0 }
        return count == 2 && bytes == [2, 2]
    }

    /// Opens `path` read-only with libsqlite3 and starts a read transaction
    /// (`BEGIN; SELECT count(*) FROM sqlite_master;`), waiting up to `timeoutMilliseconds` for a
    /// lock (`sqlite3_busy_timeout`).
    ///
    /// - Parameters:
    ///   - path: the database's path, raw bytes, as the archiver reached it.
    ///   - display: the path for messages.
    /// - Returns: the held snapshot, or the reason it could not be taken: `.busy` when the
    ///   database stayed locked (another connection holds an EXCLUSIVE or PENDING lock, e.g.
    ///   `PRAGMA locking_mode=EXCLUSIVE`), `.io` for anything else libsqlite3 refused (a hot
    ///   journal a read-only connection may not roll back, ...), `.corrupted` for a file SQLite
    ///   cannot read as a database (`SQLITE_CORRUPT`, `SQLITE_NOTADB`: it only starts like one),
    ///   each naming `display` and SQLite's message.
    static func begin(path: [UInt8], display: String, timeoutMilliseconds: Int32) -> Result<SQLiteSnapshot, CairnError> {
        var handle: OpaquePointer?
        let opened = path.withNullTerminated { sqlite3_open_v2($0, &handle, SQLITE_OPEN_READONLY | SQLITE_OPEN_FULLMUTEX, nil) }
        guard let handle else {
            return .failure(CairnError(.io, "SQLite could not open it (code \(opened))", path: display))
        }
        func failure(_ code: Int32, _ step: String) -> Result<SQLiteSnapshot, CairnError> {
            let message = String(cString: sqlite3_errmsg(handle))
            sqlite3_close_v2(handle)
            let busy = code & 0xFF == SQLITE_BUSY || code & 0xFF == SQLITE_LOCKED
            if code & 0xFF == SQLITE_CORRUPT || code & 0xFF == SQLITE_NOTADB {
                // Not a database SQLite can read: there is no committed state to keep whole.
                return .failure(CairnError(.corrupted, "not a database SQLite can read (\(message))", path: display))
            }
            return .failure(
                CairnError(
                    busy ? .busy : .io,
                    busy
                        ? "SQLite database stayed locked for \(timeoutMilliseconds) ms (\(message)); archived as a plain file, it may not be consistent"
                        : "SQLite \(step) failed (\(message)); archived as a plain file, it may not be consistent",
                    path: display))
        }
        guard opened == SQLITE_OK else { return failure(opened, "open") }
        sqlite3_extended_result_codes(handle, 1)
        sqlite3_busy_timeout(handle, timeoutMilliseconds)
        // BEGIN alone takes no lock (a deferred transaction); the first read takes SHARED (or a
        // WAL read mark) and keeps it until the transaction ends.
        let started = sqlite3_exec(handle, "BEGIN; SELECT count(*) FROM sqlite_master;", nil, nil, nil)
        guard started == SQLITE_OK else { return failure(started, "read transaction") }
        var statement: OpaquePointer?
        let prepared = sqlite3_prepare_v2(handle, "PRAGMA journal_mode", -1, &statement, nil)
        guard prepared == SQLITE_OK, let statement else { return failure(prepared, "journal mode query") }
        var mode = ""
        if sqlite3_step(statement) == SQLITE_ROW, let text = sqlite3_column_text(statement, 0) {
            mode = String(cString: text)
        }
        sqlite3_finalize(statement)
        return .success(SQLiteSnapshot(connection: handle, isWriteAheadLog: mode.lowercased() == "wal"))
    }

    /// Ends the read transaction and closes the connection, releasing its lock or read mark.
    /// Calling it again does nothing.
    func end() {
        guard let connection else { return }
        self.connection = nil
        sqlite3_exec(connection, "COMMIT", nil, nil, nil)
        sqlite3_close_v2(connection)
    }
}
