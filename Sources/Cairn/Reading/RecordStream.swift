/// Reads an archive's records front to back from a descriptor (a file or a pipe) or another
/// ``ByteInput`` (a fetch's in-memory channel), seeing each byte once, with a buffer that starts at 1 MiB and grows only as far as the largest record
/// needs (at most ``FormatLimits/maximumRecordPayload`` plus framing).
///
/// Every record is checked (header fields, length limit, CRC-32) before it is returned.
///
/// A stream over a seekable file can also *skip chunk payloads* (``init(skippingChunkPayloadsOf:fileSize:)``):
/// chunk records then come back with only their framing header and 40-byte prefix, and the bytes
/// after it are stepped over without being read (their CRC is not checked). The seekable reader
/// walks an archive's records this way to prove that its manifest describes the records really
/// there, for the price of reading everything but the chunk payloads (`Spec/0001 §13.1`).
package final class RecordStream {
    private var input: any ByteInput
    /// Skipping mode: the seekable input read at offsets (`pread(2)` for a file).
    private let descriptor: (any PositionalInput)?
    private var buffer: [UInt8]
    private var start = 0
    private var end = 0
    private var atEOF = false
    /// The archive offset of the next unread byte.
    private(set) package var offset: UInt64 = 0
    /// Skipping mode: the file's size.
    private let skippingFileSize: UInt64?
    /// Skipping mode: where the next `pread` reads (the offset of `buffer[end]`).
    private var readPosition: UInt64 = 0
    /// Whether a chunk record that fails its CRC is returned (with ``Record/crcFailure``)
    /// instead of thrown, so a verifier can report every damaged chunk and go on; its framing
    /// (type and length) passed its checks, so the next record is still found.
    package var toleratesDamagedChunks = false

    package convenience init(descriptor: FileDescriptor, bufferSize: Int = 1 << 20) {
        self.init(input: descriptor, bufferSize: bufferSize)
    }

    /// A stream over `input`'s bytes, read in pieces of up to `bufferSize`.
    package init(input: any ByteInput, bufferSize: Int = 1 << 20) {
        self.input = input
        self.descriptor = nil
        self.buffer = [UInt8](repeating: 0, count: max(bufferSize, 64))
        self.skippingFileSize = nil
    }

    /// A stream over the seekable file `descriptor` (an archive starting at offset 0, of
    /// `fileSize` bytes) that skips chunk payloads; reads with `pread(2)` in pieces of 64 KiB, so
    /// payloads larger than that are mostly never read.
    package init(skippingChunkPayloadsOf descriptor: any PositionalInput, fileSize: UInt64) {
        self.input = PositionalByteInput(descriptor)
        self.descriptor = descriptor
        self.buffer = [UInt8](repeating: 0, count: 64 << 10)
        self.skippingFileSize = fileSize
    }

    /// Continues the stream with `input`, whose first byte is the archive's byte at `offset`: what
    /// was buffered from the old input is dropped (a resumed fetch reads its partial file up to its
    /// last commit, then the server's bytes after it). Not in skipping mode.
    package func continueReading(from input: any ByteInput, at offset: UInt64) {
        self.input = input
        start = 0
        end = 0
        atEOF = false
        self.offset = offset
    }

    private func read(into raw: UnsafeMutableRawBufferPointer) throws(CairnError) -> Int {
        guard let fileSize = skippingFileSize, let descriptor else { return try input.read(into: raw) }
        guard readPosition < fileSize else { return 0 }
        let want = Int(min(UInt64(raw.count), fileSize - readPosition))
        let n = try descriptor.read(fromAbsoluteOffset: readPosition, into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<want]))
        readPosition += UInt64(n)
        return n
    }

    /// Ensures at least `count` bytes are buffered; returns false at end of input with fewer.
    private func fill(_ count: Int) throws(CairnError) -> Bool {
        if count > buffer.count {
            // Only a record header that passed its length check asks for this much. Allocate
            // and copy in bulk (an element-wise append is slow in unoptimised builds).
            var larger = [UInt8](repeating: 0, count: count)
            let pending = end - start
            larger.withUnsafeMutableBytes { destination in
                buffer.withUnsafeBytes { source in
                    guard let to = destination.baseAddress, let from = source.baseAddress else { return }
                    to.copyMemory(from: from + start, byteCount: pending)
                }
            }
            buffer = larger
            start = 0
            end = pending
        }
        while end - start < count {
            if atEOF { return false }
            if start > 0 {
                let pending = end - start
                buffer.withUnsafeMutableBytes { raw in
                    guard let base = raw.baseAddress else { return }
                    base.copyMemory(from: base + start, byteCount: pending)
                }
                start = 0
                end = pending
            }
            let n = try buffer.withMutableBytes { (raw) throws(CairnError) in
                try read(into: UnsafeMutableRawBufferPointer(rebasing: raw[end...]))
            }
            if n == 0 { atEOF = true } else { end += n }
        }
        return true
    }

    /// Reads exactly `count` bytes (the prelude); nil at end of input with fewer (what was
    /// there is returned through `partial`).
    package func readBytes(_ count: Int) throws(CairnError) -> [UInt8] {
        _ = try fill(count)
        let n = min(count, end - start)
        let out = Array(buffer[start..<(start + n)])
        start += n
        offset += UInt64(n)
        return out
    }

    /// The bytes read from the input and not yet returned (they start at ``offset``), handed to
    /// a reader that goes on from here with the same input; the stream is then empty.
    package func takeBuffered() -> [UInt8] {
        let out = Array(buffer[start..<end])
        start = end
        return out
    }

    /// The error for an input that ends inside the record header at `offset`.
    package static func endedInsideHeader(at offset: UInt64) -> CairnError {
        CairnError(.truncated, "the input ends inside a record header", offset: offset)
    }

    /// The error for an input that ends inside the record at `offset`, of `header`.
    package static func endedInside(_ header: RecordCodec.Header, at offset: UInt64) -> CairnError {
        CairnError(
            .truncated, "the input ends inside \(RecordType.withArticle(header.type?.name ?? "unknown")) record of \(header.length) payload bytes",
            offset: offset)
    }

    /// Whether the input has no more bytes.
    package func isAtEnd() throws(CairnError) -> Bool {
        try !fill(1)
    }

    /// A checked record: its offset, header, and framed bytes (header, payload, CRC).
    package struct Record {
        package var offset: UInt64
        package var header: RecordCodec.Header
        /// The record as stored; for a chunk record whose payload was skipped, only its 8-byte
        /// header and 40-byte prefix.
        package var framed: [UInt8]
        /// Whether this is a chunk record whose stored bytes, or a pack record whose content, were
        /// skipped (and its CRC unchecked).
        package var isPayloadSkipped = false
        /// With ``RecordStream/toleratesDamagedChunks``: the CRC failure of this chunk record.
        package var crcFailure: CairnError?
        /// The SHA-256 of the whole framed record, when its reader computed it (``CheckedRecordStream``,
        /// which also checked its CRC and, for a chunk record, its content): the chain digest takes
        /// it instead of hashing ``framed``, which may then be cut to the header and chunk prefix
        /// (``isPayloadSkipped``).
        package var digest: Digest?
        package var payload: [UInt8] {
            if isPayloadSkipped { return Array(framed[RecordFraming.headerLength...]) }
            return Array(framed[RecordFraming.headerLength..<(framed.count - RecordFraming.trailerLength)])
        }
    }

    /// Skipping mode: how much of a record's payload is read: a chunk record's 40-byte prefix,
    /// a pack record's 48-byte prefix and item table (§7.5); nil for records read whole.
    private func keptPrefixLength(of header: RecordCodec.Header) throws(CairnError) -> Int? {
        switch header.type {
        case .chunk?: return ChunkRecordPrefix.length
        case .pack?:
            guard header.length > PackRecordPrefix.length,
                try fill(RecordFraming.headerLength + PackRecordPrefix.length)
            else { return nil }
            let at = start + RecordFraming.headerLength + 8
            let table = Int(buffer[at]) | Int(buffer[at + 1]) << 8 | Int(buffer[at + 2]) << 16 | Int(buffer[at + 3]) << 24
            return min(header.length, PackRecordPrefix.length + table)
        default: return nil
        }
    }

    /// The next record, or nil at a clean end of input.
    ///
    /// - Throws: `.truncated` when the input ends inside a record; `.corrupted`,
    ///   `.limitExceeded` or `.checksumMismatch` for a bad record; `.io` for read errors.
    package func next() throws(CairnError) -> Record? {
        guard try fill(1) else { return nil }
        guard try fill(RecordFraming.headerLength) else { throw Self.endedInsideHeader(at: offset) }
        let header = try buffer.withBytes { (raw) throws(CairnError) in
            try RecordCodec.parseHeader(UnsafeRawBufferPointer(rebasing: raw[start..<(start + RecordFraming.headerLength)]), offset: offset)
        }
        if let fileSize = skippingFileSize, let kept = try keptPrefixLength(of: header), header.length > kept {
            let prefixEnd = RecordFraming.headerLength + kept
            let (recordEnd, overflow) = offset.addingReportingOverflow(UInt64(header.framedLength))
            guard !overflow, recordEnd <= fileSize, try fill(prefixEnd) else { throw Self.endedInside(header, at: offset) }
            let framed = Array(buffer[start..<(start + prefixEnd)])
            let record = Record(offset: offset, header: header, framed: framed, isPayloadSkipped: true)
            let buffered = end - start
            if header.framedLength <= buffered {
                start += header.framedLength
            } else {
                // Step over the rest without reading it.
                start = 0
                end = 0
                readPosition = recordEnd
            }
            offset = recordEnd
            return record
        }
        guard try fill(header.framedLength) else { throw Self.endedInside(header, at: offset) }
        let framed = Array(buffer[start..<(start + header.framedLength)])
        var crcFailure: CairnError?
        do throws(CairnError) {
            try framed.withBytes { (raw) throws(CairnError) in try RecordCodec.checkCRC(raw, offset: offset) }
        } catch {
            guard toleratesDamagedChunks, header.type == .chunk else { throw error }
            crcFailure = error
        }
        var record = Record(offset: offset, header: header, framed: framed)
        record.crcFailure = crcFailure
        start += header.framedLength
        offset += UInt64(header.framedLength)
        return record
    }
}
