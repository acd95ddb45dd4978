/// The footer record, the last ``framedLength`` bytes of a complete archive
/// (`Spec/0001-container-format.md §12`).
///
/// Payload: `manifestOffset u64 | manifestLength u64 | manifestDigest[32] | entryCount u64 |
/// chunkCount u64 | referenceCount u64 | contentBytes u64 | storedBytes u64 | chainDigest[32] |
/// endMagic[8] = "CAIRNEND"` (128 bytes).
package struct Footer: Sendable, Equatable {
    package static let payloadLength = 128
    package static let framedLength = payloadLength + RecordFraming.overhead
    package static let endMagic: [UInt8] = Array("CAIRNEND".utf8)

    package var manifestOffset: UInt64
    package var manifestLength: UInt64
    /// SHA-256 over the manifest's bytes.
    package var manifestDigest: Digest
    package var entryCount: UInt64
    package var chunkCount: UInt64
    package var referenceCount: UInt64
    package var contentBytes: UInt64
    package var storedBytes: UInt64
    /// The chain digest extended over everything before the footer (the footer acts as the final commit).
    package var chainDigest: Digest

    package func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: Footer.payloadLength)
        w.u64(manifestOffset)
        w.u64(manifestLength)
        w.digest(manifestDigest)
        w.u64(entryCount)
        w.u64(chunkCount)
        w.u64(referenceCount)
        w.u64(contentBytes)
        w.u64(storedBytes)
        w.digest(chainDigest)
        w.raw(Footer.endMagic)
        return w.bytes
    }

    package static func decode(_ r: inout ByteReader) throws(CairnError) -> Footer {
        guard r.remaining == payloadLength else { throw r.error("footer payload is \(r.remaining) bytes, not \(payloadLength)") }
        let footer = Footer(
            manifestOffset: try r.u64("manifest offset"), manifestLength: try r.u64("manifest length"),
            manifestDigest: try r.digest("manifest digest"), entryCount: try r.u64("entry count"),
            chunkCount: try r.u64("chunk count"), referenceCount: try r.u64("reference count"),
            contentBytes: try r.u64("content bytes"), storedBytes: try r.u64("stored bytes"),
            chainDigest: try r.digest("chain digest"))
        guard try r.raw(8, "end magic") == endMagic else { throw r.error("footer end magic is wrong") }
        return footer
    }
}
