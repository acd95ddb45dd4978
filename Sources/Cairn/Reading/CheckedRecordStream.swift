import Synchronization

/// Reads a format 2.0 archive's records front to back from blocks of bytes (a fetch's
/// ``FetchChannel``, or ``InputBlocks`` over a descriptor), as ``RecordStream`` does, but checks
/// each record on every core before returning it: its CRC-32, its SHA-256 (the record's digest in
/// the chain, `Spec/0001-container-format.md §10.3`), and for a chunk record its content
/// (decompressed to exactly the declared length, hashed to its id). What is left to the caller's
/// one thread (the scanner) is a few dozen bytes per chunk record.
///
/// Records are cut out of each block where they lie: only a record that a block's end cuts is
/// copied (into memory of its own), and of a chunk record only the header and 40-byte prefix are
/// copied out for the scanner. Each block's records are checked by one detached task; at most
/// ``window`` blocks are in flight, and their records come back in archive order.
///
/// Errors come in archive order, as ``RecordStream/next()`` would throw them: a record that fails
/// its CRC-32 (a chunk record's failure is returned in ``RecordStream/Record/crcFailure``
/// instead, as with ``RecordStream/toleratesDamagedChunks``), a bad record header, an input that
/// ends inside a record; a chunk whose content does not check is returned with its failure.
package final class CheckedRecordStream {
    /// A record, checked.
    package struct Item {
        /// The record, its ``RecordStream/Record/digest`` set; a chunk record's `framed` holds
        /// only its header and prefix (``RecordStream/Record/isPayloadSkipped``).
        package var record: RecordStream.Record
        /// Why a chunk record's content is wrong (it did not decompress to its declared length,
        /// or does not hash to its id); nil when it checked or was not checked.
        package var contentFailure: CairnError?
    }

    /// A record where it lies: in a block of the source, or in a block of its own.
    private struct Slice: Sendable {
        var block: ByteBlock
        var range: Range<Int>
        var offset: UInt64
        var header: RecordCodec.Header
    }

    /// What a task found about one record.
    private struct Check: Sendable {
        var crcFailure: CairnError?
        var digest: Result<Digest, CairnError> = .success(.zero)
        var contentFailure: CairnError?
    }

    /// The records that end in one block of the source, being checked.
    private struct Batch {
        var block: ByteBlock?
        var slices: [Slice]
        var task: Task<[Check], Never>?
        /// What ends the input after these records (a bad header, a cut record).
        var terminal: CairnError?
    }

    private let source: any ByteBlockSource
    private let window: Int
    /// Chunk records that end at or before this offset are not decompressed and hashed.
    private let trustedBelow: UInt64
    /// The archive's chunk id rule, by which chunk records' contents are checked.
    private let idFunction: ChunkIDFunction
    /// The archive offset of the next record to cut out of the blocks.
    private var cutOffset: UInt64
    /// The end of the last record returned: where the next one starts.
    package private(set) var offset: UInt64
    /// Bytes before the first block (what a ``RecordStream`` had read ahead).
    private var leading: [UInt8]
    /// Fewer than a header's bytes of a record that a block's end cut.
    private var headerBytes: [UInt8] = []
    /// A record that a block's end cut, being completed in memory of its own.
    private var carry: (block: ByteBlock, header: RecordCodec.Header)?
    /// Whether no more blocks are read (the input ended, or a record header was bad).
    private var inputEnded = false
    private var pending: [Batch] = []
    private var current: Batch?
    private var checks: [Check] = []
    private var index = 0

    /// - Parameters:
    ///   - source: the blocks, starting with the archive's byte at `offset` (after `leading`).
    ///   - offset: the archive offset of the first byte (of `leading`, else of the first block).
    ///   - leading: bytes that come before the source's (read ahead by a ``RecordStream``).
    ///   - trustingContentBelow: chunk records that end at or before this offset are not
    ///     decompressed and hashed (their CRC-32 and digest still are).
    ///   - ids: the archive's chunk id rule (`Spec/0004-trusted-archives.md §6.6`).
    ///   - window: blocks checked at once (8: both cores stay busy while one block waits for its
    ///     turn).
    package init(
        source: any ByteBlockSource, offset: UInt64, leading: [UInt8] = [], trustingContentBelow trusted: UInt64 = 0,
        ids: ChunkIDFunction, window: Int = 8
    ) {
        self.idFunction = ids
        self.source = source
        self.cutOffset = offset
        self.offset = offset
        self.leading = leading
        self.trustedBelow = trusted
        self.window = max(1, window)
    }

    /// The next record, checked, or nil at a clean end of the input.
    ///
    /// - Throws: `.checksumMismatch` for a record (not a chunk record) that fails its CRC-32;
    ///   `.corrupted` or `.limitExceeded` for a bad record header; `.truncated` when the input
    ///   ends inside a record; `.io` from the source; `CancellationError`.
    nonisolated(nonsending) package func next() async throws -> Item? {
        while true {
            if let batch = current {
                if index < batch.slices.count {
                    let slice = batch.slices[index]
                    let check = checks[index]
                    index += 1
                    return try item(slice, check)
                }
                if let terminal = batch.terminal { throw terminal }
                if let block = batch.block { source.recycle(block) }
                current = nil
            }
            try await fill()
            guard !pending.isEmpty else { return nil }
            let batch = pending.removeFirst()
            current = batch
            checks = await batch.task?.value ?? []
            index = 0
            guard checks.count == batch.slices.count else { throw CancellationError() }
        }
    }

    /// Whether the input has no more bytes after the records returned.
    ///
    /// - Throws: `.io` from the source.
    nonisolated(nonsending) package func isAtEnd() async throws -> Bool {
        if let current, index < current.slices.count || current.terminal != nil { return false }
        guard pending.allSatisfy({ $0.slices.isEmpty && $0.terminal == nil }), headerBytes.isEmpty, carry == nil, leading.isEmpty else {
            return false
        }
        while !inputEnded {
            guard let block = try await source.nextBlock() else { return true }
            let empty = block.end == block.start
            source.recycle(block)
            if !empty { return false }
        }
        return true
    }

    /// Cancels the checks still running and waits for them to end: none may outlive its
    /// reader (a task still hashing while the process exits meets libcrypto torn down by `exit`,
    /// and crashes; the fuzz corpus replay found it).
    nonisolated(nonsending) package func close() async {
        for batch in pending { batch.task?.cancel() }
        for batch in pending { _ = await batch.task?.value }
        pending.removeAll()
    }

    /// The record `slice` as the scanner takes it.
    private func item(_ slice: Slice, _ check: Check) throws(CairnError) -> Item {
        let isChunk = slice.header.type == .chunk
        if let failure = check.crcFailure, !isChunk { throw failure }
        let raw = UnsafeRawBufferPointer(rebasing: slice.block.bytes[slice.range])
        let kept = isChunk ? min(raw.count, RecordFraming.headerLength + ChunkRecordPrefix.length) : raw.count
        var record = RecordStream.Record(
            offset: slice.offset, header: slice.header, framed: Array(UnsafeRawBufferPointer(rebasing: raw[0..<kept])),
            isPayloadSkipped: isChunk)
        record.crcFailure = check.crcFailure
        record.digest = try check.digest.get()
        offset = slice.offset + UInt64(slice.range.count)
        return Item(record: record, contentFailure: check.contentFailure)
    }

    /// Reads blocks until ``window`` are in flight, the input ended, or (with blocks in flight)
    /// none is there yet, cutting each into records and starting its checks: the records of a
    /// slow transfer are checked as they arrive, not a window later.
    private nonisolated(nonsending) func fill() async throws {
        while pending.count < window, !inputEnded, pending.isEmpty || !leading.isEmpty || source.hasBlockReady {
            let block: ByteBlock
            var ownBlock = false
            if !leading.isEmpty {
                block = ByteBlock(capacity: leading.count)
                _ = leading.withUnsafeBytes { block.append($0) }
                leading = []
                ownBlock = true
            } else if let next = try await source.nextBlock() {
                block = next
            } else {
                inputEnded = true
                if !headerBytes.isEmpty {
                    pending.append(Batch(block: nil, slices: [], task: nil, terminal: RecordStream.endedInsideHeader(at: cutOffset)))
                } else if let carry {
                    pending.append(Batch(block: nil, slices: [], task: nil, terminal: RecordStream.endedInside(carry.header, at: cutOffset)))
                }
                headerBytes = []
                carry = nil
                break
            }
            var batch = cut(block)
            if ownBlock { batch.block = nil }  // not the source's to take back
            if batch.terminal != nil { inputEnded = true }
            if !batch.slices.isEmpty {
                let slices = batch.slices
                let trusted = trustedBelow
                batch.task = Self.startChecks(slices, trustingContentBelow: trusted, ids: idFunction, buffers: buffers)
            }
            pending.append(batch)
        }
    }

    /// Cuts `block` into the records that end in it (completing one a previous block's end cut),
    /// keeping what its own end cuts for the next block.
    private func cut(_ block: ByteBlock) -> Batch {
        var batch = Batch(block: block, slices: [], task: nil, terminal: nil)
        let bytes = UnsafeRawBufferPointer(block.bytes)
        var at = block.start
        let end = block.end
        if !headerBytes.isEmpty {
            let take = min(RecordFraming.headerLength - headerBytes.count, end - at)
            headerBytes += bytes[at..<(at + take)]
            at += take
            guard headerBytes.count == RecordFraming.headerLength else { return batch }
            do throws(CairnError) {
                let header = try headerBytes.withBytes { (raw) throws(CairnError) in try RecordCodec.parseHeader(raw, offset: cutOffset) }
                let whole = ByteBlock(capacity: header.framedLength)
                _ = headerBytes.withUnsafeBytes { whole.append($0) }
                carry = (whole, header)
                headerBytes = []
            } catch {
                batch.terminal = error
                return batch
            }
        }
        if let carried = carry {
            let whole = carried.block
            at += whole.append(UnsafeRawBufferPointer(rebasing: bytes[at..<end]))
            guard whole.room == 0 else { return batch }
            batch.slices.append(Slice(block: whole, range: 0..<whole.end, offset: cutOffset, header: carried.header))
            cutOffset += UInt64(whole.end)
            carry = nil
        }
        while at < end {
            guard end - at >= RecordFraming.headerLength else {
                headerBytes = Array(bytes[at..<end])
                break
            }
            let header: RecordCodec.Header
            do throws(CairnError) {
                header = try RecordCodec.parseHeader(
                    UnsafeRawBufferPointer(rebasing: bytes[at..<(at + RecordFraming.headerLength)]), offset: cutOffset)
            } catch {
                batch.terminal = error
                break
            }
            let framed = header.framedLength
            guard framed <= end - at else {
                let whole = ByteBlock(capacity: framed)
                _ = whole.append(UnsafeRawBufferPointer(rebasing: bytes[at..<end]))
                carry = (whole, header)
                break
            }
            batch.slices.append(Slice(block: block, range: at..<(at + framed), offset: cutOffset, header: header))
            at += framed
            cutOffset += UInt64(framed)
        }
        return batch
    }

    /// Starts a detached task that checks `slices`.
    private static func startChecks(
        _ slices: [Slice], trustingContentBelow trusted: UInt64, ids: ChunkIDFunction, buffers: DecodeBuffers
    ) -> Task<[Check], Never> {
        Task.detached {
            var buffer = buffers.take()
            defer { buffers.give(buffer) }
            return check(slices, trustingContentBelow: trusted, ids: ids, buffer: &buffer)
        }
    }

    /// The buffers the tasks decode chunks into, reused (a fresh one per task cost a page fault
    /// per 4 KiB of it, measured: about 10,000 for a 314 MiB archive).
    private final class DecodeBuffers: Sendable {
        private let free = Mutex<[ByteBlock]>([])

        func take() -> ByteBlock { free.withLock { $0.popLast() } ?? ByteBlock(capacity: 256 << 10) }
        func give(_ block: ByteBlock) { free.withLock { $0.append(block) } }
    }
    private let buffers = DecodeBuffers()

    /// Checks `slices` (one task's share): returns one ``Check`` per record, or fewer when
    /// cancelled.
    private static func check(
        _ slices: [Slice], trustingContentBelow trusted: UInt64, ids: ChunkIDFunction, buffer: inout ByteBlock
    ) -> [Check] {
        var checks: [Check] = []
        checks.reserveCapacity(slices.count)
        let decompressor = ChunkDecompressor()
        for slice in slices {
            guard !Task.isCancelled else { break }
            let raw = UnsafeRawBufferPointer(rebasing: slice.block.bytes[slice.range])
            var check = Check()
            do throws(CairnError) { try RecordCodec.checkCRC(raw, offset: slice.offset) } catch { check.crcFailure = error }
            check.digest = Result { () throws(CairnError) in try SHA256.hash(raw) }
            if slice.header.type == .chunk, check.crcFailure == nil, slice.offset + UInt64(raw.count) > trusted {
                do throws(CairnError) {
                    try checkContent(raw, offset: slice.offset, ids: ids, using: decompressor, buffer: &buffer)
                } catch {
                    check.contentFailure = error
                }
            }
            checks.append(check)
        }
        return checks
    }

    /// Decodes the chunk record `framed` and checks its content against its id, in `buffer`
    /// (grown to the declared raw length, at most ``FormatLimits/maximumChunkLength``).
    private static func checkContent(
        _ framed: UnsafeRawBufferPointer, offset: UInt64, ids: ChunkIDFunction, using decompressor: ChunkDecompressor,
        buffer: inout ByteBlock
    ) throws(CairnError) {
        let payloadEnd = framed.count - RecordFraming.trailerLength
        let prefixEnd = RecordFraming.headerLength + ChunkRecordPrefix.length
        guard payloadEnd >= prefixEnd else {
            throw CairnError(.truncated, "chunk record shorter than its prefix", offset: offset)
        }
        let prefixBytes = Array(UnsafeRawBufferPointer(rebasing: framed[RecordFraming.headerLength..<prefixEnd]))
        var r = ByteReader(prefixBytes, baseOffset: offset + UInt64(RecordFraming.headerLength), what: "chunk record")
        let prefix = try ChunkRecordPrefix.decode(&r, storedLength: payloadEnd - prefixEnd)
        if buffer.capacity < prefix.rawLength { buffer = ByteBlock(capacity: prefix.rawLength) }
        try ArchiveReader.decodeChunk(
            prefix, stored: UnsafeRawBufferPointer(rebasing: framed[prefixEnd..<payloadEnd]), offset: offset, ids: ids,
            using: decompressor, into: buffer.bytes)
    }
}
