import Synchronization

/// Random access to a complete archive's bytes: a local file (``LocalArchiveSource``, a direct
/// `pread(2)`) or a remote one (``HTTPArchiveSource``, range requests), for the seekable reader
/// (``ArchiveReader``, ``ChunkPrefetcher``, ``ResumeToken/check(against:)``, ``Extractor``).
///
/// Offsets and sizes are bytes from the archive's start. Implementations are safe to call from
/// several tasks at once (the prefetcher's decode tasks share one source).
package protocol ArchiveSource: Sendable {
    /// What errors name: the path of a local file, the URL of a remote one.
    var name: String { get }
    /// The archive's size in bytes, learned when the source was opened.
    var size: UInt64 { get }
    /// Whether reading every record costs a transfer of the whole archive (a remote source): the
    /// seekable reader then checks, instead of walking every record, the records of each entry
    /// it extracts (`Spec/0001-container-format.md §13.7`).
    var isRemote: Bool { get }
    /// Requests a remote source keeps in flight at once (`Spec/0001-container-format.md §13.9`):
    /// how many reads its users may usefully hand it together. 1 for a local file.
    var connections: Int { get }

    /// Reads up to `buffer.count` bytes at `offset` into `buffer`, as `pread(2)`: fewer only at
    /// the end of the archive.
    ///
    /// - Returns: the bytes read; 0 at or past the end.
    /// - Throws: `CairnError` naming ``name`` and `offset`: `.io` for a local file, `.network`,
    ///   `.httpStatus` or `.sourceChanged` for a remote one.
    func read(fromAbsoluteOffset offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws(CairnError) -> Int

    /// Reads several ranges at once (a remote source coalesces neighbours and runs a bounded
    /// number of requests in parallel); each range must lie inside `0..<size`.
    ///
    /// - Returns: the bytes of each range, in the order given, each exactly its range's length.
    /// - Throws: as ``read(fromAbsoluteOffset:into:)``; `.truncated` for a range past the end.
    func read(ranges: [Range<UInt64>]) throws(CairnError) -> [[UInt8]]

    /// The whole archive front to back as a descriptor to read once (a second descriptor of a
    /// local file, positioned at 0; the read end of a pipe fed by one GET for a remote one), for
    /// the readers that see every byte (`verify`, extracting everything).
    ///
    /// - Throws: as ``read(fromAbsoluteOffset:into:)``.
    func openSequential() throws(CairnError) -> SequentialArchiveBytes

    /// Releases what the source holds (a descriptor, connections). Reading afterwards is an error.
    func close()
}

/// An archive's bytes read once, front to back, from ``descriptor``
/// (``ArchiveSource/openSequential()``).
package struct SequentialArchiveBytes: Sendable {
    /// The bytes, then end of file.
    package let descriptor: FileDescriptor
    /// The keys the chunk ids of these bytes are checked under: an encrypted archive's inner
    /// archive is keyed (`Spec/0004 §6.6`); nil for a plain archive.
    package let keying: ChunkKeying?
    private let ending: Ending
    private let stopping: @Sendable () -> Void

    /// - Parameters:
    ///   - finish: after reading to the end: throws what cut the bytes short, if anything did.
    ///   - cancel: stops early and releases everything.
    package init(
        descriptor: FileDescriptor, finish: @escaping @Sendable () throws(CairnError) -> Void,
        cancel: @escaping @Sendable () -> Void, keying: ChunkKeying? = nil
    ) {
        self.descriptor = descriptor
        self.keying = keying
        ending = Ending(finish)
        stopping = cancel
    }

    /// Tells a clean end from a cut one (a remote transfer's error), and releases the bytes. Its
    /// answer is kept: a second call (a reader that asks why its bytes ended, then its caller)
    /// gets the same one.
    package func finish() throws(CairnError) { try ending.run() }

    /// `finish` run once, its outcome kept.
    private final class Ending: Sendable {
        private let body: @Sendable () throws(CairnError) -> Void
        private let outcome = Mutex<Result<Void, CairnError>?>(nil)

        init(_ body: @escaping @Sendable () throws(CairnError) -> Void) { self.body = body }

        func run() throws(CairnError) {
            let result = outcome.withLock { (kept) -> Result<Void, CairnError> in
                if let kept { return kept }
                let result: Result<Void, CairnError>
                do throws(CairnError) {
                    try body()
                    result = .success(())
                } catch {
                    result = .failure(error)
                }
                kept = result
                return result
            }
            try result.get()
        }
    }
    /// Stops reading and releases the bytes.
    package func cancel() { stopping() }
}

extension ArchiveSource {
    /// One: a local file gains nothing from reads in parallel.
    package var connections: Int { 1 }

    /// Reads each range with ``read(fromAbsoluteOffset:into:)``, one after another: right for a
    /// local file, where a `pread` costs no round trip.
    package func readEachRange(_ ranges: [Range<UInt64>]) throws(CairnError) -> [[UInt8]] {
        var result: [[UInt8]] = []
        result.reserveCapacity(ranges.count)
        for range in ranges {
            guard range.upperBound <= size else {
                throw CairnError(.truncated, "a read of \(range.count) bytes runs past the archive's end", path: name, offset: range.lowerBound)
            }
            var bytes = [UInt8](repeating: 0, count: range.count)
            let got = try bytes.withMutableBytes { (raw) throws(CairnError) in
                try read(fromAbsoluteOffset: range.lowerBound, into: raw)
            }
            guard got == bytes.count else {
                throw CairnError(.truncated, "the archive ends inside a read", path: name, offset: range.lowerBound + UInt64(got))
            }
            result.append(bytes)
        }
        return result
    }
}

/// A local archive file read with `pread(2)`: what ``ArchiveReader`` has always done, through
/// the protocol at no extra cost (no copy, no cache).
package struct LocalArchiveSource: ArchiveSource {
    /// The open file.
    package let descriptor: FileDescriptor
    package let size: UInt64
    package var name: String { descriptor.path }
    package var isRemote: Bool { false }

    /// Wraps an open descriptor of `size` bytes; ``close()`` closes it.
    package init(descriptor: FileDescriptor, size: UInt64) {
        self.descriptor = descriptor
        self.size = size
    }

    /// Opens `path` read-only and learns its size with `fstat(2)`.
    ///
    /// - Throws: `.notFound` / `.io` naming `path`.
    package init(path: String) throws(CairnError) {
        let fd = try FileDescriptor.open(path, flags: 0)  // O_RDONLY
        do {
            self.init(descriptor: fd, size: try fd.status().size)
        } catch {
            _ = try? fd.close()
            throw error
        }
    }

    /// `pread(2)`, as ``FileDescriptor/read(fromAbsoluteOffset:into:)``.
    @inline(__always)
    package func read(fromAbsoluteOffset offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws(CairnError) -> Int {
        try descriptor.read(fromAbsoluteOffset: offset, into: buffer)
    }

    package func read(ranges: [Range<UInt64>]) throws(CairnError) -> [[UInt8]] { try readEachRange(ranges) }

    /// ``FileDescriptor/duplicatedAtStart()``: its own offset, so this source's `pread`s are
    /// undisturbed.
    package func openSequential() throws(CairnError) -> SequentialArchiveBytes {
        let input = try descriptor.duplicatedAtStart()
        return SequentialArchiveBytes(
            descriptor: input, finish: { () throws(CairnError) in try input.close() }, cancel: { _ = try? input.close() })
    }

    package func close() { _ = try? descriptor.close() }
}

/// Bytes already fetched from a source (the ranges of one prefetch group), served from memory;
/// reads outside them go to the source. Lets ``ArchiveSource/readRecord(at:fileSize:)`` decode
/// records from one coalesced transfer without a request per record.
package struct PrefetchedArchiveBytes: ArchiveSource {
    package let base: any ArchiveSource
    /// Fetched ranges with their bytes, sorted by start.
    private let pieces: [(range: Range<UInt64>, bytes: [UInt8])]
    package var name: String { base.name }
    package var size: UInt64 { base.size }
    package var isRemote: Bool { base.isRemote }
    package var connections: Int { base.connections }

    /// Fetches `ranges` from `base` with ``ArchiveSource/read(ranges:)``.
    package init(_ base: any ArchiveSource, fetching ranges: [Range<UInt64>]) throws(CairnError) {
        try self.init(base, fetching: ranges, holding: [])
    }

    /// Fetches `ranges` from `base` with ``ArchiveSource/read(ranges:)``, besides `held`: bytes
    /// of other ranges the caller already has (kept from an earlier read).
    ///
    /// - Parameter separately: ranges fetched with one ``ArchiveSource/read(ranges:)`` each
    ///   besides `ranges`, so that a remote source does not merge them with their neighbours
    ///   (the bytes between were read before).
    package init(
        _ base: any ArchiveSource, fetching ranges: [Range<UInt64>], separately: [[Range<UInt64>]] = [],
        holding held: [(range: Range<UInt64>, bytes: [UInt8])]
    ) throws(CairnError) {
        self.base = base
        var fetched = held
        for run in [ranges] + separately where !run.isEmpty {
            let bytes = try base.read(ranges: run)
            for (range, piece) in zip(run, bytes) {
                guard piece.count == range.count else {
                    throw CairnError(
                        .truncated, "a read of \(range.count) bytes returned \(piece.count)", path: base.name, offset: range.lowerBound)
                }
                fetched.append((range, piece))
            }
        }
        pieces = fetched.sorted { $0.range.lowerBound < $1.range.lowerBound }
    }

    package func read(fromAbsoluteOffset offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws(CairnError) -> Int {
        let end = min(size, offset.addingReportingOverflow(UInt64(buffer.count)).overflow ? UInt64.max : offset + UInt64(buffer.count))
        // The last piece starting at or before `offset` (binary search: a batch may hold thousands).
        var low = 0
        var high = pieces.count
        while low < high {
            let middle = (low + high) / 2
            if pieces[middle].range.lowerBound <= offset { low = middle + 1 } else { high = middle }
        }
        if low > 0, case let piece = pieces[low - 1], end <= piece.range.upperBound, offset < end {
            let start = Int(offset - piece.range.lowerBound)
            let count = Int(end - offset)
            piece.bytes.withUnsafeBytes { raw in
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[start..<(start + count)]))
            }
            return count
        }
        return try base.read(fromAbsoluteOffset: offset, into: buffer)
    }

    package func read(ranges: [Range<UInt64>]) throws(CairnError) -> [[UInt8]] { try base.read(ranges: ranges) }

    /// The bytes of `range` (one of the ranges fetched or held, or inside one; else read from the
    /// base source).
    package func bytes(of range: Range<UInt64>) throws(CairnError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: range.count)
        let got = try bytes.withMutableBytes { (raw) throws(CairnError) in try read(fromAbsoluteOffset: range.lowerBound, into: raw) }
        guard got == range.count else {
            throw CairnError(.truncated, "a read of \(range.count) bytes returned \(got)", path: base.name, offset: range.lowerBound)
        }
        return bytes
    }

    package func openSequential() throws(CairnError) -> SequentialArchiveBytes { try base.openSequential() }

    /// Does nothing: the base source belongs to its opener.
    package func close() {}
}

/// A decoded record: its type, payload and framed bytes as read from an ``ArchiveSource``.
package struct ArchiveRecord {
    package var type: RecordType?
    package var typeByte: UInt8
    package var payload: [UInt8]
    /// The record as it is on disk: header, payload and CRC.
    package var framed: [UInt8]
}

extension ArchiveSource {
    /// Reads and checks the record at `offset`; returns it and the offset after it.
    package func readRecord(at offset: UInt64, fileSize: UInt64) throws(CairnError)
        -> (ArchiveRecord, UInt64)
    {
        guard offset < fileSize, fileSize - offset >= UInt64(RecordFraming.overhead) else {
            throw CairnError(.truncated, "record runs past the end of the file", offset: offset)
        }
        var head = [UInt8](repeating: 0, count: RecordFraming.headerLength)
        _ = try head.withMutableBytes { (raw) throws(CairnError) in try read(fromAbsoluteOffset: offset, into: raw) }
        let header = try head.withBytes { (raw) throws(CairnError) in try RecordCodec.parseHeader(raw, offset: offset) }
        guard UInt64(header.framedLength) <= fileSize - offset else {
            throw CairnError(.truncated, "record of \(header.length) payload bytes runs past the end of the file", offset: offset)
        }
        var whole = [UInt8](repeating: 0, count: header.framedLength)
        let got = try whole.withMutableBytes { (raw) throws(CairnError) in
            try read(fromAbsoluteOffset: offset, into: raw)
        }
        guard got == whole.count else { throw CairnError(.truncated, "record is cut off", offset: offset) }
        try whole.withBytes { (raw) throws(CairnError) in try RecordCodec.checkCRC(raw, offset: offset) }
        let payload = Array(whole[RecordFraming.headerLength..<(RecordFraming.headerLength + header.length)])
        return (ArchiveRecord(type: header.type, typeByte: header.typeByte, payload: payload, framed: whole), offset + UInt64(header.framedLength))
    }

    package func readFooter(fileSize: UInt64) throws(CairnError) -> Footer {
        let length = UInt64(Footer.framedLength)
        guard fileSize >= UInt64(Prelude.length) + length else {
            throw CairnError(.truncated, "the archive is incomplete: it has no footer", offset: fileSize)
        }
        let offset = fileSize - length
        // What fails in reading the bytes themselves (the network, a sealed block that does not
        // open) is that failure, not a missing footer: read them first (a remote or sealed
        // source keeps them for the record read below).
        var tail = [UInt8](repeating: 0, count: Int(length))
        _ = try tail.withMutableBytes { (raw) throws(CairnError) in try read(fromAbsoluteOffset: offset, into: raw) }
        let record: ArchiveRecord
        do throws(CairnError) {
            (record, _) = try readRecord(at: offset, fileSize: fileSize)
        } catch {
            throw CairnError(
                .truncated,
                "no valid footer at the end (\(error.message)): the archive is incomplete, or has bytes after its end; "
                    + "'cairn verify' names the first bad offset, 'cairn verify --partial' how much is good",
                offset: offset)
        }
        guard record.type == .footer else {
            throw CairnError(
                .truncated,
                "the last record is not a footer: the archive is incomplete, or has bytes after its end; "
                    + "'cairn verify' names the first bad offset, 'cairn verify --partial' how much is good",
                offset: offset)
        }
        var r = ByteReader(record.payload, baseOffset: offset + UInt64(RecordFraming.headerLength), what: "footer")
        return try Footer.decode(&r)
    }
}
