import Cairn
import Foundation

/// The JSON form of a ``MigrationStatus`` (`Sources/CairnMigration`): format 1.
///
/// `{"format":1,"outcome":"success"|"failure"|"none","importID":…,"sourceVersion":…,
/// "sourceApp":…,"date":…,"error":{"kind":"cairn"|"cancellation"|"other","code":…,
/// "message":…,"path":…,"offset":…,"cause":…},"lastSignedImport":{"signer":…,"created":…}}`
///
/// `lastSignedImport` (``SignedImportRecord``) is the rollback guard's memory
/// (`Spec/0004-trusted-archives.md §7.3`): every status written carries it forward, and
/// clearing the status keeps it (outcome `"none"`: no import to report).
struct StoredImportStatus: Codable {
    struct StoredError: Codable {
        var kind: String
        var code: String?
        var message: String
        var path: String?
        var offset: UInt64?
        var cause: String?
    }

    var format = 1
    var outcome: String
    /// The import that wrote it; crash recovery matches it against moved-aside directories.
    var importID: String
    var sourceVersion: String?
    var sourceApp: MigrationAppIdentifier?
    var date: Date
    var error: StoredError?
    /// The last successful import of an archive a trusted key signed (§7.3).
    var lastSignedImport: SignedImportRecord?

    init(_ status: MigrationStatus?, importID: String, request: ResourcesImportRequest?, lastSignedImport: SignedImportRecord?) {
        self.importID = importID
        self.lastSignedImport = lastSignedImport
        self.sourceVersion = request?.sourceVersion
        self.sourceApp = request?.sourceAppIdentifier
        self.date = Date()
        switch status {
        case nil:
            outcome = "none"
        case .success?:
            outcome = "success"
        case .failure(let failure)?:
            outcome = "failure"
            if let cairn = failure as? CairnError {
                error = StoredError(
                    kind: "cairn", code: cairn.code.description, message: cairn.message, path: cairn.path, offset: cairn.offset,
                    cause: cairn.cause)
            } else if failure is CancellationError {
                error = StoredError(kind: "cancellation", message: "the import was cancelled")
            } else {
                error = StoredError(kind: "other", message: String(describing: failure), cause: String(reflecting: type(of: failure)))
            }
        }
    }

    /// The recorded outcome; nil for `"none"` (cleared).
    var status: MigrationStatus? {
        guard outcome != "none" else { return nil }
        guard outcome == "failure" else { return .success }
        guard let error else { return .failure(CairnError(.corrupted, "the import failed (no error was recorded)")) }
        switch error.kind {
        case "cancellation":
            return .failure(CancellationError())
        case "cairn":
            let code = Self.codes.first { $0.description == error.code } ?? .io
            return .failure(CairnError(code, error.message, path: error.path, offset: error.offset, cause: error.cause))
        default:
            return .failure(CairnError(.io, "the importer failed: " + error.message, path: error.path, cause: error.cause))
        }
    }

    private static let codes: [CairnError.Code] = [
        .truncated, .corrupted, .checksumMismatch, .unsupportedVersion, .unsafePath, .limitExceeded, .io, .invalidArgument,
        .notFound, .alreadyExists, .sourceChanged, .unsupportedFileType, .tokenMismatch, .notResumable, .busy, .network,
        .httpStatus, .untrusted,
    ]

    /// Writes it durably into `container`.
    func write(in container: MigrationDataContainer) throws(CairnError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        let data: Data
        do {
            data = try encoder.encode(self)
        } catch {
            throw CairnError(.invalidArgument, "cannot encode the import status: \(error)", path: container.statusFileURL.path)
        }
        try DurableFile.write(Array(data), to: container.statusFileURL.path(percentEncoded: false))
    }

    /// The status recorded in `container`, or nil.
    ///
    /// - Throws: `.corrupted` for a file that does not decode, naming it; as ``DurableFile/read(_:)``.
    static func read(in container: MigrationDataContainer) throws(CairnError) -> StoredImportStatus? {
        let path = container.statusFileURL.path(percentEncoded: false)
        guard let bytes = try DurableFile.read(path) else { return nil }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        do {
            let stored = try decoder.decode(StoredImportStatus.self, from: Data(bytes))
            guard stored.format == 1 else {
                throw CairnError(.unsupportedVersion, "import status format \(stored.format) is not supported", path: path)
            }
            return stored
        } catch let error as CairnError {
            throw error
        } catch {
            throw CairnError(.corrupted, "the import status does not decode", path: path, cause: "\(error)")
        }
    }
}
