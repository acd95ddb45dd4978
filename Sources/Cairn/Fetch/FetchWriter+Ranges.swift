import Foundation
import Glibc

extension FetchWriter {
    /// How a fetch's `.rest(from:)` job downloads in parallel (`Spec/0001-container-format.md
    /// §13.8`).
    package struct Parallel: Sendable {
        /// Requests kept in flight (more than 1).
        let connections: Int
        /// The most bytes one request asks for.
        let maximumRange: UInt64
        /// Ranges received whole by earlier runs (the state file's); nil when the partial file
        /// is one prefix (a fresh fetch, or one written front to back).
        let received: [Range<UInt64>]?
        /// Keeps the state file's ranges current.
        let recorder: FetchProgressRecorder
        /// Transient failures of pieces retried.
        let retries: Int
    }

    /// The bytes a fresh parallel fetch asks for first (1 MiB at most), with no validator yet:
    /// its answer says whether the server takes ranges, and gives the archive's length and
    /// validator, by which the other connections start.
    static let firstRequestBytes: UInt64 = 1 << 20

    /// The rest of the archive from `start` over several connections: each piece written at
    /// its offset, and the verifier given the bytes in order, read back from the partial file
    /// (page-cache warm) as the pieces join the received prefix. A fresh fetch (or one without
    /// a recorded validator and length) first asks for the first piece alone; a server that
    /// answers it with the whole archive (200: no range support), or without a strong validator,
    /// is read front to back from that one answer as before.
    func fetchInParallel(from start: UInt64, _ parallel: Parallel) throws(CairnError) {
        if let validator, let total = expectedLength, start > 0 || parallel.received != nil {
            let schedule = RangeSchedule.sharing(
                total: total, start: start, received: parallel.received ?? [], connections: parallel.connections, maximum: parallel.maximumRange)
            let download = try makeDownload(validator: validator, total: total, schedule: schedule, parallel)
            download.start(connections: parallel.connections)
            defer { finishDownload(download) }
            return try feed(from: start, download)
        }
        guard start == 0 else { return try fetch(from: start, to: nil) }
        try fetchFirstPiece(parallel)
    }

    private func makeDownload(
        validator: String, total: UInt64, schedule: RangeSchedule, _ parallel: Parallel
    ) throws(CairnError) -> ParallelRangeDownload {
        ParallelRangeDownload(
            client: client, url: url, validator: validator, total: total,
            output: try FileDescriptor.open(output.partialPath, flags: O_WRONLY | O_NOFOLLOW), progress: progress,
            recorder: parallel.recorder, retries: parallel.retries, schedule: schedule,
            isCancelled: { [self] in cancelled.load(ordering: .relaxed) || channel.isStopped })
    }

    /// The first request of a fresh parallel fetch, and what its answer decides.
    private func fetchFirstPiece(_ parallel: Parallel) throws(CairnError) {
        let first = min(parallel.maximumRange, Self.firstRequestBytes)
        let request = HTTPRequest(url: url, range: .bounded(0, first - 1), ifRange: nil)
        let url = self.url
        var download: ParallelRangeDownload?
        var landing: ParallelRangeDownload.Landing?
        var received: UInt64 = 0
        // A range answer without a validator: the rest follows in one request, as a resume's.
        var restFollows = false
        defer { download.map(finishDownload) }
        do throws(CairnError) {
            _ = try client.perform(
                request, isCancelled: { [self] in cancelled.load(ordering: .relaxed) },
                onHead: { [self] (head) throws(CairnError) in
                    guard head.status == 200 || (head.isRangeAnswer && head.contentRange?.first == 0) else {
                        throw CairnError(
                            .httpStatus, "the server answered \(head.status) to a request for the start of the archive", path: url,
                            underlyingCause: .httpStatus(head.status))
                    }
                    if let total = head.resourceLength, let validator = head.strongValidator, head.isRangeAnswer, total > first,
                        head.contentRange?.last == first - 1
                    {
                        try parallel.recorder.replace(FetchState(url: url, validator: validator, length: total, received: []))
                        progress.totalUnitCount = Int64(clamping: total)
                        let schedule = RangeSchedule.sharing(
                            total: total, start: 0, received: [], connections: parallel.connections, maximum: parallel.maximumRange,
                            taken: 0..<first)
                        let started = try makeDownload(validator: validator, total: total, schedule: schedule, parallel)
                        started.start(connections: parallel.connections - 1)
                        download = started
                        landing = started.landing(for: 0..<first)
                        return
                    }
                    // One answer holds it all (a 200, or an archive no longer than the first piece),
                    // or there is no validator to bind ranges with: front to back, as before.
                    restFollows = head.isRangeAnswer && (head.resourceLength.map { $0 > first } ?? true)
                    try onFreshHead(head)
                    if let length = head.resourceLength { progress.totalUnitCount = Int64(clamping: length) }
                },
                onBody: { [self] (piece) throws(CairnError) in
                    if let landing { return try landing.land(piece) }
                    try deliver(piece)
                    received += UInt64(piece.count)
                })
        } catch {
            // What arrived is written and kept, as a cut piece's is.
            landing?.keep()
            throw error
        }
        guard let download, let landing else {
            guard restFollows else { return }
            guard received == first else { throw CairnError(.network, "the server ended the range early", path: url, offset: received) }
            return try fetch(from: first, to: nil)
        }
        try landing.finish()
        download.firstPieceEnded(0..<first)
        download.start(connections: 1)
        try feed(from: 0, download)
    }

    /// The verifier's bytes in order: each run of received bytes read back from the partial
    /// file into the channel's blocks as it joins the prefix.
    private func feed(from start: UInt64, _ download: ParallelRangeDownload) throws(CairnError) {
        let input = try FileDescriptor.open(output.partialPath, flags: O_RDONLY | O_NOFOLLOW)
        defer { _ = try? input.close() }
        var position = start
        while position < download.total {
            let end = try download.waitForBytes(at: position)
            while position < end {
                let block = try channel.emptyBlock()
                let want = Int(min(UInt64(block.capacity), end - position))
                let n = try input.read(fromAbsoluteOffset: position, into: UnsafeMutableRawBufferPointer(rebasing: block.bytes[0..<want]))
                block.end = n
                try channel.send(block)
                guard n == want else {
                    throw CairnError(.io, "the partial file ended before the ranges it received", path: output.partialPath, offset: position)
                }
                position += UInt64(n)
            }
        }
    }

    private func finishDownload(_ download: ParallelRangeDownload) {
        download.stopAndWait()
        usedRanges = true
        rangeRetries += download.retriesUsed
        if download.sawNoRangeSupport { sawNoRangeSupport = true }
    }
}
