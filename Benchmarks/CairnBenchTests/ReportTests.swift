import CairnTestSupport
import Foundation
import FoundationXML
import Testing

@testable import cairn_bench

@Suite("Benchmark report")
struct ReportTests {
    @Test("with fewer than 5 runs an issue 9 verdict is indicative, never PASS or FAIL, and the header says so")
    func indicativeFromOneRun() {
        let report = Fixture.report(runs: 1, cases: [Fixture.caseResult(cairnCreate: [1], tarCreate: [4])])
        let text = report.markdown()
        #expect(text.contains("pass (indicative: 1 round, needs 5)"))
        #expect(text.contains("1 round, fewer than issue 9's 5: its verdicts are indicative only"))
        #expect(!text.contains("| PASS |") && !text.contains("| FAIL |"))
        #expect(text.contains("≤ 0.45 (issue 9)"), "the target is still shown as a target")
    }

    @Test("with 5 runs the verdict is about the median of the per-round ratios")
    func verdictFromMedian() {
        // Per-round ratios 0.25, 0.4, 1.0, 0.2, 2.0: the median 0.4 is within 0.45 although two rounds are over.
        let report = Fixture.report(runs: 5, cases: [Fixture.caseResult(cairnCreate: [1, 2, 3, 1, 4], tarCreate: [4, 5, 3, 5, 2])])
        let row = report.markdown().split(separator: "\n").first { $0.contains("wall time | cairn (lz4) create | tar \\| lz4 -1 create |") }
        #expect(row?.contains("| 0.40 | 0.20–2.00 | 5 | ≤ 0.45 (issue 9) | PASS |") == true, "\(row ?? "no row")")
    }

    @Test("MB/s is quoted for create and extract but not for list")
    func throughputOnlyForContent() throws {
        let report = Fixture.report(runs: 3, cases: [Fixture.caseResult(cairnCreate: [1, 1, 1], tarCreate: [2, 2, 2])])
        let lines = report.markdown().split(separator: "\n")
        let create = try #require(lines.first { $0.hasPrefix("| cairn (lz4) | create |") })
        let list = try #require(lines.first { $0.hasPrefix("| cairn (lz4) | list |") })
        #expect(create.split(separator: "|")[3].trimmingCharacters(in: .whitespaces) == "100", "100 MB in 1 s")
        #expect(list.split(separator: "|")[3].trimmingCharacters(in: .whitespaces) == "–")
        let json = report.json()
        let cases = try #require(json["cases"] as? [[String: Any]])
        let operations = try #require(cases.first?["operations"] as? [[String: Any]])
        #expect(operations.first { $0["operation"] as? String == "list" }?["megabytesPerSecond"] == nil)
        #expect(operations.first { $0["operation"] as? String == "create" }?["megabytesPerSecond"] as? Double == 100)
    }

    @Test("archive sizes of every case stand side by side")
    func sizesSideBySide() throws {
        let report = Fixture.report(
            runs: 3,
            cases: [
                Fixture.caseResult(cairnCreate: [1, 1, 1], tarCreate: [1, 1, 1], cairnBytes: 653 << 20, tarBytes: 667 << 20),
                Fixture.caseResult(kind: .smallFiles, cairnCreate: [1, 1, 1], tarCreate: [1, 1, 1], cairnBytes: 207 << 20, tarBytes: 108 << 20),
            ])
        let lines = report.markdown().split(separator: "\n")
        let header = try #require(lines.first { $0.hasPrefix("| case | files | content MiB |") })
        #expect(header.contains("| cairn (lz4) | tar \\| lz4 -1 |"))
        #expect(lines.contains { $0.hasPrefix("| 1: fixture corpus |") && $0.hasSuffix("| 653.0 | 667.0 |") })
        #expect(lines.contains { $0.hasPrefix("| 2: fixture small-files |") && $0.hasSuffix("| 207.0 | 108.0 |") })
    }

    @Test("results are written with the UTC time in their names and never replace an earlier result")
    func timestampedNeverOverwritten() throws {
        let directory = try TemporaryDirectory(prefix: "cairn-bench-results")
        defer { directory.remove() }
        let out = directory.appending("results")
        let report = Fixture.report(runs: 3, cases: [Fixture.caseResult(cairnCreate: [1, 1, 1], tarCreate: [2, 2, 2])])
        #expect(report.fileTimestamp == "2026-12-01T101500Z")
        let first = try report.write(to: out)
        #expect(first.map { ($0 as NSString).lastPathComponent } == ["results-2026-12-01T101500Z.md", "results-2026-12-01T101500Z.json", "results-2026-12-01T101500Z.svg"])
        try Data("earlier result\n".utf8).write(to: URL(fileURLWithPath: first[0]))
        let second = try report.write(to: out)
        #expect(second.map { ($0 as NSString).lastPathComponent } == ["results-2026-12-01T101500Z-2.md", "results-2026-12-01T101500Z-2.json", "results-2026-12-01T101500Z-2.svg"])
        #expect(try String(contentsOfFile: first[0], encoding: .utf8) == "earlier result\n")
        #expect(try String(contentsOfFile: second[0], encoding: .utf8).contains("[results-2026-12-01T101500Z-2.svg]"), "the Markdown names its own chart")
    }

    @Test("results go outside the checkout unless --out is given: XDG_STATE_HOME, else /tmp")
    func defaultOutputDirectory() throws {
        #expect(BenchOptions.defaultOutputDirectory(environment: ["XDG_STATE_HOME": "/home/u/.local/state"]) == "/home/u/.local/state/cairn-bench/results")
        #expect(BenchOptions.defaultOutputDirectory(environment: [:]) == "/tmp/cairn-bench/results")
        #expect(BenchOptions.defaultOutputDirectory(environment: ["XDG_STATE_HOME": "relative"]) == "/tmp/cairn-bench/results")
        let options = try BenchOptions([])
        #expect(options.outputDirectory(environment: [:]) == "/tmp/cairn-bench/results")
        #expect(try BenchOptions(["--out", "here"]).outputDirectory(environment: [:]) == "here")
    }

    @Test("the chart is well-formed SVG with one bar per measured series and whiskers where runs differ")
    func chart() throws {
        // cairn: create and extract vary (whiskers), archive constant; tar: all constant.
        let report = Fixture.report(runs: 3, cases: [Fixture.caseResult(cairnCreate: [1, 2, 3], tarCreate: [2, 2, 2])])
        let svg = Chart(report: report).svg()
        let parser = XMLParser(data: Data(svg.utf8))
        let counter = ElementCounter()
        parser.delegate = counter
        #expect(parser.parse(), "\(parser.parserError.map { "\($0)" } ?? "")")
        // 2 tools × (wall create + extract, CPU create + extract, archive) = 10 bars, plus the
        // background and the legend's 3 swatches.
        #expect(counter.rects == 10 + 1 + 3)
        // cairn's wall and CPU bars vary: 4 whiskers, plus the legend's.
        #expect(counter.whiskers == 4 + 1)
        #expect(xmlEscaped("a<b & \"c\"") == "a&lt;b &amp; &quot;c&quot;")
        #expect(svg.contains(">Wall time<") && svg.contains(">seconds<") && svg.contains(">MiB<"))
    }
}

/// Counts `rect` elements and whisker paths of an SVG.
final class ElementCounter: NSObject, XMLParserDelegate {
    var rects = 0
    var whiskers = 0
    func parser(
        _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
        attributes: [String: String] = [:]
    ) {
        if elementName == "rect" { rects += 1 }
        if elementName == "path", attributes["class"] == "whisker" { whiskers += 1 }
    }
}
