/// The names of one SQLite database's files in a directory: the main file `X` and its sidecars
/// `X-wal` (the write-ahead log), `X-journal` (the rollback journal) and `X-shm` (the WAL
/// index), <https://www.sqlite.org/tempfiles.html>.
///
/// The one rule for which names go with a database, used when archiving (the sidecars a
/// snapshot deals with, `Spec/0003-command-line.md §3.2`) and when extracting over an existing
/// database (a database and its sidecars are replaced, kept or refused together, `§4` item 12).
/// Whether `X` is a database at all is ``SQLiteSnapshot/isDatabase(_:)``'s rule.
struct SQLiteFileNames: Hashable {
    /// The main file's name (one path component, or a path in an archive).
    let main: [UInt8]

    static let logSuffix = Array("-wal".utf8)
    static let journalSuffix = Array("-journal".utf8)
    static let indexSuffix = Array("-shm".utf8)
    /// The sidecars' suffixes, in the order ``sidecars`` lists them.
    static let sidecarSuffixes = [logSuffix, journalSuffix, indexSuffix]

    /// The files of the database whose main file is `main`.
    init(main: [UInt8]) { self.main = main }

    /// The files of the database that `sidecar` would belong to: `sidecar` without its sidecar
    /// suffix; nil when it has none (or nothing is left before it).
    init?(sidecar: [UInt8]) {
        guard let suffix = Self.sidecarSuffixes.first(where: { sidecar.count > $0.count && sidecar.ends(with: $0) }) else {
            return nil
        }
        main = Array(sidecar.dropLast(suffix.count))
    }

    /// `X-wal`.
    var log: [UInt8] { main + Self.logSuffix }
    /// `X-journal`.
    var journal: [UInt8] { main + Self.journalSuffix }
    /// `X-shm`.
    var index: [UInt8] { main + Self.indexSuffix }
    /// `X-wal`, `X-journal`, `X-shm`.
    var sidecars: [[UInt8]] { [log, journal, index] }
}

extension Array where Element == UInt8 {
    /// Whether the array's last elements are `suffix`.
    fileprivate func ends(with suffix: [UInt8]) -> Bool {
        count >= suffix.count && self[(count - suffix.count)...].elementsEqual(suffix)
    }
}
