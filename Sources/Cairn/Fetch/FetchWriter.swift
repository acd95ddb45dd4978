import Foundation
import Glibc
import Synchronization

/// The writing half of a fetch: produces the archive's bytes after the partial file's verified
/// prefix in order, from seeds and from range requests, appending them to the partial file and
/// sending them to the verifier (``FetchChannel``), which read the prefix itself
/// (``StreamVerifier/readPrefix(from:)``). Runs on its own thread: every call here blocks.
package final class FetchWriter: @unchecked Sendable {
    /// What to produce after the partial file's prefix.
    package enum Job: Sendable {
        /// Everything from this offset to the end, in one request (`Range: bytes=N-` with
        /// `If-Range`, or a plain GET from 0).
        case rest(from: UInt64)
        /// A seeded plan, then the manifest and footer already read (`tail`).
        case plan(DeltaPlan, tail: [UInt8], length: UInt64)
        /// The whole archive written again from seeds by the reference writer
        /// (``ArchiveRebuilder``), then the manifest and footer already read.
        case rebuild(ArchiveRebuilder.Plan, remote: RemoteManifest)
    }

    /// A seeded fetch of an encrypted archive (`Spec/0004-trusted-archives.md §6.10.3`): the
    /// job's offsets are the inner archive's, whose downloaded ranges are read through the
    /// remote's sealed blocks; what the job produces is sealed again before it is written, after
    /// the remote's envelope, copied verbatim. No plaintext reaches the partial file.
    package struct Resealing: Sendable {
        /// The remote's inner archive: downloaded ranges (``SealedRangeReader``).
        let ranges: SealedRangeReader
        /// The remote's outer bytes before its first sealed block.
        let envelopeBytes: [UInt8]
        /// Seals the produced inner archive under the remote's block key and archive id.
        var sealing: BlockSealing
    }

    let client: HTTPClient
    let url: String
    let output: FileSink
    let channel: FetchChannel
    private let seeds: SeedIndex
    let progress: Progress
    let validator: String?
    let expectedLength: UInt64?
    let cancelled = Atomic<Bool>(false)
    private var resealing: Resealing?

    /// Called with the head of a whole-archive response from offset 0, before its first byte is
    /// written (the fetch records the validator beside the partial file there).
    let onFreshHead: @Sendable (HTTPResponseHead) throws(CairnError) -> Void

    /// Bytes copied from seeds.
    package private(set) var seedBytes: UInt64 = 0
    /// The one buffer seed copies pass through (1 MiB).
    private var buffer = [UInt8](repeating: 0, count: 1 << 20)
    /// Whether the server answered a range request with the whole resource and the same
    /// validator: it does not support ranges.
    package internal(set) var sawNoRangeSupport = false
    /// A `.rest(from:)` job over several connections (`Spec/0001 §13.8`); nil: one request.
    private let parallel: Parallel?
    /// Transient failures of a parallel job's pieces retried (each piece downloaded again).
    package internal(set) var rangeRetries = 0
    /// Whether the job was downloaded over several connections.
    package internal(set) var usedRanges = false
    /// The remote archive through which a seeded plan's downloads are read ahead over several
    /// connections (``PlannedDownloads``); nil: one request at a time (and always for a rebuild).
    private let plannedSource: HTTPArchiveSource?
    /// A seeded job's downloads, read ahead (``plannedSource``).
    private var planned: PlannedDownloads?

    package init(
        client: HTTPClient, url: String, output: FileSink, channel: FetchChannel, seeds: SeedIndex, progress: Progress,
        validator: String?, expectedLength: UInt64?, resealing: Resealing? = nil, parallel: Parallel? = nil,
        plannedSource: HTTPArchiveSource? = nil, onFreshHead: @escaping @Sendable (HTTPResponseHead) throws(CairnError) -> Void
    ) {
        self.plannedSource = resealing == nil ? plannedSource : nil
        self.resealing = resealing
        self.parallel = parallel
        self.client = client
        self.url = url
        self.output = output
        self.channel = channel
        self.seeds = seeds
        self.progress = progress
        self.validator = validator
        self.expectedLength = expectedLength
        self.onFreshHead = onFreshHead
    }

    /// Makes the writer stop at its next piece of bytes.
    package func cancel() { cancelled.store(true, ordering: .relaxed) }

    /// Produces `job`. Always ends the channel's stream.
    ///
    /// - Throws: `.network`/`.httpStatus` from requests; `.sourceChanged` for an answer that is
    ///   not the requested part of the same archive; `.io` for the partial file (a full disk),
    ///   a seed, or a verifier that stopped (``FetchChannel/readerStopped``).
    package func run(job: Job) throws(CairnError) {
        defer {
            channel.finishSending()
            if planned?.used == true { usedRanges = true }
        }
        do throws(CairnError) {
            if let resealing { try resealing.envelopeBytes.withBytes { (raw) throws(CairnError) in try emit(raw) } }
            try produce(job: job)
            if let sealed = resealing?.sealing.finish() { try sealed.withBytes { (raw) throws(CairnError) in try emit(raw) } }
            try flush()
        } catch {
            // What arrived before a failure is kept too: it may verify, and not be fetched again.
            try? flush()
            throw error
        }
    }

    private func produce(job: Job) throws(CairnError) {
        switch job {
        case .rest(let start):
            if let parallel, resealing == nil {
                try fetchInParallel(from: start, parallel)
            } else {
                try fetch(from: start, to: nil)
            }
        case .rebuild(let plan, let remote):
            let rebuilder = ArchiveRebuilder(
                remote: remote, url: url, plan: plan, seeds: seeds,
                download: { [self] (range) throws(CairnError) in try download(range, total: remote.length) },
                deliver: { [self] (bytes) throws(CairnError) in try deliver(bytes) })
            defer {
                seedBytes += rebuilder.seedBytes
                damagedSeedRecords += rebuilder.damagedSeedRecords
            }
            try rebuilder.run()
            try remote.tail.withBytes { (raw) throws(CairnError) in try deliver(raw) }
        case .plan(let plan, let tail, let length):
            var index = 0
            let segments = plan.segments
            planned = plannedSource.map { source in
                PlannedDownloads(PlannedDownloads.pieces(of: segments.compactMap { if case .fetch(let range) = $0 { range } else { nil } }), source: source)
            }
            while index < segments.count {
                switch segments[index] {
                case .fetch(let range):
                    try fetchPlanned(range, total: length)
                case .copy(let seed, let from, let range):
                    try prefetchRemoteCopies(at: index, of: segments)
                    try copy(seed: seed, from: from, count: range.upperBound - range.lowerBound)
                case .copyRecord(let seed, let from, let range):
                    try prefetchRemoteCopies(at: index, of: segments)
                    try copyRecord(seed: seed, from: from, to: range, total: length)
                case .copyCheckingCRC(let seed, let from, let range, let contentStart):
                    let count = range.upperBound - range.lowerBound
                    guard index + 1 < segments.count, case .fetch(let next) = segments[index + 1], next.lowerBound == range.upperBound,
                        next.upperBound - next.lowerBound >= UInt64(RecordFraming.trailerLength),
                        next.upperBound - next.lowerBound <= 4 << 20
                    else {
                        try copy(seed: seed, from: from, count: count)
                        break
                    }
                    // Read what follows first: it starts with the remote record's CRC-32.
                    let following = try download(next, total: length)
                    // A seed that ends first has no CRC to compare: nothing matches.
                    let seedCRC = (try? seeds.read(seed: seed, at: from + count, count: RecordFraming.trailerLength)) ?? []
                    if Array(following.prefix(RecordFraming.trailerLength)) == seedCRC {
                        try copy(seed: seed, from: from, count: count)
                    } else if contentStart < count {
                        tableOnlyCopies += 1
                        try fetch(from: range.lowerBound, to: range.lowerBound + contentStart, total: length)
                        try copy(seed: seed, from: from + contentStart, count: count - contentStart)
                    } else {
                        try fetch(from: range.lowerBound, to: range.upperBound, total: length)
                    }
                    try following.withBytes { (raw) throws(CairnError) in try deliver(raw) }
                    index += 1
                }
                index += 1
            }
            try tail.withBytes { (raw) throws(CairnError) in try deliver(raw) }
        }
    }

    /// Packs whose CRC-32 differed from the seed's: their item tables were downloaded, their
    /// content copied.
    package private(set) var tableOnlyCopies = 0
    /// Seed records that failed their framing or CRC-32 when copied, and were downloaded instead.
    package private(set) var damagedSeedRecords = 0

    /// Copies the record at `from` of seed `seed` to `range`, or downloads `range` when the
    /// seed's bytes there are not that record intact (``SeedIndex/checkedRecord(seed:at:framedLength:)``).
    private func copyRecord(seed: Int, from: UInt64, to range: Range<UInt64>, total: UInt64) throws(CairnError) {
        let count = Int(range.upperBound - range.lowerBound)
        var bytes: [UInt8]?
        if seed == prefetchedSeed, let fetched = prefetched.removeValue(forKey: from) {
            bytes = fetched.count == count && SeedIndex.isWholeRecord(fetched, offset: from) ? fetched : nil
        } else {
            bytes = try seeds.checkedRecord(seed: seed, at: from, framedLength: count)
        }
        guard let bytes else {
            damagedSeedRecords += 1
            try fetch(from: range.lowerBound, to: range.upperBound, total: total)
            return
        }
        try bytes.withBytes { (raw) throws(CairnError) in try deliver(raw) }
        seedBytes += UInt64(count)
    }

    /// Downloads `range` into memory (a few KiB: the commit after a pack; up to 8 MiB of
    /// records for a rebuild): read ahead with the next planned downloads when it is one.
    private func download(_ range: Range<UInt64>, total: UInt64) throws(CairnError) -> [UInt8] {
        if let resealing { return try resealing.ranges.read(range) }
        if let bytes = try planned?.bytes(of: range) { return bytes }
        return try RangeAnswer.download(client: client, url: url, range: range, validator: validator, total: total).body
    }

    /// Appends new bytes to the partial file and sends them to the verifier, gathered into the
    /// channel's blocks (``FetchChannel/blockSize``): libcurl hands a body over in pieces of at
    /// most 16 KiB (`CURL_MAX_WRITE_SIZE`), and one `write(2)` and one wake-up of the verifier
    /// for each cost more than the copy (20,000 writes for a 314 MiB archive, measured). The
    /// block is written to the file and then handed to the verifier as it is: that one copy is
    /// the only one a byte takes between libcurl and the checks.
    func deliver(_ bytes: UnsafeRawBufferPointer) throws(CairnError) {
        guard resealing != nil else { return try emit(bytes) }
        guard let sealed = resealing?.sealing.seal(bytes), !sealed.isEmpty else { return }
        try sealed.withBytes { (raw) throws(CairnError) in try emit(raw) }
    }

    /// Appends outer bytes to the partial file and hands them to the verifier (``deliver(_:)``).
    private func emit(_ bytes: UnsafeRawBufferPointer) throws(CairnError) {
        guard !cancelled.load(ordering: .relaxed) else { throw CairnError(.io, FetchChannel.readerStopped) }
        // Counted as received, so the progress moves with every piece, not every block.
        defer { progress.completedUnitCount += Int64(bytes.count) }
        var done = 0
        while done < bytes.count {
            let target: ByteBlock
            if let filling {
                target = filling
            } else {
                target = try channel.emptyBlock()
                filling = target
            }
            done += target.append(UnsafeRawBufferPointer(rebasing: bytes[done...]))
            if target.room == 0 { try flush() }
        }
    }

    /// The block ``deliver(_:)`` is filling.
    private var filling: ByteBlock?

    /// Writes what ``deliver(_:)`` gathered and hands it to the verifier.
    private func flush() throws(CairnError) {
        guard let block = filling else { return }
        filling = nil
        guard block.end > block.start else {
            try channel.send(block)  // given back: empty
            return
        }
        try output.append(block.valid)
        try channel.send(block)
    }

    /// Copies of a remote seed read ahead: by seed offset, from seed ``prefetchedSeed``.
    private var prefetched: [UInt64: [UInt8]] = [:]
    private var prefetchedSeed = -1
    /// What one read-ahead of a remote seed's copies holds at most.
    private static let prefetchBytes: UInt64 = 16 << 20

    /// Before the copy at `index` from a remote seed, reads it and the next copies from that seed
    /// (up to ``prefetchBytes``) in one go: the source merges neighbours into ranges of up to
    /// 8 MiB and runs 4 at once, instead of one request per chunk record.
    private func prefetchRemoteCopies(at index: Int, of segments: [DeltaPlan.Segment]) throws(CairnError) {
        let first: (seed: Int, from: UInt64)
        switch segments[index] {
        case .copy(let seed, let from, _), .copyRecord(let seed, let from, _): first = (seed, from)
        default: return
        }
        let (seed, from) = first
        guard seed < seeds.seeds.count,
            let remote = seeds.seeds[seed].remote, !(seed == prefetchedSeed && prefetched[from] != nil)
        else { return }
        var ranges: [Range<UInt64>] = []
        var total: UInt64 = 0
        for segment in segments[index...] {
            guard total < Self.prefetchBytes, ranges.count < 1024 else { break }
            switch segment {
            case .copy(let other, let start, let range), .copyRecord(let other, let start, let range):
                guard other == seed else { continue }
                let count = range.upperBound - range.lowerBound
                ranges.append(start..<(start + count))
                total += count
            default:
                continue
            }
        }
        let bytes = try remote.read(ranges: ranges)
        prefetched = [:]
        for (range, piece) in zip(ranges, bytes) { prefetched[range.lowerBound] = piece }
        prefetchedSeed = seed
    }

    private func copy(seed: Int, from: UInt64, count: UInt64) throws(CairnError) {
        guard seed < seeds.seeds.count else { throw CairnError(.invalidArgument, "no seed \(seed)") }
        if seed == prefetchedSeed, let bytes = prefetched.removeValue(forKey: from), UInt64(bytes.count) == count {
            try bytes.withBytes { (raw) throws(CairnError) in try deliver(raw) }
            seedBytes += count
            return
        }
        let source = seeds.seeds[seed]
        var done: UInt64 = 0
        while done < count {
            let want = Int(min(UInt64(buffer.count), count - done))
            let n = try buffer.withMutableBytes { (raw) throws(CairnError) in
                try source.read(fromAbsoluteOffset: from + done, into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<want]))
            }
            guard n > 0 else {
                throw CairnError(.truncated, "the seed ended before the record it was to give", path: seeds.seeds[seed].path, offset: from + done)
            }
            try buffer.withBytes { (raw) throws(CairnError) in try deliver(UnsafeRawBufferPointer(rebasing: raw[0..<n])) }
            done += UInt64(n)
        }
        seedBytes += count
    }

    /// Downloads a plan's `range` and delivers it: read ahead over several connections
    /// (``PlannedDownloads``) when there are, else in one request.
    private func fetchPlanned(_ range: Range<UInt64>, total: UInt64) throws(CairnError) {
        guard planned != nil else { return try fetch(from: range.lowerBound, to: range.upperBound, total: total) }
        for piece in PlannedDownloads.pieces(of: [range]) {
            try download(piece, total: total).withBytes { (raw) throws(CairnError) in try deliver(raw) }
        }
    }

    /// Downloads `start ..< end` (`end` nil: to the end of the archive) and delivers it.
    func fetch(from start: UInt64, to end: UInt64?, total: UInt64? = nil) throws(CairnError) {
        if let resealing, let end {
            // Through the remote's sealed blocks (``SealedRangeReader``), 8 MiB at a time.
            var position = start
            while position < end {
                let piece = position..<min(end, position + HTTPArchiveSource.maximumRange)
                try resealing.ranges.read(piece).withBytes { (raw) throws(CairnError) in try deliver(raw) }
                position = piece.upperBound
            }
            return
        }
        let range: HTTPByteRange?
        if let end {
            guard end > start else { return }
            range = .bounded(start, end - 1)
        } else {
            range = start > 0 ? .from(start) : nil
        }
        let request = HTTPRequest(url: url, range: range, ifRange: range == nil ? nil : validator)
        var position = start
        let url = self.url
        let expected = total ?? expectedLength
        do throws(CairnError) {
            try perform(request, range: range, start: start, end: end, expected: expected, position: &position)
        } catch where range != nil && error.httpStatusCode == 416 {
            // RFC 9110 §15.5.17: nothing of the resource lies at or after `start`, so it is not
            // the archive the partial file began (or no longer is): start over, as for a
            // changed validator, instead of asking for the same range again on every rerun.
            throw CairnError(
                .sourceChanged,
                "the archive at the URL changed: it is now shorter than the \(start) bytes already verified "
                    + "(the server answered 416 to a request for the bytes from \(start) on)",
                path: url, offset: start)
        }
        if let end, position != end {
            throw CairnError(.network, "the server ended the range early", path: url, offset: position)
        }
    }

    /// Sends `request` (for `range`, from `start`), checks its answer's head, and delivers its body.
    private func perform(
        _ request: HTTPRequest, range: HTTPByteRange?, start: UInt64, end: UInt64?, expected: UInt64?, position: inout UInt64
    ) throws(CairnError) {
        let url = self.url
        let validator = self.validator
        _ = try client.perform(
            request,
            // Polled also while nothing arrives: a cancelled fetch of a stalled server ends now,
            // not after the stall timeout.
            isCancelled: { [self] in self.cancelled.load(ordering: .relaxed) },
            onHead: { (head) throws(CairnError) in
                if range == nil {
                    guard head.status == 200 || (head.status == 206 && head.contentRange?.first == 0) else {
                        throw CairnError(
                            .httpStatus, "the server answered \(head.status) to a request for the whole archive", path: url,
                            underlyingCause: .httpStatus(head.status))
                    }
                    try onFreshHead(head)
                    if let length = head.resourceLength { progress.totalUnitCount = Int64(clamping: length) }
                    return
                }
                do throws(CairnError) {
                    try RangeAnswer.check(head, url: url, start: start, end: end, total: expected, validator: validator)
                } catch {
                    if head.status == 200, let validator, head.etag == validator || head.lastModified == validator {
                        sawNoRangeSupport = true
                    }
                    throw error
                }
            },
            onBody: { (piece) throws(CairnError) in
                if let end, position + UInt64(piece.count) > end {
                    throw CairnError(.sourceChanged, "the server sent more bytes than the range asked for", path: url, offset: end)
                }
                try deliver(piece)
                position += UInt64(piece.count)
            })
    }
}
