import Synchronization

/// Checks chunk records' contents (decompression to exactly the declared length, the id by the
/// archive's ``ChunkIDFunction`` equal to the record's) on every core, for a reader that only needs to know that they are right.
///
/// Payloads are grouped into about ``groupBytes`` and each group is checked by its own detached
/// task; at most ``window`` groups are in flight, so memory stays near `window × groupBytes`.
/// A damaged chunk does not stop the checking: the failures are collected, in archive order, up
/// to ``limit``, so `verify` can report every bad chunk.
final class ChunkVerifier {
    private let window: Int
    private let groupBytes: Int
    private let idFunction: ChunkIDFunction
    private var group: [(framed: [UInt8], offset: UInt64)] = []
    private var groupSize = 0
    /// The groups being checked, in archive order: each one's task, the offset of its first
    /// record, and whether its task has ended (set by the task itself, so that a finished group
    /// is counted as checked before the window forces a wait for it).
    private var inFlight: [(task: Task<[CairnError], any Error>, start: UInt64, ended: EndFlag)] = []

    private final class EndFlag: Sendable {
        let value = Atomic<Bool>(false)
    }
    /// Failures found so far, in archive order.
    private(set) var failures: [CairnError] = []
    /// The most failures kept.
    let limit = 100

    init(ids: ChunkIDFunction, window: Int = 4, groupBytes: Int = 2 << 20) {
        self.idFunction = ids
        self.window = max(1, window)
        self.groupBytes = groupBytes
    }

    /// Queues one chunk record found at `offset`, framed (header, payload, CRC), so that its
    /// payload is not copied out.
    nonisolated(nonsending) func add(framed record: [UInt8], offset: UInt64) async throws {
        group.append((record, offset))
        groupSize += record.count
        if groupSize >= groupBytes { try await submit() }
        try await collectFinished()
    }

    /// Collects the groups at the front whose tasks have ended, so ``checked(before:)`` counts
    /// them without waiting for the window to fill.
    nonisolated(nonsending) func collectFinished() async throws {
        while let first = inFlight.first, first.ended.value.load(ordering: .acquiring) {
            try await collect(inFlight.removeFirst().task)
        }
    }

    private nonisolated(nonsending) func submit() async throws {
        guard !group.isEmpty else { return }
        let work = group
        group = []
        groupSize = 0
        let ended = EndFlag()
        let ids = idFunction
        let task = Task.detached {
            defer { ended.value.store(true, ordering: .releasing) }
            let decompressor = ChunkDecompressor()
            var buffer: [UInt8] = []
            var failed: [CairnError] = []
            for (framed, offset) in work {
                try Task.checkCancellation()
                guard framed.count >= RecordFraming.overhead else {
                    failed.append(CairnError(.truncated, "chunk record shorter than its framing", offset: offset))
                    continue
                }
                let payload = RecordFraming.headerLength..<(framed.count - RecordFraming.trailerLength)
                if let wanted = ChunkRecordPrefix.declaredRawLength(inPayload: framed, start: payload.lowerBound), buffer.count < wanted {
                    buffer = [UInt8](repeating: 0, count: wanted)
                }
                do throws(CairnError) {
                    try buffer.withMutableBytes { (raw) throws(CairnError) in
                        try ArchiveReader.decodeChunk(
                            framed, range: payload, expected: nil, rawLength: nil, offset: offset, ids: ids, using: decompressor, into: raw)
                    }
                } catch {
                    failed.append(error)
                }
            }
            return failed
        }
        inFlight.append((task, work[0].offset, ended))
        while inFlight.count > window {
            try await collect(inFlight.removeFirst().task)
        }
    }

    /// Where the first chunk record not yet checked starts, or `end` (the offset the reader has
    /// reached) when every one queued so far is checked. While ``failures`` is empty, every chunk
    /// record before the returned offset decompressed to its declared length and hashed to its id.
    func checked(before end: UInt64) -> UInt64 {
        inFlight.first?.start ?? group.first?.offset ?? end
    }

    private nonisolated(nonsending) func collect(_ task: Task<[CairnError], any Error>) async throws {
        let found = try await task.value
        failures.append(contentsOf: found.prefix(max(0, limit - failures.count)))
    }


    /// Checks what is still queued and waits for every task; the failures are in ``failures``.
    nonisolated(nonsending) func finish() async throws {
        try await submit()
        while !inFlight.isEmpty {
            try await collect(inFlight.removeFirst().task)
        }
    }

    /// Cancels the tasks still running.
    func cancel() {
        for group in inFlight { group.task.cancel() }
        inFlight.removeAll()
    }
}
