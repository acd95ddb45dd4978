import Foundation
import Glibc

/// A CPU profile of one command: where its CPU seconds go, from `perf record` (sampling the
/// `cpu-clock` software event, which works without a hardware PMU) and `perf report --stdio`,
/// or why there is none.
struct Profile {
    /// One line of `perf report`: the share of the samples, the object (executable, library or
    /// `[kernel.kallsyms]`) and the symbol (Swift names demangled when `swift-demangle` is found).
    struct Line: Equatable {
        var percent: Double
        var object: String
        var symbol: String
    }

    /// What was profiled, e.g. "cairn (lz4) create".
    var label: String
    var command: String
    /// Samples perf took, from the report's header.
    var samples: Int?
    /// Wall and CPU seconds of the profiled run (under perf, so a little slower than the rounds).
    var wallSeconds: Double?
    var cpuSeconds: Double?
    /// Shares by object (`--sort dso`), largest first.
    var objects: [Line] = []
    /// The top symbols (`--sort dso,symbol`), largest first.
    var symbols: [Line] = []
    /// Shares by thread name (`--sort comm`; ``Line/object`` holds the name), largest first:
    /// how the work spreads over the cores (Cairn's file-system writer is `cairn-writer`).
    var threads: [Line] = []
    /// Why there is no profile: "perf not available: …".
    var unavailable: String?
}

/// Runs commands under `perf record` and summarises them with `perf report`.
struct Profiler {
    var runner: ProcessRunner
    /// Symbols kept per profile.
    var topSymbols = 25
    /// Sampling frequency, Hz.
    var frequency = 999

    static let missingPerf =
        "perf not available: perf is not installed (Debian package linux-perf; `make bench-deps` installs it)"

    /// Profiles `cairn create --compression lz4` of `benchCase` and `cairn extract` of that
    /// archive into a fresh directory, working in `directory` (removed afterwards). Never
    /// throws: a profile that cannot be taken says why in ``Profile/unavailable``.
    func profileCairn(on benchCase: BenchCase, in directory: String, cairn: String) -> [Profile] {
        defer { try? removeTree(directory) }
        let archive = "\(directory)/profiled.cairn"
        let out = "\(directory)/out"
        let create = [cairn, "create", "-o", archive, "--compression", "lz4", "--no-progress", benchCase.path]
        let extract = [cairn, "extract", archive, "-C", out, "--no-progress"]
        do {
            try removeTree(directory)
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            let reason = "perf not available: cannot create \(directory): \(error)"
            return [
                Profile(label: "\(ToolName.cairnLZ4) create", command: create.joined(separator: " "), unavailable: reason),
                Profile(label: "\(ToolName.cairnLZ4) extract", command: extract.joined(separator: " "), unavailable: reason),
            ]
        }
        log("profiling cairn create and extract of \(benchCase.title) with perf")
        let first = profile(label: "\(ToolName.cairnLZ4) create", arguments: create, data: "\(directory)/create.perf")
        let second: Profile
        if first.unavailable == nil {
            second = profile(label: "\(ToolName.cairnLZ4) extract", arguments: extract, data: "\(directory)/extract.perf")
        } else {
            second = Profile(label: "\(ToolName.cairnLZ4) extract", command: extract.joined(separator: " "), unavailable: first.unavailable)
        }
        return [first, second]
    }

    /// Runs `arguments` under `perf record -e cpu-clock -F frequency -o data` and reads the
    /// report; a missing or failing perf gives a profile whose ``Profile/unavailable`` says why.
    func profile(label: String, arguments: [String], data: String) -> Profile {
        var result = Profile(label: label, command: arguments.joined(separator: " "))
        guard let perf = findExecutable("perf") else {
            result.unavailable = Self.missingPerf
            return result
        }
        let slug = label.map { $0.isLetter || $0.isNumber ? $0 : "-" }
        do {
            let recorded = try runner.run(
                [perf, "record", "-q", "-e", "cpu-clock", "-F", String(frequency), "-o", data, "--"] + arguments,
                label: "perf-record-\(String(slug))")
            guard recorded.succeeded else {
                let tail = recorded.standardError.split(separator: "\n").suffix(3).joined(separator: " / ")
                result.unavailable = "perf not available: perf record exited \(recorded.exitStatus): \(tail)"
                return result
            }
            result.wallSeconds = recorded.wallSeconds
            result.cpuSeconds = recorded.cpuSeconds
            let demangle = findExecutable("swift-demangle").map { " | \(shellQuoted($0)) --simplified" } ?? ""
            let report = "\(shellQuoted(perf)) report -i \(shellQuoted(data)) --stdio --no-children --percent-limit 0.1"
            let byObject = try runner.shell("\(report) --sort dso", label: "perf-report-dso-\(String(slug))")
            let bySymbol = try runner.shell("\(report) --sort dso,symbol\(demangle)", label: "perf-report-sym-\(String(slug))")
            let byThread = try runner.shell("\(report) --sort comm", label: "perf-report-comm-\(String(slug))")
            if byThread.succeeded { result.threads = Self.parse(report: byThread.standardOutput, symbols: false).lines }
            guard byObject.succeeded, bySymbol.succeeded else {
                let failed = byObject.succeeded ? bySymbol : byObject
                result.unavailable = "perf not available: perf report exited \(failed.exitStatus): \(failed.standardError.suffix(300))"
                return result
            }
            let objects = Self.parse(report: byObject.standardOutput, symbols: false)
            let symbols = Self.parse(report: bySymbol.standardOutput, symbols: true)
            result.samples = symbols.samples ?? objects.samples
            result.objects = objects.lines
            result.symbols = Array(symbols.lines.prefix(topSymbols))
            if result.symbols.isEmpty { result.unavailable = "perf not available: perf report listed no samples" }
        } catch {
            result.unavailable = "perf not available: \(error)"
        }
        return result
    }

    /// Reads `perf report --stdio` output: the sample count from `# Samples: N of event …` and
    /// every `12.34%  object  [.] symbol` line (with `symbols` false, lines are
    /// `12.34%  object`), in report order; trailing IPC columns (`-  -`) are dropped.
    static func parse(report text: String, symbols: Bool) -> (samples: Int?, lines: [Profile.Line]) {
        var samples: Int?
        var lines: [Profile.Line] = []
        for raw in text.split(separator: "\n") {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("# Samples:") {
                let value = line.dropFirst("# Samples:".count).trimmingCharacters(in: .whitespaces).prefix { $0.isNumber || $0 == "K" || $0 == "M" }
                samples = Self.count(String(value))
                continue
            }
            guard !line.hasPrefix("#"), let percentEnd = line.firstIndex(of: "%"), let percent = Double(line[..<percentEnd]) else { continue }
            var rest = line[line.index(after: percentEnd)...].trimmingCharacters(in: .whitespaces)
            while rest.hasSuffix("-") { rest = String(rest.dropLast()).trimmingCharacters(in: .whitespaces) }
            if symbols {
                guard let bracket = rest.range(of: " [") else { continue }
                let object = rest[..<bracket.lowerBound].trimmingCharacters(in: .whitespaces)
                let afterMarker = rest[bracket.upperBound...].drop { $0 != "]" }.dropFirst()
                lines.append(Profile.Line(percent: percent, object: object, symbol: afterMarker.trimmingCharacters(in: .whitespaces)))
            } else {
                lines.append(Profile.Line(percent: percent, object: rest, symbol: ""))
            }
        }
        return (samples, lines)
    }

    /// "174" → 174, "12K" → 12000 (perf abbreviates large sample counts).
    private static func count(_ text: String) -> Int? {
        if text.hasSuffix("K") { return Int(text.dropLast()).map { $0 * 1000 } }
        if text.hasSuffix("M") { return Int(text.dropLast()).map { $0 * 1_000_000 } }
        return Int(text)
    }
}
