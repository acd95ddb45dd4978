/// Reads an archive's records front to back from a descriptor (a file or a pipe), seeing each
/// byte once, with a buffer that starts at 1 MiB and grows only as far as the largest record
/// needs (at most ``FormatLimits/maximumRecordPayload`` plus framing).
///
/// Every record is checked (header fields, length limit, CRC-32) before it is returned.
package final class RecordStream {
    private let descriptor: FileDescriptor
    private var buffer: [UInt8]
    private var start = 0
    private var end = 0
    private var atEOF = false
    /// The archive offset of the next unread byte.
    private(set) package var offset: UInt64 = 0

    package init(descriptor: FileDescriptor, bufferSize: Int = 1 << 20) {
        self.descriptor = descriptor
        self.buffer = [UInt8](repeating: 0, count: max(bufferSize, 64))
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
                try descriptor.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[end...]))
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

    /// Whether the input has no more bytes.
    package func isAtEnd() throws(CairnError) -> Bool {
        try !fill(1)
    }

    /// A checked record: its offset, header, and framed bytes (header, payload, CRC).
    package struct Record {
        package var offset: UInt64
        package var header: RecordCodec.Header
        package var framed: [UInt8]
        package var payload: [UInt8] {
            Array(framed[RecordFraming.headerLength..<(framed.count - RecordFraming.trailerLength)])
        }
    }

    /// The next record, or nil at a clean end of input.
    ///
    /// - Throws: `.truncated` when the input ends inside a record; `.corrupted`,
    ///   `.limitExceeded` or `.checksumMismatch` for a bad record; `.io` for read errors.
    package func next() throws(CairnError) -> Record? {
        guard try fill(1) else { return nil }
        guard try fill(RecordFraming.headerLength) else {
            throw CairnError(.truncated, "the input ends inside a record header", offset: offset)
        }
        let header = try buffer.withBytes { (raw) throws(CairnError) in
            try RecordCodec.parseHeader(UnsafeRawBufferPointer(rebasing: raw[start..<(start + RecordFraming.headerLength)]), offset: offset)
        }
        guard try fill(header.framedLength) else {
            throw CairnError(
                .truncated, "the input ends inside a \(header.type?.name ?? "record") of \(header.length) payload bytes",
                offset: offset)
        }
        let framed = Array(buffer[start..<(start + header.framedLength)])
        try framed.withBytes { (raw) throws(CairnError) in try RecordCodec.checkCRC(raw, offset: offset) }
        let record = Record(offset: offset, header: header, framed: framed)
        start += header.framedLength
        offset += UInt64(header.framedLength)
        return record
    }
}
