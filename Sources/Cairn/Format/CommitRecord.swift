/// A commit record (`Spec/0001-container-format.md §10`): "everything before me is complete".
///
/// Payload: `sequence u64 | entryCount u64 | chunkCount u64 | contentBytes u64 |
/// storedBytes u64 | openEntry u64 | openEntryBytes u64 | chainDigest[32]` (88 bytes), so a
/// commit record is always ``framedLength`` bytes long.
package struct CommitRecord: Sendable, Equatable {
    package static let payloadLength = 88
    package static let framedLength = payloadLength + RecordFraming.overhead
    /// `openEntry` when no file is open at this commit.
    package static let noOpenEntry = UInt64.max

    /// 0 for the first commit, then +1.
    package var sequence: UInt64
    /// Entry records before this commit.
    package var entryCount: UInt64
    /// Chunk records before this commit.
    package var chunkCount: UInt64
    /// Sum of file content bytes referenced before this commit (uncompressed).
    package var contentBytes: UInt64
    /// Sum of stored chunk payload bytes before this commit.
    package var storedBytes: UInt64
    /// Index of a file entry whose content continues after this commit, or ``noOpenEntry``.
    package var openEntry: UInt64
    /// Bytes of the open entry's content referenced before this commit.
    package var openEntryBytes: UInt64
    /// `SHA-256(previous chain digest ‖ archive bytes since the previous commit record's start)`.
    package var chainDigest: Digest

    package func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: CommitRecord.payloadLength)
        w.u64(sequence)
        w.u64(entryCount)
        w.u64(chunkCount)
        w.u64(contentBytes)
        w.u64(storedBytes)
        w.u64(openEntry)
        w.u64(openEntryBytes)
        w.digest(chainDigest)
        return w.bytes
    }

    package static func decode(_ r: inout ByteReader) throws(CairnError) -> CommitRecord {
        guard r.remaining == payloadLength else { throw r.error("commit payload is \(r.remaining) bytes, not \(payloadLength)") }
        return CommitRecord(
            sequence: try r.u64("sequence"), entryCount: try r.u64("entry count"), chunkCount: try r.u64("chunk count"),
            contentBytes: try r.u64("content bytes"), storedBytes: try r.u64("stored bytes"),
            openEntry: try r.u64("open entry"), openEntryBytes: try r.u64("open entry bytes"),
            chainDigest: try r.digest("chain digest"))
    }
}

/// Where a commit record ends and the chain digest it carries: a point a sink may cut the
/// archive at (an object store's part boundary, `Spec/0003-command-line.md §3.3`).
package struct CommitPoint: Sendable, Equatable {
    /// The archive offset just after the commit record.
    package var end: UInt64
    /// The chain digest the commit record carries (§10.3).
    package var chainDigest: Digest
}
