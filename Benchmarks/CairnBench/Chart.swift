import Cairn
import Foundation

/// The report's SVG chart, drawn by the harness itself: for each case, three panels of grouped
/// horizontal bars (wall time, CPU time, archive size), one group per tool, bars at the median
/// with min–max whiskers, labelled axes and a legend.
struct Chart {
    var report: Report

    /// One tool's bars in one case.
    struct Row {
        var tool: String
        var createWall: Spread?
        var extractWall: Spread?
        var createCPU: Spread?
        var extractCPU: Spread?
        /// MiB.
        var archive: Spread?
    }

    /// A bar series: its name in the legend and its colour.
    struct Series {
        var name: String
        var color: String
        static let create = Series(name: "create", color: "#4c78a8")
        static let extract = Series(name: "extract", color: "#f58518")
        static let archive = Series(name: "archive size", color: "#54a24b")
    }

    // Layout, in SVG user units (pixels).
    static let width = 1260.0
    static let left = 16.0
    static let labelWidth = 190.0
    static let panelWidth = 300.0
    static let panelGap = 52.0
    static let barHeight = 11.0
    static let barGap = 3.0
    static let groupGap = 10.0

    /// The rows of one case: every tool with a create or extract step (the read baseline is
    /// left out), in the case's order.
    static func rows(of result: CaseResult) -> [Row] {
        var rows: [Row] = []
        for op in result.operations where op.kind == .create || op.kind == .extract {
            if op.tool == ToolName.read { continue }
            var index = rows.firstIndex { $0.tool == op.tool }
            if index == nil {
                rows.append(Row(tool: op.tool))
                index = rows.count - 1
            }
            guard let i = index else { continue }
            // The first create step of a tool is its create (not `create + fsync`).
            if op.kind == .create, rows[i].createWall == nil, rows[i].archive == nil {
                rows[i].createWall = op.wall
                rows[i].createCPU = op.cpu
                rows[i].archive = op.archiveBytes?.scaled(1 / 1_048_576)
            } else if op.kind == .extract, rows[i].extractWall == nil {
                rows[i].extractWall = op.wall
                rows[i].extractCPU = op.cpu
            }
        }
        return rows
    }

    /// A round axis maximum and tick step for values up to `value`: steps of 1, 2 or 5 × 10^k,
    /// about five ticks.
    static func axis(upTo value: Double) -> (maximum: Double, step: Double) {
        guard value > 0, value.isFinite else { return (1, 0.2) }
        let raw = value / 5
        let magnitude = pow(10, floor(log10(raw)))
        let step = [1.0, 2, 5, 10].map { $0 * magnitude }.first { $0 >= raw } ?? 10 * magnitude
        return (ceil(value / step) * step, step)
    }

    func svg() -> String {
        var body: [String] = []
        var y = 30.0
        let runs = report.runs
        body.append(text(Self.left, y, "Cairn benchmark, \(report.timestampString)", size: 18, weight: "bold"))
        y += 22
        body.append(
            text(
                Self.left, y,
                "Bars: median of \(runs) interleaved round\(runs == 1 ? "" : "s"); whiskers: min–max. Lower is better. "
                    + "\(report.machine.processors) × \(report.machine.cpuModel), warm page cache.", size: 12, color: "#444"))
        y += 20
        var legendX = Self.left
        for series in [Series.create, .extract, .archive] {
            body.append(rect(legendX, y - 10, 14, 10, series.color))
            body.append(text(legendX + 19, y, series.name, size: 12))
            legendX += 30 + Double(series.name.count) * 7
        }
        body.append(whisker(legendX + 10, legendX + 40, y - 5))
        body.append(text(legendX + 48, y, "min–max over rounds", size: 12))
        y += 22

        for (index, result) in report.cases.enumerated() {
            let rows = Self.rows(of: result)
            guard !rows.isEmpty else { continue }
            let b = result.benchCase
            y += 12
            body.append(
                text(
                    Self.left, y, "Case \(index + 1): \(b.title.replacingOccurrences(of: "`", with: "")) — "
                        + "\(groupedThousands(b.fileCount)) file\(b.fileCount == 1 ? "" : "s"), \(formatMiB(b.totalBytes))", size: 14,
                    weight: "bold"))
            y += 22
            let groupHeight = 2 * Self.barHeight + Self.barGap + Self.groupGap
            let plotHeight = Double(rows.count) * groupHeight
            let panels: [(title: String, unit: String, bars: (Row) -> [(Series, Spread?)])] = [
                ("Wall time", "seconds", { [(.create, $0.createWall), (.extract, $0.extractWall)] }),
                ("CPU time (user + system)", "seconds", { [(.create, $0.createCPU), (.extract, $0.extractCPU)] }),
                ("Archive size", "MiB", { [(.archive, $0.archive)] }),
            ]
            for (p, panel) in panels.enumerated() {
                let x0 = Self.left + Self.labelWidth + Double(p) * (Self.panelWidth + Self.panelGap)
                body.append(text(x0, y, panel.title, size: 13, weight: "bold"))
                let top = y + 8
                let largest = rows.flatMap { panel.bars($0).compactMap { $0.1?.maximum } }.max() ?? 0
                let (axisMax, step) = Self.axis(upTo: largest)
                func px(_ v: Double) -> Double { x0 + v / axisMax * Self.panelWidth }
                // Grid and ticks.
                var tick = 0.0
                while tick <= axisMax + step / 2 {
                    body.append(line(px(tick), top, px(tick), top + plotHeight, color: tick == 0 ? "#333" : "#ddd"))
                    body.append(text(px(tick), top + plotHeight + 14, Self.number(tick, step: step), size: 10, anchor: "middle", color: "#444"))
                    tick += step
                }
                body.append(line(x0, top + plotHeight, x0 + Self.panelWidth, top + plotHeight, color: "#333"))
                body.append(
                    text(x0 + Self.panelWidth / 2, top + plotHeight + 29, panel.unit, size: 11, anchor: "middle", color: "#444"))
                for (r, row) in rows.enumerated() {
                    let groupTop = top + Double(r) * groupHeight + Self.groupGap / 2
                    if p == 0 {
                        body.append(
                            text(
                                Self.left + Self.labelWidth - 10, groupTop + Self.barHeight + 4, row.tool, size: 12, anchor: "end"))
                    }
                    let bars = panel.bars(row)
                    for (k, bar) in bars.enumerated() {
                        // A single series sits in the middle of the group.
                        let barTop =
                            bars.count == 1
                            ? groupTop + (Self.barHeight + Self.barGap) / 2 : groupTop + Double(k) * (Self.barHeight + Self.barGap)
                        let mid = barTop + Self.barHeight / 2
                        guard let s = bar.1 else {
                            body.append(text(x0 + 4, mid + 4, "\(bar.0.name): no successful run", size: 10, color: "#a00"))
                            continue
                        }
                        body.append(rect(x0, barTop, max(0.5, px(s.median) - x0), Self.barHeight, bar.0.color))
                        if s.maximum > s.minimum { body.append(whisker(px(s.minimum), px(s.maximum), mid)) }
                        body.append(
                            text(px(s.maximum) + 5, mid + 4, Self.value(s.median), size: 10, color: "#222"))
                    }
                }
            }
            y += 8 + plotHeight + 40
        }
        let height = y + 10
        var out = [
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>",
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(Self.width))\" height=\"\(Int(height))\" "
                + "viewBox=\"0 0 \(Int(Self.width)) \(Int(height))\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">",
            "<rect x=\"0\" y=\"0\" width=\"\(Int(Self.width))\" height=\"\(Int(height))\" fill=\"#ffffff\"/>",
        ]
        out += body
        out.append("</svg>")
        return out.joined(separator: "\n") + "\n"
    }

    /// A bar's value: two decimals below 10, one below 100, none above.
    static func value(_ v: Double) -> String {
        String(format: v < 10 ? "%.2f" : v < 100 ? "%.1f" : "%.0f", v)
    }

    /// A tick label with as many decimals as `step` needs (at most 2).
    static func number(_ value: Double, step: Double) -> String {
        let decimals = step >= 1 ? 0 : step >= 0.1 ? 1 : 2
        return String(format: "%.\(decimals)f", value)
    }

    private func f(_ v: Double) -> String { String(format: "%.1f", v) }

    private func text(
        _ x: Double, _ y: Double, _ content: String, size: Int, anchor: String = "start", weight: String = "normal",
        color: String = "#111"
    ) -> String {
        "<text x=\"\(f(x))\" y=\"\(f(y))\" font-size=\"\(size)\" text-anchor=\"\(anchor)\" font-weight=\"\(weight)\" "
            + "fill=\"\(color)\">\(xmlEscaped(content))</text>"
    }

    private func rect(_ x: Double, _ y: Double, _ w: Double, _ h: Double, _ color: String) -> String {
        "<rect x=\"\(f(x))\" y=\"\(f(y))\" width=\"\(f(w))\" height=\"\(f(h))\" fill=\"\(color)\"/>"
    }

    private func line(_ x1: Double, _ y1: Double, _ x2: Double, _ y2: Double, color: String) -> String {
        "<line x1=\"\(f(x1))\" y1=\"\(f(y1))\" x2=\"\(f(x2))\" y2=\"\(f(y2))\" stroke=\"\(color)\" stroke-width=\"1\"/>"
    }

    /// A horizontal min–max whisker with end caps, centred on `y`.
    private func whisker(_ x1: Double, _ x2: Double, _ y: Double) -> String {
        "<path class=\"whisker\" d=\"M\(f(x1)) \(f(y)) H\(f(x2)) M\(f(x1)) \(f(y - 4)) V\(f(y + 4)) M\(f(x2)) \(f(y - 4)) V\(f(y + 4))\" "
            + "stroke=\"#222\" stroke-width=\"1.3\" fill=\"none\"/>"
    }
}

/// `text` with XML's five special characters escaped.
func xmlEscaped(_ text: String) -> String { S3XMLDocument.escaped(text) }
