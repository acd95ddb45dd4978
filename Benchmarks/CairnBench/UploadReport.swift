import Foundation

/// One verdict row of the upload case, computed per round from an ``UploadResult``. Issue 12
/// sets no numbers; the limits are its design rules (Spec/0003 §3.3: "memory holds at most two
/// parts beyond the archiver's own budget", "only the part in flight at the interruption is
/// sent again") and issue 10's remote-extract rule. ``all`` is the one list.
struct UploadTarget {
    var title: String
    /// How the per-round figure is shown: "×" or "MiB".
    var unit: String
    var target: Target
    /// The limit for a result (the part size and commit interval depend on the archive), MiB or
    /// a ratio; nil keeps ``target``'s.
    var limit: ((UploadResult) -> Double?)?
    /// The per-round values, or the reason there are none.
    var values: (UploadResult) -> Result<[Double], TransferNotMeasured>

    static let source = "issue 12 (Spec/0003 §3.3)"

    /// One part as the upload cuts it, at most: the part size plus the largest commit interval
    /// (a part ends at the first commit record past its size), bytes.
    static func largestPart(_ u: UploadResult) -> Double? {
        u.partSize.map { Double($0) + Double(u.layout.largestCommitInterval) }
    }

    static var all: [UploadTarget] {
        [
            UploadTarget(
                title: "peak RSS, cairn create -o s3:// − cairn create -o FILE, MiB (limit: two parts)", unit: "MiB",
                target: Target(limit: 0, source: source, minimumRounds: 3),
                limit: { u in largestPart(u).map { 2 * $0 / 1_048_576 } },
                values: { u in
                    guard let c = u.operation(UploadTool.cairn, .upload), let p = u.operation(UploadTool.twoStep, .upload) else {
                        return .failure(.init("the upload steps did not run"))
                    }
                    let values = (1...max(1, u.runs)).compactMap { round -> Double? in
                        guard let a = c.run(round: round), let b = p.run(round: round), let create = b.steps.first else { return nil }
                        return (Double(a.result.peakRSSBytes) - Double(create.peakRSSBytes)) / 1_048_576
                    }
                    return values.isEmpty ? .failure(.init("no round where both uploads succeeded")) : .success(values)
                }),
            UploadTarget(
                title: "resume after a kill at 50%: bytes re-sent by cairn, MiB (limit: one part)", unit: "MiB",
                target: Target(limit: 0, source: source, minimumRounds: 3), limit: { u in largestPart(u).map { $0 / 1_048_576 } },
                values: { u in
                    perRound(u, UploadTool.cairnResume, .resume50) { r in
                        r.proxyBytes.map { (Double($0) - Double(u.archiveBytes)) / 1_048_576 }
                    }
                }),
            UploadTarget(
                title: "remote extract bytes / (the file's stored records + manifest + footer)", unit: "×",
                target: Target(limit: 1.1, source: "issue 10's rule", minimumRounds: 3),
                values: { u in
                    perRound(u, UploadTool.cairnExtract, .remoteExtract) { r in
                        r.proxyBytes.map { Double($0) / Double(max(1, u.layout.extractYardstick)) }
                    }
                }),
        ]
    }

    /// The target with its limit for this result.
    func resolved(for result: UploadResult) -> Target {
        var t = target
        if let limit, let value = limit(result) { t.limit = value }
        return t
    }

    /// `value` of each successful round of one operation (rounds where it is nil left out).
    static func perRound(
        _ u: UploadResult, _ tool: String, _ measure: UploadMeasure, _ value: (UploadRun) -> Double?
    ) -> Result<[Double], TransferNotMeasured> {
        guard let op = u.operation(tool, measure) else { return .failure(.init("\(tool) did not run")) }
        if let reason = op.notMeasured { return .failure(.init(reason)) }
        let values = op.successful.compactMap(value)
        return values.isEmpty ? .failure(.init("no successful round of \(tool) (\(op.failure ?? "?"))")) : .success(values)
    }

    /// `value(a) / value(b)` in each round where both succeeded.
    static func ratio(
        _ u: UploadResult, _ a: (String, UploadMeasure), _ b: (String, UploadMeasure), _ value: (UploadRun) -> Double?
    ) -> [Double]? {
        guard let x = u.operation(a.0, a.1), let y = u.operation(b.0, b.1), x.notMeasured == nil, y.notMeasured == nil else { return nil }
        return (1...max(1, u.runs)).compactMap { round in
            guard let p = x.run(round: round), let q = y.run(round: round), let vp = value(p), let vq = value(q), vq > 0 else { return nil }
            return vp / vq
        }
    }
}

/// One row of the upload verdict table.
struct UploadVerdictRow {
    var spec: UploadTarget
    var target: Target
    var values: [Double]
    var verdict: Verdict

    static func rows(for result: UploadResult) -> [UploadVerdictRow] {
        UploadTarget.all.map { spec in
            let target = spec.resolved(for: result)
            if spec.limit != nil, spec.limit?(result) == nil {
                return UploadVerdictRow(spec: spec, target: target, values: [], verdict: .notMeasured("no part size recorded (no resume round)"))
            }
            switch spec.values(result) {
            case .success(let values):
                return UploadVerdictRow(spec: spec, target: target, values: values, verdict: Verdict(Spread(values), target: target))
            case .failure(let missing):
                return UploadVerdictRow(spec: spec, target: target, values: [], verdict: .notMeasured(missing.reason))
            }
        }
    }
}

extension Report {
    /// The upload case's section: the setup, every step side by side, the Cairn/peer
    /// comparisons and the verdict rows.
    func uploadSection(_ u: UploadResult) -> [String] {
        let l = u.layout
        func mib(_ bytes: UInt64) -> String { String(format: "%.2f MiB", Double(bytes) / 1_048_576) }
        var lines = ["## Object storage (issue 12): cairn create -o s3:// against create + rclone copyto, rclone serve s3 on 127.0.0.1", ""]
        let c = u.corpus
        lines.append("- Rounds: \(u.runs), interleaved (every step of every tool once per round); figures are the median with min–max.")
        lines.append("- Tree: the \(markdownEscaped(c.title)) at `\(markdownEscaped(c.path))` (\(counted(c.fileCount, "file")), \(formatMiB(c.totalBytes)))")
        lines.append(
            "- Archive (`cairn create`, default options): \(l.newArchiveBytes) bytes (\(mib(l.newArchiveBytes))), \(l.commitCount) commit "
                + "records, largest commit interval \(l.largestCommitInterval) bytes; made once locally in \(String(format: "%.1f", u.createSeconds)) s "
                + "as the reference every uploaded object is compared with (`cmp` of the server's file, outside the timed window)")
        if let part = u.partSize {
            lines.append(
                "- cairn's part size (its upload journal): \(part) bytes (\(mib(part))); one part at most = part size + largest commit "
                    + "interval = \(mib(part + l.largestCommitInterval))")
        }
        lines.append(
            "- Server: `rclone serve s3` (CairnTestSupport's `RcloneS3Server`, file-backed, multipart uploads held in memory until "
                + "completed). Peer client: the same rclone binary, `rclone copyto` with an on-the-fly `:s3:` remote "
                + "(`--s3-provider Other --s3-endpoint … --s3-access-key-id … --s3-secret-access-key … --s3-force-path-style`, "
                + "an empty config; rclone's defaults: 5 MiB chunks, 4 concurrent parts, multipart above 200 MiB).")
        lines.append(
            "- **upload**: `cairn create -o s3://bench/corpus.cairn` against `cairn create -o FILE` then `rclone copyto FILE "
                + ":s3:bench/corpus2.cairn`; the two-step's wall and CPU are the sum of its steps, its peak RSS the larger. MB/s = "
                + "archive bytes / wall / 10^6. CPU s = user + system of the process tree (wait4); peak RSS under `/usr/bin/time`.")
        lines.append(
            "- **resume after a kill at 50%**: cairn's first run is killed (SIGKILL, its process group) once the part sizes its "
                + "upload journal (`--upload-state`, JSON lines) records reach half the archive, then `cairn create --resume --json` "
                + "is timed; rclone's `copyto` (with `--s3-upload-cutoff 0`: multipart, as rclone is anyway above 200 MiB) is killed "
                + "once its answered part uploads reach half (that first run only with `--bwlimit` of the archive in 2 s, at least 1 MiB/s, so that its parallel parts do not all finish at once on a small archive), then run again (rclone starts a new multipart upload: it cannot "
                + "continue one across runs). *Bytes* are the request bodies the proxy relayed upstream in both runs (in-flight "
                + "parts included); *re-sent* = that − the archive. A first run that completed the object before the kill landed fails the round. cairn's own count (journal's recorded bytes + the resume's "
                + "`uploadedBytes` − the archive, without the part in flight) is in the notes.")
        lines.append(
            "- **remote extract**: `cairn extract s3://bench/extract.cairn -C DIR \(markdownEscaped(u.archivedExtractPath))` "
                + "(\(u.extractBytes) bytes; ranged GETs) against `rclone copyto` of the whole object then a local "
                + "`cairn extract FILE -C DIR PATH`. *Bytes* are the response bodies the proxy relayed. Yardstick: the file's "
                + "stored records \(l.extractStoredBytes) bytes + manifest + footer = **\(l.extractYardstick) bytes (\(mib(l.extractYardstick)))**.")
        for note in u.notes { lines.append("- \(note)") }
        lines.append("")

        lines.append("| measurement | tool | wall s | CPU s | peak RSS MiB | MB/s | MiB through proxy | MiB re-sent | requests | rounds | notes |")
        lines.append("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|")
        for op in u.operations {
            let head = "| \(op.measure.rawValue) | \(markdownEscaped(op.tool)) | "
            if let reason = op.notMeasured {
                lines.append(head + "– | – | – | – | – | – | – | 0 | not measured: \(markdownEscaped(reason)) |")
                continue
            }
            guard let wall = op.wall, let cpu = op.cpu, let rss = op.peakRSS else {
                lines.append(head + "– | – | – | – | – | – | – | 0 | failed: \(markdownEscaped(op.failure ?? "?")) |")
                continue
            }
            let mbps = op.measure == .upload ? String(format: "%.0f", Double(op.archiveBytes) / wall.median / 1e6) : "–"
            let through = op.proxyBytes?.scaled(1 / 1_048_576).formatted("%.2f") ?? "–"
            let resent = op.measure == .resume50 ? (op.resentBytes?.scaled(1 / 1_048_576).formatted("%.2f") ?? "–") : "–"
            let requests = Spread(op.successful.compactMap { $0.requests.map { Double($0) } })?.formatted("%.0f") ?? "–"
            var notes: [String] = []
            if op.tool == UploadTool.twoStep {
                if let create = Spread(op.successful.compactMap { $0.steps.first?.wallSeconds }),
                    let copy = Spread(op.successful.compactMap { $0.steps.dropFirst().first?.wallSeconds })
                {
                    notes.append("create \(create.formatted()) s + copyto \(copy.formatted()) s")
                }
                if let create = Spread(op.successful.compactMap { $0.steps.first.map { Double($0.peakRSSBytes) } }),
                    let copy = Spread(op.successful.compactMap { $0.steps.dropFirst().first.map { Double($0.peakRSSBytes) } })
                {
                    notes.append(
                        "peak RSS create \(create.scaled(1 / 1_048_576).formatted("%.0f")) MiB, copyto \(copy.scaled(1 / 1_048_576).formatted("%.0f")) MiB")
                }
            }
            if op.measure == .resume50 {
                notes.append("wall and CPU of the rerun")
                if let cut = Spread(op.successful.compactMap { $0.cutAtBytes.map { Double($0) } }) {
                    notes.append("killed with \(cut.scaled(1 / 1_048_576).formatted("%.1f")) MiB acknowledged")
                }
                if let first = Spread(op.successful.compactMap { $0.firstRunBytes.map { Double($0) } }) {
                    notes.append("first run sent \(first.scaled(1 / 1_048_576).formatted("%.1f")) MiB")
                }
                if let own = op.reportedResentBytes {
                    let kept = Spread(op.successful.compactMap { $0.keptBytes.map { Double($0) } })
                    notes.append(
                        "cairn's own count: re-sent \(own.scaled(1 / 1_048_576).formatted("%.2f")) MiB"
                            + (kept.map { ", kept \($0.scaled(1 / 1_048_576).formatted("%.1f")) MiB" } ?? ""))
                }
            }
            if op.tool == UploadTool.cairn, !op.successful.isEmpty,
                op.successful.allSatisfy({ $0.uploadedBytes == op.archiveBytes })
            {
                notes.append("uploadedBytes = the archive")
            }
            if let f = op.failure { notes.append("a run failed: \(markdownEscaped(f))") }
            lines.append(
                head + "\(wall.formatted()) | \(cpu.formatted()) | \(rss.scaled(1 / 1_048_576).formatted("%.0f")) | \(mbps) | "
                    + "\(through) | \(resent) | \(requests) | \(wall.count) | \(notes.joined(separator: "; ")) |")
        }
        lines.append("")

        lines += sideBySide(uploadComparisons(u))

        lines += verdictTable(
            "### Issue 12 design limits: verdicts", summary: "Issue 12 limits",
            rows: UploadVerdictRow.rows(for: u).map { ($0.spec.title, $0.spec.unit, $0.values, $0.target, $0.target.source, $0.verdict) })
        return lines
    }

    /// The Cairn/peer figures of the side-by-side table: per-round ratios or differences, nil
    /// when not measured.
    func uploadComparisons(_ u: UploadResult) -> [(measure: String, quantity: String, cairn: String, peer: String, values: [Double]?)] {
        var list: [(measure: String, quantity: String, cairn: String, peer: String, values: [Double]?)] = []
        let up = (UploadTool.cairn, UploadMeasure.upload)
        let two = (UploadTool.twoStep, UploadMeasure.upload)
        list.append(("upload", "wall time (Cairn / peer)", up.0, two.0, UploadTarget.ratio(u, up, two) { $0.result.wallSeconds }))
        list.append(("upload", "CPU seconds (Cairn / peer)", up.0, two.0, UploadTarget.ratio(u, up, two) { $0.result.cpuSeconds }))
        list.append(("upload", "peak RSS (Cairn / peer)", up.0, two.0, UploadTarget.ratio(u, up, two) { Double($0.result.peakRSSBytes) }))
        let rc = (UploadTool.cairnResume, UploadMeasure.resume50)
        let rp = (UploadTool.rcloneResume, UploadMeasure.resume50)
        list.append(("resume after a kill at 50%", "bytes re-sent (Cairn / peer)", rc.0, rp.0, UploadTarget.ratio(u, rc, rp) { r in
            r.proxyBytes.map { max(0, Double($0) - Double(u.archiveBytes)) }
        }))
        list.append(("resume after a kill at 50%", "rerun wall time (Cairn / peer)", rc.0, rp.0, UploadTarget.ratio(u, rc, rp) { $0.result.wallSeconds }))
        let ec = (UploadTool.cairnExtract, UploadMeasure.remoteExtract)
        let ep = (UploadTool.rcloneExtract, UploadMeasure.remoteExtract)
        list.append(("remote extract of one file", "bytes read (Cairn / peer)", ec.0, ep.0, UploadTarget.ratio(u, ec, ep) { $0.proxyBytes.map { Double($0) } }))
        list.append(("remote extract of one file", "wall time (Cairn / peer)", ec.0, ep.0, UploadTarget.ratio(u, ec, ep) { $0.result.wallSeconds }))
        return list
    }

    /// The upload case as JSON: setup, yardsticks, every round of every step, verdicts.
    func uploadJSON(_ u: UploadResult) -> [String: Any] {
        func spread(_ s: Spread?) -> Any {
            guard let s else { return NSNull() }
            return ["median": s.median, "min": s.minimum, "max": s.maximum, "count": s.count] as [String: Any]
        }
        func process(_ r: ProcessResult) -> [String: Any] {
            [
                "exitStatus": r.exitStatus, "wallSeconds": r.wallSeconds, "userSeconds": r.userSeconds, "systemSeconds": r.systemSeconds,
                "peakRSSBytes": r.peakRSSBytes,
            ]
        }
        let l = u.layout
        var object: [String: Any] = [
            "runs": u.runs, "corpus": ["title": u.corpus.title, "path": u.corpus.path, "fileCount": u.corpus.fileCount, "totalBytes": u.corpus.totalBytes],
            "archiveBytes": u.archiveBytes, "commitCount": l.commitCount, "largestCommitIntervalBytes": l.largestCommitInterval,
            "extractPath": u.archivedExtractPath, "extractBytes": u.extractBytes, "extractStoredBytes": l.extractStoredBytes,
            "extractYardstickBytes": l.extractYardstick, "createSeconds": u.createSeconds, "toolVersions": u.versions, "notes": u.notes,
            "bytesMeasure": "pass-through proxy (fault-proxy.py bytes.log): request body bytes for the resume steps, response body bytes for the extracts",
            "operations": u.operations.map { op -> [String: Any] in
                var o: [String: Any] = [
                    "tool": op.tool, "measure": op.measure.rawValue, "command": op.command, "wallSeconds": spread(op.wall),
                    "cpuSeconds": spread(op.cpu), "peakRSSBytes": spread(op.peakRSS), "proxyBytes": spread(op.proxyBytes),
                    "runs": op.runs.map { r -> [String: Any] in
                        var run = process(r.result)
                        run["round"] = r.round
                        if !r.steps.isEmpty { run["steps"] = r.steps.map(process) }
                        if let b = r.proxyBytes { run["proxyBytes"] = b }
                        if let n = r.requests { run["requests"] = n }
                        if let f = r.firstRunBytes { run["firstRunBytes"] = f }
                        if let c = r.cutAtBytes { run["acknowledgedAtKillBytes"] = c }
                        if let p = r.partSize { run["partSize"] = p }
                        if let b = r.uploadedBytes { run["uploadedBytes"] = b }
                        if let b = r.keptBytes { run["keptBytes"] = b }
                        return run
                    },
                ]
                if op.measure == .upload, let w = op.wall { o["megabytesPerSecond"] = Double(op.archiveBytes) / w.median / 1e6 }
                if op.measure == .resume50 {
                    o["resentBytes"] = spread(op.resentBytes)
                    if op.tool == UploadTool.cairnResume { o["reportedResentBytes"] = spread(op.reportedResentBytes) }
                }
                if let f = op.failure { o["failure"] = f }
                if let n = op.notMeasured { o["notMeasured"] = n }
                return o
            },
            "comparisons": uploadComparisons(u).map { c -> [String: Any] in
                ["measure": c.measure, "quantity": c.quantity, "cairn": c.cairn, "peer": c.peer, "perRound": c.values.map { $0 as Any } ?? NSNull(),
                 "median": spread(c.values.flatMap { Spread($0) })]
            },
            "verdicts": UploadVerdictRow.rows(for: u).map { row -> [String: Any] in
                [
                    "target": row.spec.title, "unit": row.spec.unit, "perRound": row.values, "measured": spread(Spread(row.values)),
                    "limit": row.target.limit, "comparison": row.target.comparison.rawValue, "source": row.target.source,
                    "minimumRounds": row.target.minimumRounds, "verdict": row.verdict.text, "status": row.verdict.status,
                ]
            },
        ]
        if let p = u.partSize { object["partSizeBytes"] = p }
        return object
    }
}
