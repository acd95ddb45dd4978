import Glibc

/// The harness's CPU scheduling: the default time sharing, or `--realtime`.
///
/// On a shared machine a compile or another benchmark takes cores from whichever tool is being
/// timed, and a ratio of two wall times then measures the neighbours as much as the tools.
/// Under `SCHED_RR` (`sched_setscheduler(2)`) the harness's process and everything it starts
/// (each inherits the policy across `fork` and `exec`) run before any time-shared process; the
/// kernel still keeps 5% of every second for the others (`sched_rt_runtime_us`). Cairn and its
/// peers are scheduled alike, so their ratios stay fair.
enum Scheduling {
    /// The real-time priority used: low among real-time ones (1–99), above every normal process.
    static let priority: Int32 = 10

    /// What the report says of the scheduling in effect.
    static var description: String {
        switch sched_getscheduler(0) {
        case SCHED_RR:
            return "SCHED_RR priority \(priority) (--realtime): the tools ran before the machine's other work"
        default:
            return "time sharing (the default): other work on the machine competes for the cores (--realtime avoids it)"
        }
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Puts the calling process under `SCHED_RR` at ``priority``; call it first, before any
    /// thread or child is started, so that all of them inherit it.
    ///
    /// - Throws: ``Failure`` naming `errno` (`EPERM`: needs root or `CAP_SYS_NICE`).
    static func enterRealtime() throws(Failure) {
        var parameters = sched_param(sched_priority: priority)
        guard sched_setscheduler(0, SCHED_RR, &parameters) == 0 else {
            let cause = String(cString: strerror(errno))
            throw Failure(description: "--realtime: sched_setscheduler(SCHED_RR, \(priority)) failed: \(cause) (needs root or CAP_SYS_NICE)")
        }
    }
}
