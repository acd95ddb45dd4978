/// The envelope record of an encrypted archive (record type 15, format 3.0,
/// `Spec/0004-trusted-archives.md §6.2`): the clear part that says how the sealed blocks after it
/// are cut and whom their keys are for. It sits at offset 12, right after the prelude, and is the
/// only record of the outer file; everything after it is sealed blocks (``SealedBlockLayout``).
///
/// Payload: `blockSize u32 | archiveID[16] | keyBlock bytes32`, where `keyBlock` is an age v1
/// file whose plaintext is the archive's ``ArchiveSecrets``.
package struct EnvelopeRecord: Sendable, Equatable {
    /// The major version of an encrypted archive's prelude: a 2.x reader refuses it with
    /// `unsupportedVersion` before reading any further byte (`Spec/0001 §2.2`).
    package static let majorVersion: UInt16 = 3
    package static let minorVersion: UInt16 = 0
    /// The plaintext bytes per sealed block the reference writer uses.
    package static let defaultBlockSize: UInt32 = 16384
    /// Block sizes a reader accepts: powers of two from 4 KiB to 1 MiB.
    package static let blockSizes: ClosedRange<UInt32> = 4096...1_048_576
    /// The most bytes of key block a reader accepts.
    package static let maximumKeyBlock = 65536
    package static let archiveIDByteCount = 16

    /// Plaintext bytes per block; every block but the last holds exactly this many.
    package var blockSize: UInt32
    /// Random bytes that name this archive in every block's associated data.
    package var archiveID: [UInt8]
    /// An age v1 file (`Spec/0004 §6.4`) whose plaintext is the ``ArchiveSecrets``.
    package var keyBlock: [UInt8]

    package init(blockSize: UInt32 = defaultBlockSize, archiveID: [UInt8], keyBlock: [UInt8]) {
        self.blockSize = blockSize
        self.archiveID = archiveID
        self.keyBlock = keyBlock
    }

    /// The prelude of an encrypted archive, `89 43 41 49 52 4E 0D 0A 03 00 00 00`.
    package static var prelude: [UInt8] {
        var w = ByteWriter(capacity: Prelude.length)
        w.raw(Prelude.magic)
        w.u16(majorVersion)
        w.u16(minorVersion)
        return w.bytes
    }

    /// The record, framed (`Spec/0001 §3`).
    package func framed() -> [UInt8] {
        var w = ByteWriter(capacity: 24 + keyBlock.count)
        w.u32(blockSize)
        w.raw(archiveID)
        w.u32(UInt32(truncatingIfNeeded: keyBlock.count))
        w.raw(keyBlock)
        var out: [UInt8] = []
        RecordCodec.append(.envelope, payload: w.bytes, to: &out)
        return out
    }

    /// Decodes the payload of the envelope record at `offset`.
    ///
    /// - Throws: `.corrupted` naming the offset for a block size that is not a power of two in
    ///   ``blockSizes``, a key block over ``maximumKeyBlock`` bytes, or bytes after the key block.
    package static func decode(payload: [UInt8], offset: UInt64) throws(CairnError) -> EnvelopeRecord {
        var r = ByteReader(payload, baseOffset: offset + UInt64(RecordFraming.headerLength), what: "envelope record")
        let blockSize = try r.u32("block size")
        guard blockSizes.contains(blockSize), blockSize & (blockSize - 1) == 0 else {
            throw r.error("block size \(blockSize) is not a power of two from 4 KiB to 1 MiB")
        }
        let archiveID = try r.raw(archiveIDByteCount, "archive id")
        let keyBlock = try r.string32("key block", limit: maximumKeyBlock)
        guard r.isAtEnd else { throw r.error("\(r.remaining) bytes after the key block") }
        return EnvelopeRecord(blockSize: blockSize, archiveID: archiveID, keyBlock: keyBlock)
    }
}
