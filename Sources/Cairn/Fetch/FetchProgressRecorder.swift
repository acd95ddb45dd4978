import Foundation
import Synchronization

/// Keeps a fetch's state file current: the fresh state a whole-archive answer gives (synced),
/// and how far chunk contents were checked (not synced, every MiB or so: a lagging record only costs
/// hashing those bytes again). Called from the writer thread and the verifier, hence the lock.
final class FetchProgressRecorder: Sendable {
    private let path: String
    private let state: Mutex<FetchState?>
    /// Where this attempt's new bytes start (the verified prefix read back ends there).
    private let start: UInt64

    /// Told the verified length as each commit verifies (``ArchiveFetcher/checkedProgress``).
    private let checked: Progress?

    init(path: String, state: FetchState?, start: UInt64, checked: Progress? = nil) {
        self.path = path
        self.state = Mutex(state)
        self.start = start
        self.checked = checked
        verifiedFlag.store(start, ordering: .relaxed)
    }

    /// The end of the last commit verified in this attempt (``start`` before the first).
    var verified: UInt64 { verifiedFlag.load(ordering: .relaxed) }
    private let verifiedFlag = Atomic<UInt64>(0)

    /// Records that a parallel fetch received `range` whole (`Spec/0001 §13.8`), not synced:
    /// every range is checked again before the rename, so a record the disk lost only costs
    /// fetching that range again.
    func received(_ range: Range<UInt64>) {
        state.withLock { current in
            guard var next = current else { return }
            var ranges = next.receivedRanges
            RangeSchedule.merge(range, into: &ranges)
            next.received = ranges.map(FetchState.ReceivedRange.init)
            try? next.save(for: path, syncing: false)
            current = next
        }
    }

    /// Forgets the received bytes in `suspect` (they are fetched again) and records where
    /// verification failed (synced), after bytes of a parallel fetch did not verify.
    func refetch(_ suspect: Range<UInt64>, damagedAt offset: UInt64) {
        state.withLock { current in
            guard var next = current else { return }
            next.received = RangeSchedule.subtract(suspect, from: next.receivedRanges).map(FetchState.ReceivedRange.init)
            next.damagedAt = offset
            try? next.save(for: path)
            current = next
        }
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
        verifiedFlag.store(verified, ordering: .relaxed)
        checked?.completedUnitCount = Int64(clamping: verified)
        state.withLock { current in
            if let checked, let length = current?.length { checked.totalUnitCount = Int64(clamping: length) }
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
