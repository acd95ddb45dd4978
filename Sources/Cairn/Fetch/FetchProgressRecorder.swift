import Synchronization

/// Keeps a fetch's state file current: the fresh state a whole-archive answer gives (synced),
/// and how far chunk contents were checked (not synced, every MiB or so: a lagging record only costs
/// hashing those bytes again). Called from the writer thread and the verifier, hence the lock.
final class FetchProgressRecorder: Sendable {
    private let path: String
    private let state: Mutex<FetchState?>
    /// Where this attempt's new bytes start (the verified prefix read back ends there).
    private let start: UInt64

    init(path: String, state: FetchState?, start: UInt64) {
        self.path = path
        self.state = Mutex(state)
        self.start = start
    }

    func replace(_ fresh: FetchState) throws(CairnError) {
        try state.withLock { (current) throws(CairnError) in
            try fresh.save(for: path)
            current = fresh
        }
    }

    /// Whether a commit after ``start`` verified in this attempt: the bytes fetched continued the
    /// partial file.
    var advanced: Bool { advancedFlag.load(ordering: .relaxed) }
    private let advancedFlag = Atomic<Bool>(false)

    /// Records where the remote archive failed verification (synced).
    func damaged(at offset: UInt64) {
        state.withLock { current in
            guard var next = current else { return }
            next.damagedAt = offset
            try? next.save(for: path)
            current = next
        }
    }

    /// Rewrites the state when the checked contents advanced by ``saveEvery`` since it was last
    /// written: a record that lags only costs hashing those bytes again on a rerun.
    func advance(verified: UInt64, contentChecked: UInt64) {
        if verified > start { advancedFlag.store(true, ordering: .relaxed) }
        state.withLock { current in
            guard var next = current, contentChecked >= (next.contentChecked ?? 0) + Self.saveEvery else { return }
            next.contentChecked = contentChecked
            // A state that cannot be written (a full disk) only loses the shortcut.
            try? next.save(for: path, syncing: false)
            current = next
        }
    }

    /// How far the checked contents advance between two writes of the state (1 MiB: chunks are
    /// checked in groups of about 2 MiB, so about one write per group).
    static let saveEvery: UInt64 = 1 << 20
}
