import Foundation

/// One of issue 10's four targets (the resume one twice, at 50% and 90%), computed per round
/// from a ``TransferResult``. ``all`` is the one list; the verdict table reads it.
struct TransferTarget {
    var title: String
    /// How the per-round figure is shown: "×" or "MiB".
    var unit: String
    var target: Target
    /// The per-round values, or the reason there are none.
    var values: (TransferResult) -> Result<[Double], TransferNotMeasured>

    static let issue10 = "issue 10"
    static let issue23 = "issue 23"
    static let issue25 = "issue 25"

    /// Issue 10's targets, in the issue's order.
    static var all: [TransferTarget] {
        func ten(_ limit: Double, _ comparison: Target.Comparison = .atMost) -> Target {
            Target(limit: limit, source: issue10, comparison: comparison, minimumRounds: 3)
        }
        var list: [TransferTarget] = [
            TransferTarget(
                title: "seeded delta bytes / (manifest + footer + the new archive's records old.cairn lacks)", unit: "×", target: ten(1.25),
                values: { t in
                    perRound(t, TransferTool.cairnSeeded, .seeded) { Double($0.bodyBytes) / Double(max(1, t.layout.deltaYardstick)) }
                }),
            TransferTarget(
                title: "seeded delta bytes, cairn / zsync", unit: "×", target: ten(0.2),
                values: { t in
                    ratio(t, (TransferTool.cairnSeeded, .seeded), (TransferTool.zsync, .seeded)) { Double($0.bodyBytes) }
                }),
        ]
        // Issue 25: two encrypted exports of one maker share ids and boundaries (keys derived
        // from the signing key), so the seeded delta costs about what the plain one does.
        list.append(
            TransferTarget(
                title: "seeded delta bytes, two encrypted exports / two plain ones", unit: "×",
                target: Target(limit: 1.1, source: issue25, minimumRounds: 3),
                values: { t in
                    ratio(t, (TransferTool.cairnSeededEncrypted, .seeded), (TransferTool.cairnSeeded, .seeded)) { Double($0.bodyBytes) }
                }))
        for measure in [TransferMeasure.resume50, .resume90] {
            list.append(
                TransferTarget(
                    title: "\(measure.rawValue): bytes re-sent by cairn, MiB (limit: largest commit interval + 1 MiB)", unit: "MiB",
                    target: Target(limit: 0, source: issue10, minimumRounds: 3),
                    values: { t in
                        perRound(t, TransferTool.cairn, measure) { (Double($0.bodyBytes) - Double(t.layout.newArchiveBytes)) / 1_048_576 }
                    }))
        }
        list.append(
            TransferTarget(
                title: "full fetch throughput, cairn (verifying) / curl", unit: "×", target: ten(0.8, .atLeast),
                values: { t in
                    // Throughput ratio = curl's wall / cairn's wall, per round.
                    ratio(t, (TransferTool.curl, .full), (TransferTool.cairn, .full)) { $0.result.wallSeconds }
                }))
        list.append(
            TransferTarget(
                title: "remote extract bytes / (the file's stored records + manifest + footer)", unit: "×", target: ten(1.1),
                values: { t in
                    perRound(t, TransferTool.cairnExtract, .remoteExtract) { Double($0.bodyBytes) / Double(max(1, t.layout.extractYardstick)) }
                }))
        // Issue 23: a stored record crosses the wire at most once per run.
        list.append(
            TransferTarget(
                title: "\(TransferMeasure.remoteExtractDeduplicated.rawValue): bytes / the archive's size (each record once; "
                    + "1% for the header's 8 KiB block, which holds the first records too)", unit: "×",
                target: Target(limit: 1.01, source: issue23, minimumRounds: 3),
                values: { t in
                    let archive = Double(max(1, t.operation(TransferTool.cairnExtract, .remoteExtractDeduplicated)?.archiveBytes ?? 1))
                    return perRound(t, TransferTool.cairnExtract, .remoteExtractDeduplicated) { Double($0.bodyBytes) / archive }
                }))
        list.append(
            TransferTarget(
                title: "\(TransferMeasure.remoteExtractResume.rawValue): bytes re-sent by cairn, MiB (limit: largest commit interval + 1 MiB)",
                unit: "MiB", target: Target(limit: 0, source: issue23, minimumRounds: 3),
                values: { t in
                    perRound(t, TransferTool.cairnExtract, .remoteExtractResume) {
                        (Double($0.bodyBytes) - Double(t.layout.newArchiveBytes)) / 1_048_576
                    }
                }))
        return list
    }

    /// The target with its limit for this result (the resume limit depends on the archive).
    func resolved(for result: TransferResult) -> Target {
        guard unit == "MiB" else { return target }
        var t = target
        t.limit = Double(result.layout.resumeAllowance) / 1_048_576
        return t
    }

    /// `value` of each successful round of one operation.
    static func perRound(
        _ t: TransferResult, _ tool: String, _ measure: TransferMeasure, _ value: (TransferRun) -> Double
    ) -> Result<[Double], TransferNotMeasured> {
        guard let op = t.operation(tool, measure) else { return .failure(.init("\(tool) did not run")) }
        if let reason = op.notMeasured { return .failure(.init(reason)) }
        let values = op.successful.map(value)
        return values.isEmpty ? .failure(.init("no successful round of \(tool) (\(op.failure ?? "?"))")) : .success(values)
    }

    /// `value(a) / value(b)` in each round where both succeeded.
    static func ratio(
        _ t: TransferResult, _ a: (String, TransferMeasure), _ b: (String, TransferMeasure), _ value: (TransferRun) -> Double
    ) -> Result<[Double], TransferNotMeasured> {
        guard let x = t.operation(a.0, a.1), let y = t.operation(b.0, b.1) else { return .failure(.init("\(a.0) or \(b.0) did not run")) }
        if let reason = x.notMeasured ?? y.notMeasured { return .failure(.init(reason)) }
        var values: [Double] = []
        for round in 1...max(1, t.runs) {
            if let p = x.run(round: round), let q = y.run(round: round), value(q) > 0 { values.append(value(p) / value(q)) }
        }
        return values.isEmpty ? .failure(.init("no round where both \(a.0) and \(b.0) succeeded")) : .success(values)
    }
}

/// Why a transfer figure has no value.
struct TransferNotMeasured: Error {
    var reason: String
    init(_ reason: String) { self.reason = reason }
}

/// One row of the transfer verdict table.
struct TransferVerdictRow {
    var spec: TransferTarget
    var target: Target
    var values: [Double]
    var verdict: Verdict

    static func rows(for result: TransferResult) -> [TransferVerdictRow] {
        TransferTarget.all.map { spec in
            let target = spec.resolved(for: result)
            switch spec.values(result) {
            case .success(let values):
                return TransferVerdictRow(spec: spec, target: target, values: values, verdict: Verdict(Spread(values), target: target))
            case .failure(let missing):
                return TransferVerdictRow(spec: spec, target: target, values: [], verdict: .notMeasured(missing.reason))
            }
        }
    }
}

extension Report {
    /// The transfer case's section: how it was set up, every step side by side, the Cairn/peer
    /// comparisons and issue 10's verdict table.
    func transferSection(_ t: TransferResult) -> [String] {
        let l = t.layout
        func mib(_ bytes: UInt64) -> String { String(format: "%.2f MiB", Double(bytes) / 1_048_576) }
        var lines = ["## Transfer (issue 10): cairn fetch against curl and zsync, nginx on 127.0.0.1", ""]
        let c = t.corpus
        lines.append("- Rounds: \(t.runs), interleaved (every step of every tool once per round); figures are the median with min–max.")
        lines.append(
            "- old tree: the \(markdownEscaped(c.title)) (\(counted(c.fileCount, "file")), \(formatMiB(c.totalBytes)))"
                + (t.trees.extractFileAdded ? " plus `\(t.trees.extractPath)` (\(formatMiB(t.trees.extractBytes)) of text: the corpus has no file of 9–11 MiB)" : ""))
        let ch = t.trees.change
        lines.append(
            "- new tree: old + the small change: 64 KiB appended to `\(markdownEscaped(ch.appendedTo))`, 3 × 16 bytes inverted at "
                + "\(ch.overwrittenAt.map(String.init).joined(separator: ", ")) in the largest file `\(markdownEscaped(ch.overwrittenIn))`, "
                + "1 MiB added as `\(ch.added)`")
        lines.append(
            "- Archives (`cairn create`, default options): old.cairn \(l.oldArchiveBytes) bytes (\(mib(l.oldArchiveBytes))), new.cairn "
                + "\(l.newArchiveBytes) bytes (\(mib(l.newArchiveBytes))); every fetch is of new.cairn")
        lines.append(
            "- **Bytes** are nginx's `$body_bytes_sent` summed over every request of the step (its access log), for every tool alike; "
                + "for a resume, of both runs, and *re-sent* = that total − the archive's size. MiB = 2^20 bytes; MB/s = archive bytes / "
                + "wall / 10^6. CPU s = user + system of the process tree (wait4); peak RSS under `/usr/bin/time`.")
        lines.append(
            "- Delta yardstick (issue 10): manifest + footer \(l.manifestAndFooterBytes) bytes + \(l.newChunkRecords) chunk records "
                + "(12 + 40 + stored length each) whose id old.cairn has no chunk record of, \(l.newChunkRecordBytes) bytes + "
                + "\(l.newPackRecords) pack records whose content digest no pack of old.cairn has (framed length from the record "
                + "header), \(l.newPackRecordBytes) bytes = **\(l.deltaYardstick) bytes (\(mib(l.deltaYardstick)))**")
        lines.append(
            "- Resume allowance: new.cairn has \(l.commitCount) commit records; the largest gap between consecutive commit ends "
                + "(0 before the first, the file's end after the last) is \(l.largestCommitInterval) bytes; + 1 MiB = "
                + "**\(l.resumeAllowance) bytes (\(mib(l.resumeAllowance)))**")
        lines.append(
            "- Remote extract: `\(markdownEscaped(t.trees.extractPath))` (\(t.trees.extractBytes) bytes), stored as \(l.extractStoredBytes) "
                + "bytes of records; + manifest + footer = **\(l.extractYardstick) bytes (\(mib(l.extractYardstick)))**")
        for note in t.notes { lines.append("- \(note)") }
        lines.append("")

        lines.append("| measurement | tool | wall s | CPU s | peak RSS MiB | MB/s | MiB sent | MiB re-sent | requests | rounds | notes |")
        lines.append("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|")
        for op in t.operations {
            let head = "| \(op.measure.rawValue) | \(markdownEscaped(op.tool)) | "
            if let reason = op.notMeasured {
                lines.append(head + "– | – | – | – | – | – | – | 0 | not measured: \(markdownEscaped(reason)) |")
                continue
            }
            guard let wall = op.wall, let cpu = op.cpu, let rss = op.peakRSS, let sent = op.bodyBytes else {
                lines.append(head + "– | – | – | – | – | – | – | 0 | failed: \(markdownEscaped(op.failure ?? "?")) |")
                continue
            }
            let isResume = op.measure.cutFraction != nil
            let mbps = op.measure == .full ? String(format: "%.0f", Double(op.archiveBytes) / wall.median / 1e6) : "–"
            let resent = isResume ? (op.resentBytes?.scaled(1 / 1_048_576).formatted("%.2f") ?? "–") : "–"
            var notes: [String] = []
            if isResume {
                notes.append("wall and CPU of the rerun")
                if let cut = Spread(op.successful.compactMap { $0.cutAtBytes.map { Double($0) } }) {
                    notes.append("killed at \(cut.scaled(1 / 1_048_576).formatted("%.1f")) MiB")
                }
            }
            let reported = op.successful.compactMap(\.reportedBytes)
            if !reported.isEmpty {
                let timedBodies = op.successful.map { $0.bodyBytes - ($0.firstRunBodyBytes ?? 0) }
                let agree = zip(reported, timedBodies).allSatisfy { $0 == $1 }
                notes.append(
                    agree ? "cairn's own fetchedBytes agrees with nginx" : "cairn's own fetchedBytes: \(reported.map(String.init).joined(separator: ", "))")
            }
            if let f = op.failure { notes.append("a run failed: \(markdownEscaped(f))") }
            lines.append(
                head + "\(wall.formatted()) | \(cpu.formatted()) | \(String(format: "%.0f", rss.median / 1_048_576)) | \(mbps) | "
                    + "\(sent.scaled(1 / 1_048_576).formatted("%.2f")) | \(resent) | "
                    + "\(Spread(op.successful.map { Double($0.requests) })?.formatted("%.0f") ?? "–") | \(wall.count) | \(notes.joined(separator: "; ")) |")
        }
        lines.append("")

        lines += sideBySide(comparisons(t))

        lines += verdictTable(
            "### Issue 10 targets: verdicts", summary: "Issue 10 targets",
            rows: TransferVerdictRow.rows(for: t).map { ($0.spec.title, $0.spec.unit, $0.values, $0.target, nil, $0.verdict) })
        return lines
    }

    /// A case's verdict section: a table of its targets (title, median and min–max in `unit`,
    /// rounds, threshold, the target's source when given, verdict), then the count of each
    /// verdict after `summary`.
    func verdictTable(
        _ heading: String, summary: String,
        rows: [(title: String, unit: String, values: [Double], target: Target, source: String?, verdict: Verdict)]
    ) -> [String] {
        let withSource = rows.contains { $0.source != nil }
        var lines = [heading, ""]
        lines.append("| target | median | spread (min–max) | rounds | threshold | " + (withSource ? "source | " : "") + "verdict |")
        lines.append("|---|--:|--:|--:|--:|" + (withSource ? "---|" : "") + "---|")
        for row in rows {
            let s = Spread(row.values)
            let format = row.unit == "MiB" ? "%.2f" : "%.3f"
            lines.append(
                "| \(markdownEscaped(row.title)) | " + (s.map { String(format: format, $0.median) + " " + row.unit } ?? "–")
                    + " | " + (s.map { String(format: "\(format)–\(format)", $0.minimum, $0.maximum) } ?? "–") + " | \(row.values.count) | "
                    + "\(row.target.formatted(format, unit: row.unit)) | " + (withSource ? "\(markdownEscaped(row.source ?? "")) | " : "")
                    + "\(markdownEscaped(row.verdict.text)) |")
        }
        let counts = Dictionary(grouping: rows, by: { $0.verdict.status }).mapValues(\.count)
        let found = ["pass", "fail", "indicative-pass", "indicative-fail", "not-measured"].compactMap { key in counts[key].map { "\($0) \(key)" } }
        lines.append("")
        lines.append("\(summary): \(found.joined(separator: ", ")). PASS and FAIL need 3 successful rounds; fewer are indicative.")
        lines.append("")
        return lines
    }

    /// The "Side by side: Cairn / peer, per round" section of a case: one row per comparison,
    /// its median and min–max over the rounds ("not measured" when `values` is nil).
    func sideBySide(_ comparisons: [(measure: String, quantity: String, cairn: String, peer: String, values: [Double]?)]) -> [String] {
        var lines = ["### Side by side: Cairn / peer, per round", ""]
        lines.append("| measurement | quantity | Cairn | peer | median | spread (min–max) | rounds |")
        lines.append("|---|---|---|---|--:|--:|--:|")
        for c in comparisons {
            let s = c.values.flatMap { Spread($0) }
            lines.append(
                "| \(c.measure) | \(c.quantity) | \(markdownEscaped(c.cairn)) | \(markdownEscaped(c.peer)) | "
                    + (s.map { String(format: "%.3f", $0.median) } ?? "–") + " | "
                    + (s.map { String(format: "%.3f–%.3f", $0.minimum, $0.maximum) } ?? (c.values == nil ? "not measured" : "–"))
                    + " | \(c.values?.count ?? 0) |")
        }
        lines.append("")
        return lines
    }

    /// The Cairn/peer figures of the side-by-side table: per-round ratios, nil when not measured.
    func comparisons(_ t: TransferResult) -> [(measure: String, quantity: String, cairn: String, peer: String, values: [Double]?)] {
        func values(_ r: Result<[Double], TransferNotMeasured>) -> [Double]? { try? r.get() }
        var list: [(measure: String, quantity: String, cairn: String, peer: String, values: [Double]?)] = []
        let fullC = (TransferTool.cairn, TransferMeasure.full)
        let fullP = (TransferTool.curl, TransferMeasure.full)
        list.append(("full fetch", "throughput (peer wall / Cairn wall)", fullC.0, fullP.0, values(TransferTarget.ratio(t, fullP, fullC) { $0.result.wallSeconds })))
        let fullS = (TransferTool.curlSync, TransferMeasure.full)
        list.append(("full fetch", "throughput (peer wall / Cairn wall)", fullC.0, fullS.0, values(TransferTarget.ratio(t, fullS, fullC) { $0.result.wallSeconds })))
        list.append(("full fetch", "CPU seconds", fullC.0, fullP.0, values(TransferTarget.ratio(t, fullC, fullP) { $0.result.cpuSeconds })))
        // The most this machine allows: Cairn's wall time can be no less than its CPU time spread
        // over every core, however well it overlaps (the server's own CPU not counted).
        let cores = Double(max(1, ProcessInfo.processInfo.activeProcessorCount))
        list.append((
            "full fetch", "best throughput on \(Int(cores)) cores (peer wall / (Cairn CPU s / \(Int(cores))))", fullC.0, fullP.0,
            {
                guard let x = t.operation(fullC.0, fullC.1), let y = t.operation(fullP.0, fullP.1), x.notMeasured == nil, y.notMeasured == nil
                else { return nil }
                return (1...max(1, t.runs)).compactMap { round in
                    guard let a = x.run(round: round), let b = y.run(round: round), a.result.cpuSeconds > 0 else { return nil }
                    return b.result.wallSeconds / (a.result.cpuSeconds / cores)
                }
            }()))
        list.append(("full fetch", "bytes sent", fullC.0, fullP.0, values(TransferTarget.ratio(t, fullC, fullP) { Double($0.bodyBytes) })))
        for measure in [TransferMeasure.resume50, .resume90] {
            let c = (TransferTool.cairn, measure)
            let p = (TransferTool.curlResume, measure)
            list.append((measure.rawValue, "MiB re-sent, Cairn − peer", c.0, p.0, {
                guard let x = t.operation(c.0, c.1), let y = t.operation(p.0, p.1), x.notMeasured == nil, y.notMeasured == nil else { return nil }
                return (1...max(1, t.runs)).compactMap { round in
                    guard let a = x.run(round: round), let b = y.run(round: round) else { return nil }
                    return (Double(a.bodyBytes) - Double(b.bodyBytes)) / 1_048_576
                }
            }()))
            list.append((measure.rawValue, "rerun wall time", c.0, p.0, values(TransferTarget.ratio(t, c, p) { $0.result.wallSeconds })))
        }
        let seeded = (TransferTool.cairnSeeded, TransferMeasure.seeded)
        let zsync = (TransferTool.zsync, TransferMeasure.seeded)
        list.append(("seeded delta", "bytes sent", seeded.0, zsync.0, values(TransferTarget.ratio(t, seeded, zsync) { Double($0.bodyBytes) })))
        list.append(("seeded delta", "wall time", seeded.0, zsync.0, values(TransferTarget.ratio(t, seeded, zsync) { $0.result.wallSeconds })))
        list.append(("seeded delta", "bytes sent", seeded.0, "\(fullC.0) (full)", values(TransferTarget.ratio(t, seeded, fullC) { Double($0.bodyBytes) })))
        list.append(("seeded delta", "wall time", seeded.0, "\(fullC.0) (full)", values(TransferTarget.ratio(t, seeded, fullC) { $0.result.wallSeconds })))
        let encrypted = (TransferTool.cairnSeededEncrypted, TransferMeasure.seeded)
        list.append(("seeded delta", "bytes sent", encrypted.0, seeded.0, values(TransferTarget.ratio(t, encrypted, seeded) { Double($0.bodyBytes) })))
        list.append(("seeded delta", "wall time", encrypted.0, seeded.0, values(TransferTarget.ratio(t, encrypted, seeded) { $0.result.wallSeconds })))
        return list
    }

    /// The transfer case as JSON: setup, yardsticks, every round of every step, verdicts.
    func transferJSON(_ t: TransferResult) -> [String: Any] {
        func spread(_ s: Spread?) -> Any {
            guard let s else { return NSNull() }
            return ["median": s.median, "min": s.minimum, "max": s.maximum, "count": s.count] as [String: Any]
        }
        let l = t.layout
        let ch = t.trees.change
        return [
            "runs": t.runs, "corpus": ["title": t.corpus.title, "path": t.corpus.path, "fileCount": t.corpus.fileCount, "totalBytes": t.corpus.totalBytes],
            "extractPath": t.trees.extractPath, "extractBytes": t.trees.extractBytes, "extractFileAdded": t.trees.extractFileAdded,
            "smallChange": [
                "appendedTo": ch.appendedTo, "appendedBytes": SmallChange.appendedBytes, "overwrittenIn": ch.overwrittenIn,
                "overwrittenAt": ch.overwrittenAt, "overwriteBytes": SmallChange.overwriteBytes, "added": ch.added, "addedBytes": SmallChange.addedBytes,
            ] as [String: Any],
            "createSeconds": t.createSeconds, "slowRateBytesPerSecond": t.slowRate, "toolVersions": t.versions, "notes": t.notes,
            "bytesMeasure": "nginx access log $body_bytes_sent, summed over the step's requests",
            "layout": [
                "oldArchiveBytes": l.oldArchiveBytes, "newArchiveBytes": l.newArchiveBytes, "manifestAndFooterBytes": l.manifestAndFooterBytes,
                "newChunkRecords": l.newChunkRecords, "newChunkRecordBytes": l.newChunkRecordBytes, "newPackRecords": l.newPackRecords,
                "newPackRecordBytes": l.newPackRecordBytes, "deltaYardstickBytes": l.deltaYardstick, "commitCount": l.commitCount,
                "largestCommitIntervalBytes": l.largestCommitInterval, "resumeAllowanceBytes": l.resumeAllowance,
                "extractStoredBytes": l.extractStoredBytes, "extractYardstickBytes": l.extractYardstick,
            ] as [String: Any],
            "operations": t.operations.map { op -> [String: Any] in
                var o: [String: Any] = [
                    "tool": op.tool, "measure": op.measure.rawValue, "command": op.command, "wallSeconds": spread(op.wall),
                    "cpuSeconds": spread(op.cpu), "peakRSSBytes": spread(op.peakRSS), "bodyBytes": spread(op.bodyBytes),
                    "runs": op.runs.map { r -> [String: Any] in
                        var run: [String: Any] = [
                            "round": r.round, "exitStatus": r.result.exitStatus, "wallSeconds": r.result.wallSeconds,
                            "userSeconds": r.result.userSeconds, "systemSeconds": r.result.systemSeconds, "peakRSSBytes": r.result.peakRSSBytes,
                            "bodyBytes": r.bodyBytes, "requests": r.requests,
                        ]
                        if let c = r.cutAtBytes { run["cutAtBytes"] = c }
                        if let f = r.firstRunBodyBytes { run["firstRunBodyBytes"] = f }
                        if let b = r.reportedBytes { run["cairnFetchedBytes"] = b }
                        return run
                    },
                ]
                if op.measure == .full, let w = op.wall { o["megabytesPerSecond"] = Double(op.archiveBytes) / w.median / 1e6 }
                if op.measure.cutFraction != nil { o["resentBytes"] = spread(op.resentBytes) }
                if let f = op.failure { o["failure"] = f }
                if let n = op.notMeasured { o["notMeasured"] = n }
                return o
            },
            "comparisons": comparisons(t).map { c -> [String: Any] in
                ["measure": c.measure, "quantity": c.quantity, "cairn": c.cairn, "peer": c.peer, "perRound": c.values.map { $0 as Any } ?? NSNull(),
                 "median": spread(c.values.flatMap { Spread($0) })]
            },
            "verdicts": TransferVerdictRow.rows(for: t).map { row -> [String: Any] in
                [
                    "target": row.spec.title, "unit": row.spec.unit, "perRound": row.values, "measured": spread(Spread(row.values)),
                    "limit": row.target.limit, "comparison": row.target.comparison.rawValue, "source": row.target.source,
                    "minimumRounds": row.target.minimumRounds, "verdict": row.verdict.text, "status": row.verdict.status,
                ]
            },
        ]
    }
}
