/// A fault ``MigrationTester`` injects into an export or an import.
///
/// Each must end in a clean failure: an error (or `CancellationError`), a failure
/// ``CairnMigration/MigrationStatus`` after an import, and a container byte-identical to before.
public struct MigrationFault: Sendable, Equatable, CustomStringConvertible {
    enum Kind: Sendable, Equatable {
        case cancel(afterBytes: Int)
        case diskFull(afterBytes: Int)
        case flipByte(atOffset: UInt64)
    }

    let kind: Kind

    /// Cancels the task once this many bytes went by: archive bytes written, for an export;
    /// content bytes of the entries extracted so far, for an import (checked at each entry).
    public static func cancel(afterBytes count: Int) -> MigrationFault { MigrationFault(kind: .cancel(afterBytes: count)) }
    /// An export whose destination fills up: writes fail with `ENOSPC` once this many archive
    /// bytes were written (the bytes before it reach the file).
    public static func diskFull(afterBytes count: Int) -> MigrationFault { MigrationFault(kind: .diskFull(afterBytes: count)) }
    /// Flips every bit of the archive's byte at `offset` (after an export, before an import).
    public static func flipByte(atOffset offset: UInt64) -> MigrationFault { MigrationFault(kind: .flipByte(atOffset: offset)) }

    /// For test names, for example `cancel after 100 bytes`.
    public var description: String {
        switch kind {
        case .cancel(let n): "cancel after \(n) bytes"
        case .diskFull(let n): "disk full after \(n) bytes"
        case .flipByte(let offset): "flipped byte at offset \(offset)"
        }
    }
}
