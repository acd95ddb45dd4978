/// The clear start of an encrypted archive, read and opened: its envelope record
/// (`Spec/0004-trusted-archives.md §6.2`), where its sealed blocks begin, and the keys its key
/// block held for one of the reader's identities.
///
/// One parser reads the envelope for the seekable reader (``SealedArchiveSource``) and the
/// stream reader (``SealedBlockStream``).
package struct OpenedEnvelope: Sendable {
    package let record: EnvelopeRecord
    /// The outer offset of block 0: the prelude's and the envelope record's length.
    package let dataStart: UInt64
    /// The outer bytes before block 0, as read.
    package let prefix: [UInt8]
    package let secrets: ArchiveSecrets

    /// Opens the key block of `record` with `openKeyBlock` (an identity's decryption).
    ///
    /// - Throws: what `openKeyBlock` throws, its offset made an offset in the archive: the age
    ///   layer names offsets in the key block (`Spec/0004 §6.4.1`), which are moved by where the
    ///   key block starts; an error without one (no identity matches) names the key block's
    ///   first byte. Both readers open the envelope here, so both name the same offset.
    package init(
        record: EnvelopeRecord, prefix: [UInt8], openKeyBlock: (EnvelopeRecord) throws(CairnError) -> [UInt8]
    ) throws(CairnError) {
        self.record = record
        self.prefix = prefix
        dataStart = UInt64(prefix.count)
        // The key block is the end of the envelope's payload, before the record's CRC.
        let keyBlockStart = dataStart - UInt64(RecordFraming.trailerLength) - UInt64(record.keyBlock.count)
        do throws(CairnError) {
            secrets = try ArchiveSecrets.decode(try openKeyBlock(record))
        } catch {
            var moved = error
            moved.offset = keyBlockStart + (error.offset ?? 0)
            throw moved
        }
    }

    /// Whether `prelude` (the first 12 bytes of a file) is an encrypted archive's.
    package static func isSealed(prelude: [UInt8]) -> Bool {
        prelude.count >= Prelude.length && Array(prelude[0..<8]) == Prelude.magic
            && (UInt16(prelude[8]) | UInt16(prelude[9]) << 8) == EnvelopeRecord.majorVersion
    }

    /// Reads the prelude and the envelope record at the start of `source`, as
    /// ``readRecord(name:_:)``.
    package static func readRecord(from source: any ArchiveSource) throws(CairnError) -> (record: EnvelopeRecord, prefix: [UInt8]) {
        var position: UInt64 = 0
        return try readRecord(name: source.name) { (count) throws(CairnError) in
            var bytes = [UInt8](repeating: 0, count: count)
            let got = try bytes.withMutableBytes { (raw) throws(CairnError) in try source.read(fromAbsoluteOffset: position, into: raw) }
            position += UInt64(got)
            return Array(bytes[0..<got])
        }
    }

    /// The little-endian u32 length of a record header (`Spec/0001-container-format.md §3`).
    private static func declaredLength(_ header: [UInt8]) -> UInt32 {
        header.count < 8 ? 0 : UInt32(header[4]) | UInt32(header[5]) << 8 | UInt32(header[6]) << 16 | UInt32(header[7]) << 24
    }

    /// Reads the prelude and the envelope record through `read`, which returns up to the number of
    /// bytes asked for (fewer only at the end of the input).
    ///
    /// - Returns: the record and every byte read (the outer bytes before block 0).
    /// - Throws: `.untrusted` for an archive that is not encrypted (identities were given, so it
    ///   must be: a plain archive is what stripping the encryption would leave);
    ///   `.unsupportedVersion` for an encrypted format other than 3.x; `.truncated`,
    ///   `.corrupted`, `.checksumMismatch`, `.limitExceeded` for a bad record, naming its offset.
    package static func readRecord(
        name: String, _ read: (Int) throws(CairnError) -> [UInt8]
    ) throws(CairnError) -> (record: EnvelopeRecord, prefix: [UInt8]) {
        var prefix = try read(Prelude.length)
        do throws(CairnError) {
            // A plain archive (rule 2) and another major are refused by the one prelude check.
            _ = try Prelude.parse(prefix, sealed: true)
            let headerBytes = try read(RecordFraming.headerLength)
            prefix += headerBytes
            let offset = UInt64(Prelude.length)
            let limit = 64 + EnvelopeRecord.maximumKeyBlock
            let header: RecordCodec.Header
            do throws(CairnError) {
                header = try headerBytes.withBytes { (raw) throws(CairnError) in try RecordCodec.parseHeader(raw, offset: offset) }
            } catch where error.code == .limitExceeded {
                // Over any record's limit is over the envelope's too: name the envelope's (rule 3).
                throw CairnError(.limitExceeded, "the envelope record declares \(declaredLength(headerBytes)) payload bytes, over the limit of \(limit)", offset: offset)
            }
            guard header.type == .envelope else {
                throw CairnError(.corrupted, "the first record of an encrypted archive is not its envelope record", offset: offset)
            }
            guard header.length <= limit else {
                throw CairnError(.limitExceeded, "the envelope record declares \(header.length) payload bytes, over the limit of \(limit)", offset: offset)
            }
            let rest = try read(header.length + RecordFraming.trailerLength)
            guard rest.count == header.length + RecordFraming.trailerLength else {
                throw CairnError(.truncated, "the input ends inside the envelope record", offset: offset + UInt64(headerBytes.count + rest.count))
            }
            prefix += rest
            try prefix.withBytes { (raw) throws(CairnError) in
                try RecordCodec.checkCRC(UnsafeRawBufferPointer(rebasing: raw[Prelude.length...]), offset: offset)
            }
            let payload = Array(rest[0..<header.length])
            return (try EnvelopeRecord.decode(payload: payload, offset: offset), prefix)
        } catch {
            throw error.withPath(name)
        }
    }
}
