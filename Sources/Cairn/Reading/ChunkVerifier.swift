/// Checks chunk records' contents (decompression to exactly the declared length, SHA-256 equal
/// to the id) on every core, for a reader that only needs to know that they are right.
///
/// Payloads are grouped into about ``groupBytes`` and each group is checked by its own detached
/// task; at most ``window`` groups are in flight, so memory stays near `window × groupBytes`.
/// The first failure (in archive order) is rethrown.
final class ChunkVerifier {
    private let window: Int
    private let groupBytes: Int
    private var group: [(payload: [UInt8], offset: UInt64)] = []
    private var groupSize = 0
    private var tasks: [Task<Void, any Error>] = []

    init(window: Int = 4, groupBytes: Int = 2 << 20) {
        self.window = max(1, window)
        self.groupBytes = groupBytes
    }

    /// Queues one chunk record payload found at `offset`.
    nonisolated(nonsending) func add(_ payload: [UInt8], offset: UInt64) async throws {
        group.append((payload, offset))
        groupSize += payload.count
        if groupSize >= groupBytes { try await submit() }
    }

    private nonisolated(nonsending) func submit() async throws {
        guard !group.isEmpty else { return }
        let work = group
        group = []
        groupSize = 0
        tasks.append(
            Task.detached {
                let decompressor = ChunkDecompressor()
                var buffer: [UInt8] = []
                for (payload, offset) in work {
                    try Task.checkCancellation()
                    if let wanted = ChunkRecordPrefix.declaredRawLength(inPayload: payload), buffer.count < wanted {
                        buffer = [UInt8](repeating: 0, count: wanted)
                    }
                    try buffer.withMutableBytes { (raw) throws(CairnError) in
                        try ArchiveReader.decodeChunk(
                            payload, expected: nil, rawLength: nil, offset: offset, using: decompressor, into: raw)
                    }
                }
            })
        while tasks.count > window {
            try await tasks.removeFirst().value
        }
    }


    /// Checks what is still queued and waits for every task.
    nonisolated(nonsending) func finish() async throws {
        try await submit()
        while !tasks.isEmpty {
            try await tasks.removeFirst().value
        }
    }

    /// Checks everything queued and returns the first chunk error in archive order, if any (used
    /// when a later structural check failed: an earlier bad chunk is the more precise report).
    nonisolated(nonsending) func firstError() async -> CairnError? {
        if (try? await submit()) == nil { /* a submit error is found below */ }
        var first: CairnError?
        while !tasks.isEmpty {
            do {
                try await tasks.removeFirst().value
            } catch let error as CairnError {
                if first == nil { first = error }
            } catch {}
        }
        return first
    }

    /// Cancels the tasks still running.
    func cancel() {
        for task in tasks { task.cancel() }
        tasks.removeAll()
    }
}
