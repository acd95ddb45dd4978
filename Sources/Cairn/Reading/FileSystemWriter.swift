import Foundation
import Glibc

/// Runs an extraction's file-system work (create, write, set attributes, close, journal) on a
/// thread of its own, in the order it was submitted, so that reading, decoding and verifying the
/// archive on one core overlaps with the kernel's work of making files on the other.
///
/// Measured on 100,000 small files (ext4, 2 cores): the system calls that make a file
/// (`openat` with `O_CREAT`, `pwrite`, `fchmod`, `futimens`, `close`) were half of extraction's
/// CPU time, and extraction ran on one core; with them here, both cores work.
///
/// - Order: jobs run one at a time in submission order, so a directory exists before the files
///   in it, a file's writes come after its creation, and a journal line after the files it
///   counts (all or nothing and `--resume` see what they saw before).
/// - Memory: the jobs waiting hold at most ``byteLimit`` bytes (their payload plus
///   ``jobOverhead`` each); ``submit(bytes:_:)`` blocks the submitter while more are queued.
///   A single job larger than the limit is admitted alone.
/// - Errors: the first job that throws stops the rest (they are dropped unrun); the error is
///   rethrown by the next ``submit(bytes:_:)``, ``drain()`` or ``stop()``.
///
/// The submitter may touch what the jobs touch (the staging directory, an open file) only after
/// ``drain()`` returned: then the thread is idle until the next submission, and the mutex orders
/// every write the jobs made before the submitter's reads.
final class FileSystemWriter: @unchecked Sendable {
    /// A job: file-system work that may throw.
    typealias Job = () throws -> Void

    /// The most bytes the waiting jobs hold (2 MiB): enough to keep the thread busy across a
    /// pack's worth of small files, small beside extraction's other buffers.
    static let byteLimit = 2 << 20
    /// What a job counts for besides its payload (a closure and its captures).
    static let jobOverhead = 256
    /// Jobs the thread lets gather before it is woken (unless the submitter drains or the
    /// payload passes half of ``byteLimit``): one wake-up per batch, not per job.
    static let batch = 64

    // Everything below is touched only with `mutex` held.
    private var queue: [(job: Job, cost: Int)] = []
    /// The next job of `queue` to run (jobs before it were taken).
    private var head = 0
    private var queuedCost = 0
    /// Whether the thread is running a job it took.
    private var busy = false
    private var failure: (any Error)?
    private var stopping = false
    private var exited = false
    /// Whether the thread waits for a job, and how many threads wait for one to end (the
    /// submitter, another writer's job): a condition is signalled only when someone waits on it (a `futex` call per job was more
    /// system time than the work it moved).
    private var threadWaits = false
    private var jobWaiters = 0
    /// How many wait for jobs to run (``drain()``, ``waitUntilDone(_:)``): the thread then
    /// runs what is queued without waiting for a batch.
    private var drainers = 0
    /// Jobs submitted, and jobs run (or dropped after a failure): a job's ticket is the count
    /// of jobs submitted up to it.
    private var submitted = 0
    private var completed = 0
    /// The ticket of the last urgent job: until it has run, the thread does not wait for a batch.
    private var urgentTicket = 0
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// Signalled when a job is queued or `stopping` is set (the thread may be waiting).
    private let jobQueued: UnsafeMutablePointer<pthread_cond_t>
    /// Signalled when a job ends or the thread exits (the submitter may be waiting for room or
    /// for the queue to empty).
    private let jobDone: UnsafeMutablePointer<pthread_cond_t>

    init() {
        mutex = .allocate(capacity: 1)
        jobQueued = .allocate(capacity: 1)
        jobDone = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(jobQueued, nil)
        pthread_cond_init(jobDone, nil)
        let thread = Thread { [self] in runJobs() }
        thread.start()
    }

    deinit {
        pthread_cond_destroy(jobDone)
        pthread_cond_destroy(jobQueued)
        pthread_mutex_destroy(mutex)
        jobDone.deallocate()
        jobQueued.deallocate()
        mutex.deallocate()
    }

    /// Queues `job`, which holds `bytes` of payload, blocking while the queued jobs hold more
    /// than ``byteLimit``. An `urgent` job (a journal line) wakes the thread at once instead of
    /// waiting for a batch, so what it records is on disk promptly.
    ///
    /// - Throws: the error an earlier job threw (and `job` is not queued).
    @discardableResult
    func submit(bytes: Int = 0, urgent: Bool = false, _ job: @escaping Job) throws -> Int {
        let cost = bytes + Self.jobOverhead
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while failure == nil, queuedCost > 0, queuedCost + cost > Self.byteLimit { waitForJobDone() }
        if let failure { throw failure }
        queue.append((job, cost))
        queuedCost += cost
        submitted += 1
        if urgent { urgentTicket = submitted }
        defer {
            if threadWaits, urgent || queue.count - head >= Self.batch || queuedCost >= Self.byteLimit / 2 { pthread_cond_signal(jobQueued) }
        }
        return submitted
    }

    /// The ticket of the last job submitted (0 before any).
    var lastTicket: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return submitted
    }

    /// Waits until the jobs up to `ticket` (``submit(bytes:_:)``'s result) have run. Another
    /// writer's job may wait so on this writer (a journal line after the files of both), as
    /// long as this writer's jobs never wait on that one.
    ///
    /// - Throws: the error a job threw.
    func waitUntilDone(_ ticket: Int) throws {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        drainers += 1
        defer { drainers -= 1 }
        if threadWaits { pthread_cond_signal(jobQueued) }
        while failure == nil, !exited, completed < ticket { waitForJobDone() }
        if let failure { throw failure }
    }

    /// Waits until every job submitted has run.
    ///
    /// - Throws: the error a job threw.
    func drain() throws {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        drainers += 1
        defer { drainers -= 1 }
        if threadWaits { pthread_cond_signal(jobQueued) }
        while failure == nil, !exited, head < queue.count || busy { waitForJobDone() }
        if let failure { throw failure }
    }

    /// Waits (mutex held) until a job ends or the thread exits.
    private func waitForJobDone() {
        jobWaiters += 1
        pthread_cond_wait(jobDone, mutex)
        jobWaiters -= 1
    }

    /// Runs what is queued (nothing after a failure), then ends the thread; waits for it. Call
    /// once, before what the jobs use is closed or removed.
    ///
    /// - Throws: the error a job threw.
    func stop() throws {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        stopping = true
        pthread_cond_signal(jobQueued)
        while !exited { waitForJobDone() }
        if let failure { throw failure }
    }

    /// The thread's loop: takes jobs in order until stopped with nothing left.
    private func runJobs() {
        // Named for profiles (`perf report --sort comm`, the benchmark's "by thread").
        Thread.current.name = "cairn-writer"
        pthread_mutex_lock(mutex)
        while true {
            if head == queue.count {
                // Idle: wait for a batch, a drain or the end.
                while !stopping,
                    !(head < queue.count
                        && (drainers > 0 || completed < urgentTicket || queue.count - head >= Self.batch
                            || queuedCost >= Self.byteLimit / 2))
                {
                    threadWaits = true
                    pthread_cond_wait(jobQueued, mutex)
                    threadWaits = false
                }
                if head == queue.count { break }
            }
            let (job, cost) = queue[head]
            queue[head].job = {}
            head += 1
            if head == queue.count {
                queue.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 1024, head * 2 >= queue.count {
                // Taken slots go, so a queue that never empties does not grow.
                queue.removeFirst(head)
                head = 0
            }
            busy = true
            pthread_mutex_unlock(mutex)
            var thrown: (any Error)?
            do { try job() } catch { thrown = error }
            pthread_mutex_lock(mutex)
            busy = false
            queuedCost -= cost
            completed += 1
            if let thrown, failure == nil {
                failure = thrown
                completed += queue.count - head
                queue.removeAll()
                head = 0
                queuedCost = 0
            }
            // The submitter waits for room (woken once half is free) or for the queue to empty.
            if jobWaiters > 0, queuedCost <= Self.byteLimit / 2 || head == queue.count || failure != nil || drainers > 0 {
                pthread_cond_broadcast(jobDone)
            }
        }
        exited = true
        pthread_cond_broadcast(jobDone)
        pthread_mutex_unlock(mutex)
    }
}
