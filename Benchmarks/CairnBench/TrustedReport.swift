import Foundation

/// Issue 25's section of the report: the plain, signed and signed+encrypted archives and the
/// `tar | lz4 -1 | age` pipeline side by side on every case they ran on, the encrypted archive's
/// size against its allowance, and the verdicts of issue 25's targets.
extension Report {
    /// The tools of the side-by-side table, in column order.
    static let trustedColumns = [ToolName.cairnLZ4, ToolName.cairnSigned, ToolName.cairnEncrypted, ToolName.tarLZ4Age]

    /// Whether any case ran a trusted-archive tool (signed, encrypted, or the age pipeline).
    var hasTrustedTools: Bool {
        cases.contains { c in c.operations.contains { Self.trustedColumns.dropFirst().contains($0.tool) } }
    }

    /// Issue 25's verdict rows on the cases that ran.
    func trustedVerdictRows() -> [VerdictRow] {
        VerdictRow.rows(for: cases, runs: runs, source: TargetSpec.issue25).filter { row in
            // A target whose case did not run at all says nothing here (e.g. the 4 GiB file).
            if case .notMeasured = row.verdict, row.caseTitle == nil { return false }
            return true
        }
    }

    /// The archive size issue 25 allows an encrypted archive whose plain twin has `plainBytes`:
    /// plain + 0.5 % + 1 KiB.
    static func encryptedSizeAllowance(plainBytes: Double) -> Double { plainBytes * 1.005 + 1024 }

    /// The section, empty when no trusted-archive tool ran.
    func trustedSection() -> [String] {
        guard hasTrustedTools else { return [] }
        var lines = ["## Trusted archives (issue 25): plain / signed / signed+encrypted / tar | lz4 -1 | age", ""]
        lines.append(
            "Medians of the rounds, min–max in brackets. MB/s = tree bytes / median wall s / 10^6. Peak RSS of a pipeline is its "
                + "largest process. The ratios and their targets are in the Cairn / peer table above; the verdicts below.")
        lines.append("")
        for (index, result) in cases.enumerated() {
            let present = Self.trustedColumns.filter { tool in result.operations.contains { $0.tool == tool } }
            guard present.count > 1 else { continue }
            lines.append("### \(index + 1): \(markdownEscaped(result.benchCase.title))")
            lines.append("")
            lines.append("| | " + present.map(markdownEscaped).joined(separator: " | ") + " |")
            lines.append("|---|" + present.map { _ in "--:|" }.joined())
            for row in trustedRows(result, tools: present) { lines.append(row) }
            lines.append("")
            if let line = sizeAllowanceLine(result) {
                lines.append(line)
                lines.append("")
            }
        }
        let rows = trustedVerdictRows()
        if !rows.isEmpty {
            lines.append("### Issue 25 targets: verdicts")
            lines.append("")
            lines += Self.verdictLines(rows)
            lines.append("")
            lines.append(
                "PASS and FAIL need \(TargetSpec.issue9Rounds) successful interleaved rounds (the median of 5), fewer give an indicative "
                    + "verdict. Sizes: the ratio's limit is the 0.5 %; the line under each case checks plain + 0.5 % + 1 KiB in bytes.")
            lines.append("")
        }
        return lines
    }

    /// The rows of one case: create and extract wall, MB/s, CPU, peak RSS, then archive bytes.
    private func trustedRows(_ result: CaseResult, tools: [String]) -> [String] {
        let caseBytes = Double(result.benchCase.totalBytes)
        func cell(_ spread: Spread?, _ format: String, scale: Double = 1) -> String {
            guard let s = spread else { return "–" }
            return String(format: format, s.median * scale) + String(format: " (\(format)–\(format))", s.minimum * scale, s.maximum * scale)
        }
        var rows: [String] = []
        for operation in ["create", "extract"] {
            let ops = tools.map { result.operation($0, operation) }
            rows.append("| \(operation): wall s | " + ops.map { cell($0?.wall, "%.2f") }.joined(separator: " | ") + " |")
            rows.append(
                "| \(operation): MB/s | "
                    + ops.map { op in op?.wall.map { String(format: "%.0f", caseBytes / $0.median / 1e6) } ?? "–" }.joined(separator: " | ") + " |")
            rows.append("| \(operation): CPU s | " + ops.map { cell($0?.cpu, "%.2f") }.joined(separator: " | ") + " |")
            rows.append(
                "| \(operation): peak RSS MiB | " + ops.map { cell($0?.peakRSS, "%.0f", scale: 1 / 1_048_576) }.joined(separator: " | ") + " |")
        }
        let sizes = tools.map { result.operation($0, "create")?.archiveBytes }
        rows.append("| archive bytes | " + sizes.map { $0.map { String(format: "%.0f", $0.median) } ?? "–" }.joined(separator: " | ") + " |")
        return rows
    }

    /// "signed+encrypted archive: N bytes, plain M bytes, allowance A bytes: within (+x %)".
    private func sizeAllowanceLine(_ result: CaseResult) -> String? {
        guard let plain = result.operation(ToolName.cairnLZ4, "create")?.archiveBytes?.median,
            let encrypted = result.operation(ToolName.cairnEncrypted, "create")?.archiveBytes?.median
        else { return nil }
        let allowance = Self.encryptedSizeAllowance(plainBytes: plain)
        return String(
            format: "Signed+encrypted archive: %.0f bytes, plain %.0f bytes (+%.3f %%, +%.0f bytes); allowance plain + 0.5 %% + 1 KiB = %.0f bytes: %@.",
            encrypted, plain, (encrypted / plain - 1) * 100, encrypted - plain, allowance, encrypted <= allowance ? "within" : "OVER")
    }
}
