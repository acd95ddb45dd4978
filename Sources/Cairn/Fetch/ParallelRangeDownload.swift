import Dispatch
import Foundation
import Glibc
import Synchronization

/// The connections of a parallel fetch (`Spec/0001-container-format.md §13.8`): up to N
/// threads, each downloading one piece of a ``RangeSchedule`` at a time with a bounded range
/// request that carries the archive's validator in `If-Range` (RFC 9110 §13.1.5, every answer
/// checked by `RangeAnswer`), and writing its bytes at their offset in the partial file with
/// `pwrite(2)` as they land. Each write is recorded in the state file, so a rerun keeps it.
///
/// A transient failure of one piece (a cut connection, a 5xx) gives the piece back to be
/// downloaded again while the other connections go on, up to the fetch's retries; any other
/// failure (an answer that is not the asked part of the same archive, a full disk) ends the
/// download, and the writer reports it.
///
/// Memory: each connection gathers what libcurl hands over (16 KiB pieces) into one buffer of
/// ``gatherBytes`` before writing it: N × 1 MiB for N connections.
final class ParallelRangeDownload: Sendable {
    let client: HTTPClient
    let url: String
    let validator: String
    let total: UInt64
    /// The partial file, opened for writing by this download (closed by ``stopAndWait()``).
    let output: FileDescriptor
    private let progress: Progress
    private let recorder: FetchProgressRecorder
    private let retries: Int
    private let schedule: Mutex<RangeSchedule>
    /// Signalled whenever a piece arrives or fails (the feeder may be waiting).
    private let changed = DispatchSemaphore(value: 0)
    private let threads = DispatchGroup()
    private let retried = Atomic<Int>(0)
    private let aborted = Atomic<Bool>(false)
    private let noRangeSupport = Atomic<Bool>(false)
    private let closed = Atomic<Bool>(false)
    private let isCancelled: @Sendable () -> Bool

    /// What one connection gathers before a `pwrite(2)` (1 MiB, the channel's block size).
    static let gatherBytes = FetchChannel.blockSize

    init(
        client: HTTPClient, url: String, validator: String, total: UInt64, output: FileDescriptor, progress: Progress,
        recorder: FetchProgressRecorder, retries: Int, schedule: RangeSchedule, isCancelled: @escaping @Sendable () -> Bool
    ) {
        self.client = client
        self.url = url
        self.validator = validator
        self.total = total
        self.output = output
        self.progress = progress
        self.recorder = recorder
        self.retries = retries
        self.schedule = Mutex(schedule)
        self.isCancelled = isCancelled
    }

    /// Transient failures of pieces retried so far.
    var retriesUsed: Int { min(retried.load(ordering: .relaxed), retries) }
    /// Whether a range request was answered with the whole archive and the same validator.
    var sawNoRangeSupport: Bool { noRangeSupport.load(ordering: .relaxed) }

    /// The piece a fetch's first request downloaded outside the schedule ended.
    func firstPieceEnded(_ piece: Range<UInt64>) {
        schedule.withLock { $0.end(piece) }
        changed.signal()
    }

    /// Records bytes written at their offset: in the state file (a rerun keeps them) and the
    /// schedule (the verifier may read them), and wakes the feeder.
    func received(_ range: Range<UInt64>) {
        recorder.received(range)
        schedule.withLock { $0.receive(range) }
        changed.signal()
    }

    /// Where one answer's body lands: written at `piece`'s offsets, recorded as it is written.
    func landing(for piece: Range<UInt64>) -> Landing {
        Landing(output: output, piece: piece, url: url, progress: progress) { [self] range in received(range) }
    }

    /// Starts `count` connections.
    func start(connections count: Int) {
        for _ in 0..<max(0, count) {
            threads.enter()
            let thread = Thread { [self] in
                work()
                threads.leave()
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    /// Stops handing out pieces and ends the transfers in flight, then waits for every
    /// connection to end: no thread writes to the partial file after this returns.
    func stopAndWait() {
        aborted.store(true, ordering: .relaxed)
        threads.wait()
        if closed.exchange(true, ordering: .relaxed) == false { _ = try? output.close() }
    }

    /// Blocks until the byte at `position` arrived; returns the end of the bytes received
    /// from there without a gap.
    ///
    /// - Throws: what ended the download; `.io` with ``FetchChannel/readerStopped`` when cancelled.
    func waitForBytes(at position: UInt64) throws(CairnError) -> UInt64 {
        while true {
            let (end, failure, idle) = schedule.withLock { ($0.receivedEnd(from: position), $0.failure, $0.isIdle) }
            if end > position { return end }
            if let failure { throw failure }
            if isCancelled() || aborted.load(ordering: .relaxed) { throw CairnError(.io, FetchChannel.readerStopped) }
            if idle {
                throw CairnError(.io, "no range of the parallel fetch holds the bytes at \(position)", path: url, offset: position)
            }
            _ = changed.wait(timeout: .now() + .milliseconds(200))
        }
    }

    /// One connection: pieces until none is left or the download ended.
    private func work() {
        while !aborted.load(ordering: .relaxed), let piece = schedule.withLock({ $0.next() }) {
            let landing = landing(for: piece)
            do throws(CairnError) {
                try download(piece, into: landing)
                schedule.withLock { $0.end(piece) }
            } catch {
                // What arrived before the failure is written and kept (a rerun keeps it too).
                landing.keep()
                let stopping = isCancelled() || aborted.load(ordering: .relaxed)
                if !stopping, RetryPolicy.isTransient(error), retried.add(1, ordering: .relaxed).newValue <= retries {
                    // What arrived before the cut is kept; the rest is asked for again.
                    schedule.withLock { $0.end(piece, remainder: landing.written..<piece.upperBound) }
                    changed.signal()
                    usleep(useconds_t(min(5000, 200 << min(retried.load(ordering: .relaxed) - 1, 5)) * 1000))
                    continue
                }
                schedule.withLock {
                    $0.end(piece)
                    $0.fail(error)
                }
            }
            changed.signal()
        }
        changed.signal()
    }

    /// Downloads `piece` with one bounded range request and writes it at its offset.
    ///
    /// - Throws: `.sourceChanged` for an answer that is not that part of the same archive;
    ///   `.network` for a body that ends early; `.httpStatus`; `.io` for the partial file.
    func download(_ piece: Range<UInt64>, into landing: Landing) throws(CairnError) {
        let request = HTTPRequest(url: url, range: .bounded(piece.lowerBound, piece.upperBound - 1), ifRange: validator)
        let (url, validator, total) = (self.url, self.validator, self.total)
        let stop = { @Sendable [self] in isCancelled() || aborted.load(ordering: .relaxed) }
        _ = try client.perform(
            request, isCancelled: stop,
            onHead: { [self] (head) throws(CairnError) in
                do throws(CairnError) {
                    try RangeAnswer.check(head, url: url, start: piece.lowerBound, end: piece.upperBound, total: total, validator: validator)
                } catch {
                    if head.status == 200, head.etag == validator || head.lastModified == validator {
                        noRangeSupport.store(true, ordering: .relaxed)
                    }
                    throw error
                }
            },
            onBody: { (bytes) throws(CairnError) in try landing.land(bytes) })
        try landing.finish()
    }

    /// Gathers one answer's body and writes it at its offset (``gatherBytes`` at a time),
    /// telling of each write.
    final class Landing {
        private let output: FileDescriptor
        /// The end of the bytes written so far.
        private(set) var written: UInt64
        private let end: UInt64
        private let url: String
        private let progress: Progress
        private let onWritten: (Range<UInt64>) -> Void
        private var buffer: [UInt8] = []

        init(output: FileDescriptor, piece: Range<UInt64>, url: String, progress: Progress, onWritten: @escaping (Range<UInt64>) -> Void) {
            self.output = output
            written = piece.lowerBound
            end = piece.upperBound
            self.url = url
            self.progress = progress
            self.onWritten = onWritten
            buffer.reserveCapacity(Int(min(UInt64(ParallelRangeDownload.gatherBytes), UInt64(piece.count))))
        }

        /// Takes a piece of the body.
        ///
        /// - Throws: `.sourceChanged` when it runs past the range; `.io` for the partial file.
        func land(_ bytes: UnsafeRawBufferPointer) throws(CairnError) {
            guard written + UInt64(buffer.count + bytes.count) <= end else {
                throw CairnError(.sourceChanged, "the server sent more bytes than the range asked for", path: url, offset: end)
            }
            buffer.append(contentsOf: bytes)
            progress.completedUnitCount += Int64(bytes.count)
            if buffer.count >= ParallelRangeDownload.gatherBytes { try write() }
        }

        /// Writes what is gathered; checks the whole range arrived.
        ///
        /// - Throws: `.network` when the body ended early; `.io` for the partial file.
        func finish() throws(CairnError) {
            try write()
            guard written == end else { throw CairnError(.network, "the server ended the range early", path: url, offset: written) }
        }

        /// After a failed transfer: writes what arrived, if it can (a failure to write only
        /// costs downloading it again).
        func keep() { try? write() }

        private func write() throws(CairnError) {
            guard !buffer.isEmpty else { return }
            try buffer.withBytes { (raw) throws(CairnError) in try output.writeAll(raw, atAbsoluteOffset: written) }
            let range = written..<(written + UInt64(buffer.count))
            written = range.upperBound
            buffer.removeAll(keepingCapacity: true)
            onWritten(range)
        }
    }
}
