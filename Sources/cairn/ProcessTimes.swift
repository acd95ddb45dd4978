import Glibc

/// CPU time and peak memory of this process, from `getrusage(2)`.
enum ProcessTimes {
    /// User + system CPU seconds so far.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec)
            + Double(usage.ru_stime.tv_usec) / 1e6
    }

    /// Peak resident set size in bytes.
    static func peakResidentBytes() -> UInt64 {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return UInt64(max(0, usage.ru_maxrss)) * 1024
    }
}
