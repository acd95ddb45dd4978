import Foundation
import Glibc

/// What one child process cost, from `wait4(2)`'s `rusage` (the child and every descendant it
/// waited for: CPU times are summed over the tree, `ru_maxrss` is the largest single process).
struct ProcessResult {
    var exitStatus: Int32
    var wallSeconds: Double
    var userSeconds: Double
    var systemSeconds: Double
    /// Peak resident set size of the largest process in the tree, bytes.
    var peakRSSBytes: UInt64
    var standardOutput: String
    var standardError: String

    var cpuSeconds: Double { userSeconds + systemSeconds }
    var succeeded: Bool { exitStatus == 0 }
}

/// Wall-clock time in seconds, monotonic.
func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Spawns commands with `posix_spawn` and measures them with `wait4`.
struct ProcessRunner {
    /// Where the children's standard output and error go (then read back).
    var logDirectory: String
    /// Variables added to (or replacing those of) this process's environment.
    var environment: [String: String] = [:]

    /// GNU time, used as a small intermediate parent for peak RSS (see ``run(_:label:)``).
    static let gnuTime: String? = access("/usr/bin/time", X_OK) == 0 ? "/usr/bin/time" : nil

    /// Runs `arguments` (the first is an absolute path or a name on `PATH`), stdin from
    /// /dev/null, stdout and stderr to files; returns when it exits.
    ///
    /// Peak RSS: Linux carries the parent's high-water RSS into a spawned child's `ru_maxrss`
    /// (it is recorded at `execve` from the address space the child was cloned from), so a
    /// child spawned straight from this process never reports less than this process's own
    /// RSS. The command therefore runs under `/usr/bin/time -f %M` (a ~2 MiB parent) and its
    /// figure is used; CPU times come from `wait4` (they include time's child).
    func run(_ arguments: [String], label: String) throws -> ProcessResult {
        let outPath = "\(logDirectory)/\(label).out"
        let errPath = "\(logDirectory)/\(label).err"
        let rssPath = "\(logDirectory)/\(label).rss"
        let arguments = Self.gnuTime.map { [$0, "-f", "%M", "-o", rssPath, "--"] + arguments } ?? arguments
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)

        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for p in argv { free(p) }
            for p in envp { free(p) }
        }
        var pid: pid_t = 0
        let started = monotonicSeconds()
        let spawned = posix_spawnp(&pid, arguments[0], &actions, nil, argv, envp)
        guard spawned == 0 else {
            throw BenchError("cannot start \(arguments[0]): \(String(cString: strerror(spawned)))")
        }
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 {
            guard errno == EINTR else { throw BenchError("wait4 failed: \(String(cString: strerror(errno)))") }
        }
        let wall = monotonicSeconds() - started
        // WIFEXITED / WEXITSTATUS / WTERMSIG are macros, not imported.
        let exit: Int32 = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        var peak = UInt64(max(0, usage.ru_maxrss)) * 1024
        if Self.gnuTime != nil, let text = try? String(contentsOfFile: rssPath, encoding: .utf8),
            let last = text.split(separator: "\n").last, let kib = UInt64(last.trimmingCharacters(in: .whitespaces))
        {
            peak = kib * 1024
        }
        return ProcessResult(
            exitStatus: exit, wallSeconds: wall, userSeconds: seconds(usage.ru_utime),
            systemSeconds: seconds(usage.ru_stime), peakRSSBytes: peak,
            standardOutput: (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "",
            standardError: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")
    }

    /// Runs a shell command line with `bash -c` (pipefail on), so a pipeline is one child.
    func shell(_ command: String, label: String) throws -> ProcessResult {
        try run(["/bin/bash", "-c", "set -o pipefail; \(command)"], label: label)
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Quotes `text` for bash.
func shellQuoted(_ text: String) -> String {
    "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
}
