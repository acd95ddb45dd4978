import Foundation

/// One of issue 26's targets as the link case judges it.
struct LinkVerdict {
    var target: String
    var measured: String
    /// nil when a side was not measured.
    var met: Bool?
}

extension LinkResult {
    /// Issue 26's targets, from medians: fetch at least 0.9x aria2c and 3.5x cairn with one
    /// connection; upload at least 0.9x rclone; the fetch's peak RSS at most 96 MiB.
    var verdicts: [LinkVerdict] {
        func median(_ tool: String) -> Double? { operation(tool)?.throughput?.median }
        func ratio(_ tool: String, over peer: String, atLeast floor: Double, target: String) -> LinkVerdict {
            guard let a = median(tool), let b = median(peer), b > 0 else {
                return LinkVerdict(target: target, measured: "not measured", met: nil)
            }
            return LinkVerdict(target: target, measured: String(format: "%.2fx (%.1f / %.1f MB/s)", a / b, a, b), met: a / b >= floor)
        }
        var rows = [
            ratio(LinkTool.cairnFetch, over: LinkTool.aria2, atLeast: 0.9, target: "fetch >= 0.9x aria2c -x4 -s4"),
            ratio(LinkTool.cairnFetch, over: LinkTool.cairnFetchOne, atLeast: 3.5, target: "fetch >= 3.5x cairn --connections 1"),
            ratio(LinkTool.cairnUpload, over: LinkTool.rclone, atLeast: 0.9, target: "upload >= 0.9x rclone"),
        ]
        if let rss = operation(LinkTool.cairnFetch)?.peakRSS?.median {
            rows.append(LinkVerdict(target: "fetch peak RSS <= 96 MiB", measured: String(format: "%.1f MiB", rss / 1_048_576), met: rss <= 96 * 1_048_576))
        } else {
            rows.append(LinkVerdict(target: "fetch peak RSS <= 96 MiB", measured: "not measured", met: nil))
        }
        return rows
    }
}

extension Report {
    /// The link case's Markdown: the link, a table per measure, the verdicts.
    func linkSection(_ l: LinkResult) -> [String] {
        let intro =
            "Corpus: \(l.corpus.title); archive \(formatMiB(l.archiveBytes)). Link: \(l.link). Medians of \(l.runs) interleaved "
            + "rounds, (min-max); MB/s = 10^6 bytes/s of the archive (fetch, upload) or of the extracted files (extracts)."
        var lines: [String] = ["", "## Shaped link (issue 26)", "", intro, ""]
        for measure in LinkMeasure.allCases {
            let ops = l.operations.filter { $0.measure == measure }
            guard !ops.isEmpty else { continue }
            lines += ["### \(measure.rawValue)", "", "| tool | MB/s | wall s | CPU s | peak RSS MiB | bytes |", "|---|---|---|---|---|---|"]
            for op in ops {
                if let why = op.notAvailable ?? op.failure.map({ "failed: \($0)" }), op.runs.isEmpty {
                    lines.append("| \(op.tool) | \(why.replacingOccurrences(of: "\n", with: " ").replacingOccurrences(of: "|", with: "/")) | | | | |")
                    continue
                }
                lines.append(
                    "| \(op.tool) | \(op.throughput?.formatted("%.1f") ?? "-") | \(op.wall?.formatted() ?? "-") | \(op.cpu?.formatted() ?? "-") | "
                        + "\(op.peakRSS?.scaled(1 / 1_048_576).formatted("%.1f") ?? "-") | \(op.payloadBytes) |")
            }
            lines.append("")
        }
        lines += ["### Verdicts (issue 26)", "", "| target | measured | verdict |", "|---|---|---|"]
        for v in l.verdicts {
            lines.append("| \(v.target) | \(v.measured) | \(v.met.map { $0 ? "met" : "NOT met" } ?? "not measured") |")
        }
        lines.append("")
        for (name, version) in l.versions.sorted(by: { $0.key < $1.key }) { lines.append("- \(name): \(version)") }
        for note in l.notes { lines.append("- \(note)") }
        return lines
    }

    /// The link case as JSON: every round of every step, and the verdicts.
    func linkJSON(_ l: LinkResult) -> [String: Any] {
        [
            "archiveBytes": l.archiveBytes, "link": l.link, "runs": l.runs, "notes": l.notes, "versions": l.versions,
            "operations": l.operations.map { op -> [String: Any] in
                [
                    "tool": op.tool, "measure": op.measure.rawValue, "command": op.arguments.joined(separator: " "),
                    "payloadBytes": op.payloadBytes, "failure": op.failure ?? NSNull(), "notAvailable": op.notAvailable ?? NSNull(),
                    "megabytesPerSecondMedian": op.throughput?.median ?? NSNull(),
                    "rounds": op.runs.map {
                        [
                            "wallSeconds": $0.wallSeconds, "cpuSeconds": $0.cpuSeconds, "peakRSSBytes": $0.peakRSSBytes,
                        ] as [String: Any]
                    },
                ]
            },
            "verdicts": l.verdicts.map { ["target": $0.target, "measured": $0.measured, "met": $0.met ?? NSNull()] as [String: Any] },
        ]
    }
}
