import Cairn
import CairnMigrationTesting
import CairnTestSupport
import Foundation
import Testing

/// The migration test support's public API under the throws rule (`Cairn.docc/Errors.md`):
/// synchronous calls throw typed `CairnError` naming the file.
@Suite("Migration public API")
struct MigrationPublicAPITests {
    @Test("MigrationFaults.flipByte throws typed CairnError naming the file, Foundation's errors included")
    func flipByteThrowsCairnError() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let missing = directory.url(appending: "missing")
        do {
            try MigrationFaults.flipByte(at: 0, in: missing)
            Issue.record("flipping a byte of a missing file succeeded")
        } catch {
            #expect(error.code == .io)
            #expect(error.path == missing.path)
        }
        let short = directory.url(appending: "short")
        try Data([1, 2, 3]).write(to: short)
        let error = try #require(throws: CairnError.self) { try MigrationFaults.flipByte(at: 3, in: short) }
        #expect(error.code == .invalidArgument && error.path == short.path)
        try MigrationFaults.flipByte(at: 1, in: short)
        #expect(try Data(contentsOf: short) == Data([1, ~2, 3]))
    }
}
