import Foundation
import Glibc

/// The machine the benchmark ran on.
struct Machine {
    var processors: Int
    var cpuModel: String
    var kernel: String
    var memoryMiB: Int
    var hostname: String

    /// The 1-, 5- and 15-minute load averages from /proc/loadavg (the machines are shared).
    static func loadAverage() -> String {
        let text = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? ""
        return text.split(separator: " ").prefix(3).joined(separator: " ")
    }

    static func current() -> Machine {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model =
            cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .flatMap { $0.split(separator: ":", maxSplits: 1).last }
            .map { $0.trimmingCharacters(in: .whitespaces) } ?? "unknown"
        var names = utsname()
        uname(&names)
        func field<T>(_ value: T) -> String {
            withUnsafeBytes(of: value) { raw in String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self) }
        }
        let meminfo = (try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8)) ?? ""
        let totalKiB =
            meminfo.split(separator: "\n").first { $0.hasPrefix("MemTotal:") }
            .flatMap { $0.split(separator: " ").dropFirst().first }
            .flatMap { Int($0) } ?? 0
        return Machine(
            processors: Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))), cpuModel: model,
            kernel: "\(field(names.sysname)) \(field(names.release)) \(field(names.machine))", memoryMiB: totalKiB / 1024,
            hostname: field(names.nodename))
    }
}

/// A Cairn/peer comparison the report computes per case: wall time or archive size.
struct RatioPair: Equatable, Sendable {
    enum Measure: String, Sendable { case wallTime = "wall time", archiveSize = "archive size" }
    var cairnTool: String
    var cairnOperation: String
    var peerTool: String
    var peerOperation: String
    var measure: Measure

    static func wall(_ cairnTool: String, _ cairnOperation: String, _ peerTool: String, _ peerOperation: String) -> RatioPair {
        RatioPair(cairnTool: cairnTool, cairnOperation: cairnOperation, peerTool: peerTool, peerOperation: peerOperation, measure: .wallTime)
    }

    static func size(_ cairnTool: String, _ peerTool: String, peerOperation: String = "create") -> RatioPair {
        RatioPair(cairnTool: cairnTool, cairnOperation: "create", peerTool: peerTool, peerOperation: peerOperation, measure: .archiveSize)
    }

    /// Every pair, in report order; the targets some of them have are in ``TargetSpec/all``.
    static let all: [RatioPair] = {
        let lz4 = ToolName.cairnLZ4
        let zstd = ToolName.cairnZstd
        return [
            wall(lz4, "create", ToolName.tarLZ4, "create"),
            wall(lz4, "create", ToolName.tarLZ4, "create + fsync"),
            wall(zstd, "create", ToolName.tarZstd, "create"),
            wall(lz4, "extract", ToolName.tarLZ4, "extract"),
            wall(zstd, "extract", ToolName.tarZstd, "extract"),
            wall(lz4, "create", ToolName.casync, "make"),
            wall(lz4, "create", ToolName.borg, "create"),
            wall(lz4, "create", ToolName.restic, "backup"),
            wall(lz4, "extract", ToolName.casync, "extract"),
            wall(lz4, "extract", ToolName.borg, "extract"),
            wall(lz4, "extract", ToolName.restic, "restore"),
            wall(lz4, "create --resume (cut at 90%)", lz4, "create"),
            wall(lz4, "transfer resume (cut at 90%)", lz4, "create"),
            size(lz4, ToolName.tarLZ4),
            size(zstd, ToolName.tarZstd),
            wall(ToolName.cairnSigned, "create", lz4, "create"),
            wall(ToolName.cairnSigned, "extract", lz4, "extract"),
            size(ToolName.cairnSigned, lz4),
            wall(ToolName.cairnEncrypted, "create", lz4, "create"),
            wall(ToolName.cairnEncrypted, "extract", lz4, "extract"),
            size(ToolName.cairnEncrypted, lz4),
            wall(ToolName.cairnEncrypted, "create", ToolName.tarLZ4Age, "create"),
            wall(ToolName.cairnEncrypted, "create", ToolName.tarLZ4Age, "create + fsync"),
            wall(ToolName.cairnEncrypted, "extract", ToolName.tarLZ4Age, "extract"),
            size(ToolName.cairnEncrypted, ToolName.tarLZ4Age),
        ]
    }()

    /// Cairn / peer in each round of `1...runs` where both operations succeeded (and both
    /// figures are positive), in round order, or peer / Cairn when `inverted`; nil when
    /// `result` lacks either operation.
    func perRound(in result: CaseResult, runs: Int, inverted: Bool = false) -> [Double]? {
        guard let c = result.operation(cairnTool, cairnOperation), let p = result.operation(peerTool, peerOperation) else {
            return nil
        }
        var values: [Double] = []
        for round in 1...max(1, runs) {
            let pair: (Double?, Double?) =
                measure == .wallTime
                ? (c.wall(round: round), p.wall(round: round)) : (c.archiveBytes(round: round), p.archiveBytes(round: round))
            if let a = pair.0, let b = pair.1, a > 0, b > 0 { values.append(inverted ? b / a : a / b) }
        }
        return values
    }
}

/// One computed ratio: the per-round ratios and their median and spread.
struct Ratio {
    var cairn: String
    var peer: String
    var measure: RatioPair.Measure
    /// Cairn / peer in each round where both succeeded, in round order.
    var perRound: [Double]
    var target: Target?

    var spread: Spread? { Spread(perRound) }

    /// Ratios of every pair whose two operations `result` has, over rounds `1...runs`, each
    /// with the target ``TargetSpec/all`` sets for it on a case of this kind.
    static func all(in result: CaseResult, runs: Int) -> [Ratio] {
        RatioPair.all.compactMap { pair in
            guard let perRound = pair.perRound(in: result, runs: runs) else { return nil }
            return Ratio(
                cairn: "\(pair.cairnTool) \(pair.cairnOperation)", peer: "\(pair.peerTool) \(pair.peerOperation)",
                measure: pair.measure, perRound: perRound,
                target: TargetSpec.target(for: pair, on: result.benchCase.kind))
        }
    }
}

/// Everything one invocation measured, rendered as Markdown, JSON and an SVG chart.
struct Report {
    var date: Date
    var machine: Machine
    var command: String
    var runs: Int
    var pauseSeconds: Double = 0
    var cases: [CaseResult] = []
    var versions: [String: String] = [:]
    var skipped: [String: String] = [:]
    /// Lines about cases that were looked for and skipped or replaced (a missing system tree).
    var caseNotes: [String] = []
    var notes: [String: String] = [:]
    var stages: [StageResult] = []
    /// Issue 10's transfer case (`--only transfer`), when it ran.
    var transfer: TransferResult?
    /// Issue 12's object-storage case (`--only upload`), when it ran.
    var upload: UploadResult?
    /// Issue 26's shaped-link case (`--only links`), when it ran.
    var link: LinkResult?
    /// Issue 23's checkpoint case (`--only checkpoint`), when it ran.
    var checkpoint: [CheckpointStallBenchmark.Row]?
    var loadAtStart = Machine.loadAverage()
    var loadAtEnd = ""
    /// How the harness and its tools were scheduled (``Scheduling/description``).
    var scheduling = Scheduling.description

    /// `2026-12-01T101500Z`: the UTC time of the run, as used in the result file names.
    var fileTimestamp: String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "UTC")
        f.dateFormat = "yyyy-MM-dd'T'HHmmss'Z'"
        return f.string(from: date)
    }

    var timestampString: String { ISO8601DateFormatter().string(from: date) }

    /// How extraction (and every create) is timed, in words, for the report and the JSON.
    var settlingMethod: String {
        let kept = cases.filter(\.extractedTreesKept).map(\.benchCase.title)
        let removal =
            kept.isEmpty
            ? "extracted trees are removed after they are measured, outside the timed window"
            : "in cases with many files (\(kept.joined(separator: ", "))) every extracted tree is kept until the case ends, then "
                + "all are removed and the next case waits until ext4 no longer counts their inodes as recently deleted "
                + "(\(ExtractedTrees.recentlyDeletedSeconds()) s); elsewhere a tree is removed after it is measured, outside the timed window"
        return "every extraction writes into a new directory (`out-<round>`) that no earlier run used; \(removal); before every "
            + "timed create and extract, for every tool alike, the harness calls sync(2) and sleeps "
            + "\(String(format: "%g", pauseSeconds)) s"
    }

    /// The report in Markdown; `chartName` is the SVG's file name beside it, if one is written.
    func markdown(chartName: String? = nil) -> String {
        var lines: [String] = []
        lines.append("# Cairn benchmark, \(timestampString)")
        lines.append("")
        lines.append("- Machine: \(machine.processors) × \(machine.cpuModel), \(machine.memoryMiB) MiB RAM, \(machine.kernel)")
        lines.append(
            "- Load average (1/5/15 min) at start: \(loadAtStart); at end: \(loadAtEnd) (a shared machine: compare ratios, not absolutes)")
        lines.append("- Command: `\(command)`")
        lines.append("- Scheduling: \(scheduling)")
        if !cases.isEmpty {
            lines.append(
                "- Runs: \(runs) interleaved rounds per case (every tool once per round, A B C A B C …). Every figure is the "
                    + "**median** over the rounds with its spread (min–max) in brackets; a Cairn/peer ratio is the median of the "
                    + "per-round ratios. A verdict is about the median: PASS or FAIL from the rounds the target asks for "
                    + "(issue 9: \(TargetSpec.issue9Rounds), issue 3: 3), \"indicative\" below that.")
            if runs < TargetSpec.issue9Rounds {
                lines.append(
                    "- **Verdicts**: \(counted(runs, "round")), fewer than issue 9's \(TargetSpec.issue9Rounds): its verdicts are "
                        + "indicative only (a sanity run, not a result).")
            }
            for note in caseNotes { lines.append("- Cases: \(note).") }
            lines.append(
                "- **Warm cache**: each tree is read once before its rounds; the page cache is not dropped (shared machine).")
            lines.append("- **Extraction and create timing**: \(settlingMethod).")
            lines.append(
                "- MB/s = tree bytes / median wall seconds / 10^6, only for operations that read every content byte "
                    + "(reading, create, verify, extract), not for list or the resume steps.")
            if let chartName { lines.append("- Chart: [\(chartName)](\(chartName)) (wall time, CPU time and archive size per tool and case, median with min–max whiskers).") }
        }
        lines.append("")
        if !cases.isEmpty {
            lines += sizeSummary()
            lines += ratioSummary()
            for (index, result) in cases.enumerated() { lines += caseTable(result, index: index + 1) }
            lines += toolList()
        }
        if let transfer { lines += transferSection(transfer) }
        if let upload { lines += uploadSection(upload) }
        if let link { lines += linkSection(link) }
        if let checkpoint { lines += checkpointSection(checkpoint) }
        if !stages.isEmpty { lines += stageTable() }
        if cases.contains(where: { !$0.profiles.isEmpty }) { lines += profileSection() }
        if !cases.isEmpty { lines += trustedSection() }
        if !cases.isEmpty { lines += verdictTable() }
        return lines.joined(separator: "\n")
    }

    private func caseHeading(_ result: CaseResult, index: Int) -> String {
        let b = result.benchCase
        return "Case \(index): \(b.title)"
    }

    private func caseSummary(_ b: BenchCase) -> String {
        var text = "\(counted(b.fileCount, "file")) in \(counted(b.directoryCount, "directory", "directories")), \(b.totalBytes) bytes (\(formatMiB(b.totalBytes)))"
        if b.generated { text += ", generated with seed \(b.seed ?? 1) at `\(b.path)`" }
        return text
    }

    private func sizeSummary() -> [String] {
        let columns = [ToolName.cairnLZ4, ToolName.tarLZ4, ToolName.cairnZstd, ToolName.tarZstd, ToolName.casync, ToolName.borg, ToolName.restic]
        let present = columns.filter { tool in cases.contains { c in c.operations.contains { $0.tool == tool && $0.kind == .create } } }
        guard !present.isEmpty else { return [] }
        var lines = ["## Archive sizes, MiB (median; side by side)", ""]
        lines.append("| case | files | content MiB | " + present.map(markdownEscaped).joined(separator: " | ") + " |")
        lines.append("|---|--:|--:|" + present.map { _ in "--:|" }.joined())
        for (index, result) in cases.enumerated() {
            var row = "| \(index + 1): \(markdownEscaped(result.benchCase.title)) | \(result.benchCase.fileCount) | "
            row += mebibytes(Double(result.benchCase.totalBytes))
            for tool in present {
                let size = result.operations.first { $0.tool == tool && $0.kind == .create }?.archiveBytes
                row += " | " + (size.map { mebibytes($0.median) } ?? "–")
            }
            lines.append(row + " |")
        }
        lines.append("")
        return lines
    }

    private func ratioSummary() -> [String] {
        var lines = ["## Cairn / peer ratios (lower is better for Cairn)", ""]
        lines.append("| case | measure | Cairn | peer | median ratio | spread (min–max) | rounds | target | verdict |")
        lines.append("|---|---|---|---|--:|--:|--:|--:|---|")
        var any = false
        for (index, result) in cases.enumerated() {
            for r in Ratio.all(in: result, runs: runs) {
                any = true
                let s = r.spread
                let median = s.map { String(format: "%.2f", $0.median) } ?? "–"
                let spread = s.map { String(format: "%.2f–%.2f", $0.minimum, $0.maximum) } ?? "–"
                let target = r.target.map { "\($0.formatted()) (\($0.source))" } ?? ""
                let verdict = r.target.map { Verdict(s, target: $0).text } ?? ""
                lines.append(
                    "| \(index + 1) | \(r.measure.rawValue) | \(markdownEscaped(r.cairn)) | \(markdownEscaped(r.peer)) | \(median) | \(spread) | "
                        + "\(r.perRound.count) | \(target) | \(verdict) |")
            }
        }
        lines.append("")
        return any ? lines : []
    }

    private func caseTable(_ result: CaseResult, index: Int) -> [String] {
        let b = result.benchCase
        var lines = ["## \(caseHeading(result, index: index))", "", "- \(caseSummary(b))"]
        lines.append(
            String(
                format: "- Warm read before timing: %.0f MB/s with read(2)",
                Double(result.warmRead.bytes) / max(result.warmRead.seconds, 1e-9) / 1e6))
        lines.append("")
        lines.append(
            "| tool | operation | wall s | MB/s | CPU s | CPU/wall | peak RSS MiB | archive MiB | archive % | rounds | notes |")
        lines.append("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|")
        let caseBytes = Double(b.totalBytes)
        for r in result.operations {
            guard let wall = r.wall, let cpu = r.cpu, let rss = r.peakRSS else {
                lines.append(
                    "| \(markdownEscaped(r.tool)) | \(markdownEscaped(r.operation)) | – | – | – | – | – | – | – | 0 | failed: \(markdownEscaped(r.failure ?? "?")) |")
                continue
            }
            var notes: [String] = []
            if let d = r.deduplicatedBytes { notes.append("dedup saved \(formatMiB(d))") }
            if let e = r.extractedBytes, e != b.totalBytes { notes.append("extracted \(e) bytes ≠ tree") }
            if let f = r.failure { notes.append("a run failed: \(markdownEscaped(f))") }
            let mbps = r.kind.readsContent ? String(format: "%.0f", caseBytes / wall.median / 1e6) : "–"
            let archive = r.archiveBytes.map { $0.scaled(1 / 1_048_576).formatted($0.median < 1_048_576 ? "%.3f" : "%.1f") } ?? ""
            let percent = r.archiveBytes.map { String(format: "%.1f", $0.median / max(caseBytes, 1) * 100) } ?? ""
            let rssText = String(format: "%.0f", rss.median / 1_048_576) + (rss.count > 1 ? String(format: " (max %.0f)", rss.maximum / 1_048_576) : "")
            lines.append(
                "| \(markdownEscaped(r.tool)) | \(markdownEscaped(r.operation)) | \(wall.formatted()) | \(mbps) | \(cpu.formatted()) | "
                    + String(format: "%.2f", cpu.median / max(wall.median, 1e-9))
                    + " | \(rssText) | \(archive) | \(percent) | \(wall.count) | \(notes.joined(separator: "; ")) |")
        }
        lines.append("")
        lines.append(
            "CPU s = user + system of the child and its descendants (wait4 rusage). Peak RSS = the largest single process of a "
                + "pipeline (not the sum), measured under `/usr/bin/time -f %M` because a child spawned directly inherits its "
                + "spawner's high-water RSS. `cairn create` fsyncs its archive before renaming it into place; the peers do not, "
                + "hence the extra `tar \\| lz4` `create + fsync` row.")
        lines.append("")
        return lines
    }

    /// Issue 9's targets, one row per target and case, with PASS / FAIL: the report's last section.
    func verdictTable() -> [String] {
        let rows = VerdictRow.rows(for: cases, runs: runs)
        var lines = ["## Issue 9 targets: verdicts", ""]
        lines += Self.verdictLines(rows)
        let counts = Dictionary(grouping: rows, by: { $0.verdict.status }).mapValues(\.count)
        let summary = ["pass", "fail", "indicative-pass", "indicative-fail", "not-measured"].compactMap { key in
            counts[key].map { "\($0) \(key)" }
        }
        lines.append("")
        lines.append(
            "Issue 9 targets: \(summary.joined(separator: ", ")). A ratio is Cairn / peer per round (× of the peer's wall time "
                + "or archive bytes); the create speed is `--compression none`'s wall time / lz4's; peak RSS is `cairn (lz4)`'s, "
                + "MiB. PASS and FAIL need \(TargetSpec.issue9Rounds) successful rounds.")
        lines.append("")
        lines += floorTable()
        return lines
    }

    /// One verdict row as the JSON has it.
    func verdictJSON(_ row: VerdictRow) -> [String: Any] {
        [
            "case": row.caseTitle.map { $0 as Any } ?? NSNull(), "caseKind": row.spec.kind.rawValue, "target": row.spec.title,
            "unit": row.spec.unit, "perRound": row.values, "measured": Self.spreadJSON(row.spread), "limit": row.spec.target.limit,
            "comparison": row.spec.target.comparison.rawValue, "source": row.spec.target.source,
            "minimumRounds": row.spec.target.minimumRounds, "verdict": row.verdict.text, "status": row.verdict.status,
        ]
    }

    /// The table of `rows`: case, target, median, spread, rounds, threshold, verdict.
    static func verdictLines(_ rows: [VerdictRow]) -> [String] {
        var lines = ["| case | target | median | spread (min–max) | rounds | threshold | verdict |"]
        lines.append("|---|---|--:|--:|--:|--:|---|")
        for row in rows {
            let s = row.spread
            let format = row.spec.unit == "MiB" ? "%.0f" : "%.2f"
            let median = s.map { String(format: format, $0.median) + " " + row.spec.unit } ?? "–"
            let spread = s.map { String(format: "\(format)–\(format)", $0.minimum, $0.maximum) } ?? "–"
            let threshold = row.spec.target.formatted(format, unit: row.spec.unit)
            lines.append(
                "| \(markdownEscaped(row.caseTitle ?? row.spec.kind.rawValue)) | \(markdownEscaped(row.spec.title)) | \(median) | \(spread) | "
                    + "\(row.values.count) | \(threshold) | \(markdownEscaped(row.verdict.text)) |")
        }
        return lines
    }

    /// For each wall-time target: the lowest ratio this machine allows Cairn, since its wall time
    /// can be no less than its CPU seconds spread over every core, however well it overlaps:
    /// (Cairn's CPU s / cores) / the peer's wall s, per round.
    func floorTable() -> [String] {
        let cores = max(1, ProcessInfo.processInfo.activeProcessorCount)
        var lines = ["### What \(cores) cores allow", ""]
        lines.append(
            "Cairn's wall time can be no shorter than its CPU seconds / \(cores). Per round, that floor over the peer's wall time is the "
                + "lowest ratio any overlap of Cairn's work could reach here:")
        lines.append("")
        lines.append("| case | target | floor: (Cairn CPU s / \(cores)) / peer wall s, median | spread (min–max) | Cairn CPU s, median | threshold |")
        lines.append("|---|---|--:|--:|--:|--:|")
        for spec in TargetSpec.all where spec.target.source == TargetSpec.issue9 {
            guard case .ratio(let pair) = spec.quantity, pair.measure == .wallTime else { continue }
            for result in cases where result.benchCase.kind == spec.kind {
                guard let c = result.operation(pair.cairnTool, pair.cairnOperation), let p = result.operation(pair.peerTool, pair.peerOperation)
                else { continue }
                let floors = (1...max(1, runs)).compactMap { round -> Double? in
                    guard let cpu = c.cpu(round: round), let wall = p.wall(round: round), wall > 0 else { return nil }
                    return cpu / Double(cores) / wall
                }
                guard let s = Spread(floors) else { continue }
                lines.append(
                    "| \(markdownEscaped(result.benchCase.title)) | \(markdownEscaped(spec.title)) | "
                        + String(format: "%.2f × | %.2f–%.2f | %.2f | ", s.median, s.minimum, s.maximum, c.cpu?.median ?? 0)
                        + spec.target.formatted("%.2f", unit: "×") + " |")
            }
        }
        lines.append("")
        return lines
    }

    /// Where Cairn's CPU seconds go: perf's shares by object and its top symbols.
    private func profileSection() -> [String] {
        var lines = ["## Where the CPU seconds go (perf)", ""]
        for (index, result) in cases.enumerated() {
            for p in result.profiles {
                lines.append("### Case \(index + 1): \(markdownEscaped(p.label))")
                lines.append("")
                lines.append("- Command: `perf record -e cpu-clock -F 999 -- \(p.command)`")
                if let reason = p.unavailable {
                    lines.append("- \(reason)")
                    lines.append("")
                    continue
                }
                if let w = p.wallSeconds, let c = p.cpuSeconds {
                    lines.append(String(format: "- Under perf: %.2f s wall, %.2f s CPU, ", w, c) + "\(p.samples.map(String.init) ?? "?") samples")
                }
                lines.append("- By object: " + p.objects.prefix(8).map { String(format: "%.1f%% ", $0.percent) + "`\($0.object)`" }.joined(separator: ", "))
                if !p.threads.isEmpty {
                    lines.append(
                        "- By thread (how the work spreads over the cores): "
                            + p.threads.prefix(6).map { String(format: "%.1f%% ", $0.percent) + "`\($0.object)`" }.joined(separator: ", "))
                }
                lines.append(
                    "- Top five costs: "
                        + p.symbols.prefix(5).map { line in
                            let symbol = line.symbol.count > 60 ? String(line.symbol.prefix(57)) + "…" : line.symbol
                            return String(format: "%.1f%% ", line.percent) + "`\(symbol.replacingOccurrences(of: "`", with: "'"))`"
                        }.joined(separator: ", "))
                lines.append("")
                lines.append("| share | object | symbol |")
                lines.append("|--:|---|---|")
                for s in p.symbols {
                    let symbol = s.symbol.count > 140 ? String(s.symbol.prefix(137)) + "…" : s.symbol
                    lines.append(String(format: "| %.2f%% | ", s.percent) + "\(markdownEscaped(s.object)) | `\(symbol.replacingOccurrences(of: "`", with: "'"))` |")
                }
                lines.append("")
            }
        }
        return lines
    }

    private func toolList() -> [String] {
        guard !versions.isEmpty || !skipped.isEmpty else { return [] }
        var lines = ["## Tools", ""]
        for (tool, version) in versions.sorted(by: { $0.key < $1.key }) {
            let note = notes[tool].map { " — \($0)" } ?? ""
            lines.append("- \(markdownEscaped(tool)): `\(version)`\(note)")
        }
        for (tool, reason) in skipped.sorted(by: { $0.key < $1.key }) { lines.append("- \(markdownEscaped(tool)): skipped, \(reason)") }
        lines.append("")
        return lines
    }

    private func stageTable() -> [String] {
        var lines = ["## Stages (in process, one core, release build)", ""]
        lines.append("| stage | implementation | MB/s | wrapper / C | notes |")
        lines.append("|---|---|--:|--:|---|")
        for s in stages {
            var ratio = ""
            if let base = s.baseline, let c = stages.first(where: { $0.stage == s.stage && $0.implementation == base }) {
                ratio = String(format: "%.2f", s.megabytesPerSecond / c.megabytesPerSecond)
            }
            lines.append(String(format: "| %@ | %@ | %.0f | %@ | %@ |", s.stage, s.implementation, s.megabytesPerSecond, ratio, s.detail ?? ""))
        }
        lines.append("")
        lines.append(
            "Best of \(stages.first?.repetitions ?? 0) repetitions after one warm-up, the wrapper and its C baseline interleaved (A B A B ...) so both see the same load; wrapper / C is a throughput ratio (1.00 = the "
                + "C library's own speed, below 0.90 misses the 10% target). Bodies are called through a stored closure and their "
                + "results consumed, so the optimiser cannot hoist them.")
        lines.append("")
        return lines
    }

    /// A spread as the JSON has it: median, min, max, count; null when nothing was measured.
    static func spreadJSON(_ s: Spread?) -> Any {
        guard let s else { return NSNull() }
        return ["median": s.median, "min": s.minimum, "max": s.maximum, "count": s.count] as [String: Any]
    }

    func json() -> [String: Any] {
        func spread(_ s: Spread?) -> Any { Self.spreadJSON(s) }
        var object: [String: Any] = [
            "date": timestampString, "command": command, "runs": runs, "reported": "median and min-max over interleaved rounds",
            "verdictFromRounds": ["issue 9": TargetSpec.issue9Rounds, "issue 3": 3], "caseNotes": caseNotes, "cache": "warm cache: each tree read once before timing; page cache not dropped",
            "settling": settlingMethod, "pauseSeconds": pauseSeconds, "scheduling": scheduling,
            "machine": [
                "nproc": machine.processors, "cpuModel": machine.cpuModel, "kernel": machine.kernel, "memoryMiB": machine.memoryMiB,
            ],
            "loadAverage": ["start": loadAtStart, "end": loadAtEnd], "toolVersions": versions, "skippedTools": skipped, "toolNotes": notes,
            "peakRSSNote": "ru_maxrss from wait4 is the largest single process of a pipeline, not the sum",
        ]
        object["cases"] = cases.map { result -> [String: Any] in
            let b = result.benchCase
            let caseBytes = Double(b.totalBytes)
            return [
                "kind": b.kind.rawValue, "title": b.title, "path": b.path, "generated": b.generated,
                "seed": b.seed.map { $0 as Any } ?? NSNull(), "fileCount": b.fileCount, "directoryCount": b.directoryCount,
                "totalBytes": b.totalBytes, "peers": result.peers.map(\.rawValue), "extractedTreesKept": result.extractedTreesKept,
                "warmRead": ["bytes": result.warmRead.bytes, "seconds": result.warmRead.seconds],
                "operations": result.operations.map { r -> [String: Any] in
                    var o: [String: Any] = [
                        "tool": r.tool, "operation": r.operation, "kind": r.kind.rawValue, "command": r.command,
                        "wallSeconds": spread(r.wall), "cpuSeconds": spread(r.cpu), "peakRSSBytes": spread(r.peakRSS),
                        "archiveBytes": spread(r.archiveBytes),
                        "runs": r.measurements.map { m in
                            var run: [String: Any] = [
                                "round": m.round, "exitStatus": m.result.exitStatus, "wallSeconds": m.result.wallSeconds,
                                "userSeconds": m.result.userSeconds, "systemSeconds": m.result.systemSeconds,
                                "peakRSSBytes": m.result.peakRSSBytes,
                            ]
                            if let a = m.archiveBytes { run["archiveBytes"] = a }
                            return run
                        },
                    ]
                    if r.kind.readsContent, let w = r.wall { o["megabytesPerSecond"] = caseBytes / w.median / 1e6 }
                    if let d = r.deduplicatedBytes { o["deduplicatedBytes"] = d }
                    if let e = r.extractedBytes { o["extractedBytes"] = e }
                    if let f = r.failure { o["failure"] = f }
                    return o
                },
                "profiles": result.profiles.map { p -> [String: Any] in
                    func lines(_ list: [Profile.Line]) -> [[String: Any]] {
                        list.map { ["percent": $0.percent, "object": $0.object, "symbol": $0.symbol] as [String: Any] }
                    }
                    var o: [String: Any] = ["label": p.label, "command": p.command, "objects": lines(p.objects), "symbols": lines(p.symbols)]
                    if let n = p.samples { o["samples"] = n }
                    if let w = p.wallSeconds { o["wallSeconds"] = w }
                    if let c = p.cpuSeconds { o["cpuSeconds"] = c }
                    if let u = p.unavailable { o["unavailable"] = u }
                    return o
                },
                "ratios": Ratio.all(in: result, runs: runs).map { r -> [String: Any] in
                    var o: [String: Any] = [
                        "cairn": r.cairn, "peer": r.peer, "measure": r.measure.rawValue, "perRound": r.perRound, "ratio": spread(r.spread),
                    ]
                    if let t = r.target {
                        o["target"] = ["limit": t.limit, "source": t.source, "comparison": t.comparison.rawValue] as [String: Any]
                        o["verdict"] = Verdict(r.spread, target: t).text
                    }
                    return o
                },
            ]
        }
        if !cases.isEmpty {
            object["verdicts"] = VerdictRow.rows(for: cases, runs: runs).map(verdictJSON)
        }
        if hasTrustedTools { object["trustedVerdicts"] = trustedVerdictRows().map(verdictJSON) }
        if let transfer { object["transfer"] = transferJSON(transfer) }
        if let upload { object["upload"] = uploadJSON(upload) }
        if let link { object["links"] = linkJSON(link) }
        object["stages"] = stages.map { s -> [String: Any] in
            var o: [String: Any] = [
                "stage": s.stage, "implementation": s.implementation, "bytes": s.bytes, "bestSeconds": s.bestSeconds,
                "megabytesPerSecond": s.megabytesPerSecond, "repetitions": s.repetitions,
            ]
            if let b = s.baseline { o["baseline"] = b }
            if let d = s.detail { o["detail"] = d }
            return o
        }
        return object
    }

    /// Writes `results-<UTC time>.md`, `.json` and (with end-to-end results) `.svg` into
    /// `directory` (created if missing), never replacing a file: when a name is taken, `-2`,
    /// `-3`, ... is appended to the stem of all three.
    ///
    /// - Returns: the paths written.
    /// - Throws: ``BenchError`` naming the directory or file that could not be written.
    func write(to directory: String) throws -> [String] {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw BenchError("cannot create the results directory \(directory): \(error)")
        }
        let extensions = cases.isEmpty ? ["md", "json"] : ["md", "json", "svg"]
        let stem = try ResultFiles.reserve(in: directory, stem: "results-\(fileTimestamp)", extensions: extensions)
        let chartName = cases.isEmpty ? nil : "\((stem as NSString).lastPathComponent).svg"
        var contents: [String: Data] = [:]
        contents["md"] = Data((markdown(chartName: chartName) + "\n").utf8)
        let data = try JSONSerialization.data(withJSONObject: json(), options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        contents["json"] = data + Data("\n".utf8)
        if !cases.isEmpty { contents["svg"] = Data(Chart(report: self).svg().utf8) }
        var written: [String] = []
        for ext in extensions {
            let path = "\(stem).\(ext)"
            try ResultFiles.fill(path, with: contents[ext] ?? Data())
            written.append(path)
        }
        return written
    }
}

/// Bytes as MiB for a table: one decimal from 1 MiB up, three below.
func mebibytes(_ bytes: Double) -> String {
    String(format: bytes < 1_048_576 ? "%.3f" : "%.1f", bytes / 1_048_576)
}

/// "1 file", "2 files"; `plural` for irregular nouns.
func counted(_ n: Int, _ singular: String, _ plural: String? = nil) -> String {
    "\(n) " + (n == 1 ? singular : plural ?? singular + "s")
}

func markdownEscaped(_ text: String) -> String {
    text.replacingOccurrences(of: "|", with: "\\|").replacingOccurrences(of: "\n", with: " ")
}
