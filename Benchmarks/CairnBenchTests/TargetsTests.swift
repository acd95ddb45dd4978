import Foundation
import Testing

@testable import cairn_bench

@Suite("Issue 9 targets and the verdict table")
struct TargetsTests {
    /// A small-files case: cairn lz4 at `cairnWalls`, tar | lz4 at `tarWalls`, RSS per round.
    static func smallFiles(cairnWalls: [Double?], tarWalls: [Double?], createRSS: [UInt64], extractRSS: [UInt64]) -> CaseResult {
        CaseResult(
            benchCase: Fixture.benchCase(.smallFiles), warmRead: (bytes: 1, seconds: 1),
            operations: [
                Fixture.operation(ToolName.cairnLZ4, "create", .create, walls: cairnWalls, archiveBytes: 207, rssMiB: createRSS),
                Fixture.operation(ToolName.cairnLZ4, "extract", .extract, walls: cairnWalls, rssMiB: extractRSS),
                Fixture.operation(ToolName.cairnZstd, "create", .create, walls: cairnWalls, archiveBytes: 137),
                Fixture.operation(ToolName.tarLZ4, "create", .create, walls: tarWalls, archiveBytes: 108),
                Fixture.operation(ToolName.tarLZ4, "extract", .extract, walls: tarWalls),
                Fixture.operation(ToolName.tarZstd, "create", .create, walls: tarWalls, archiveBytes: 59),
            ], peers: [.tarLZ4, .tarZstd])
    }

    static func randomData(lz4: [Double], none: [Double]) -> CaseResult {
        CaseResult(
            benchCase: Fixture.benchCase(.randomData), warmRead: (bytes: 1, seconds: 1),
            operations: [
                Fixture.operation(ToolName.cairnLZ4, "create", .create, walls: lz4, archiveBytes: 100),
                Fixture.operation(ToolName.cairnNone, "create", .create, walls: none, archiveBytes: 100),
            ], peers: [])
    }

    @Test("the list names every target of issue 9 once per case kind, with its threshold and 5 rounds")
    func everyTarget() {
        let issue9 = TargetSpec.all.filter { $0.target.source == TargetSpec.issue9 }
        func limit(_ kind: BenchCase.Kind, _ title: String) -> Double? {
            issue9.first { $0.kind == kind && $0.title == title }?.target.limit
        }
        #expect(issue9.allSatisfy { $0.target.minimumRounds == 5 })
        for kind in [BenchCase.Kind.corpus, .smallFiles, .tree] {
            #expect(limit(kind, "archive size, cairn lz4 vs tar | lz4") == 1.0)
            #expect(limit(kind, "archive size, cairn zstd:3 vs tar | zstd -3") == 1.0)
        }
        #expect(limit(.corpus, "create wall time vs tar | lz4") == 0.45)
        #expect(limit(.smallFiles, "create wall time vs tar | lz4") == 0.6)
        #expect(limit(.corpus, "extract wall time vs lz4 -d | tar -x") == 0.5)
        #expect(limit(.smallFiles, "extract wall time vs lz4 -d | tar -x") == 0.5)
        #expect(limit(.largeFile, "peak RSS, cairn create") == 64 && limit(.largeFile, "peak RSS, cairn extract") == 64)
        #expect(limit(.smallFiles, "peak RSS, cairn create") == 80 && limit(.smallFiles, "peak RSS, cairn extract") == 80)
        let speed = issue9.first { $0.kind == .randomData }
        #expect(speed?.target.limit == 0.9 && speed?.target.comparison == .atLeast)
        #expect(issue9.count == 6 + 4 + 4 + 1)
        #expect(TargetSpec.target(for: .wall(ToolName.cairnLZ4, "create", ToolName.tarLZ4, "create"), on: .tree) == nil, "no time target on trees")
    }

    @Test("peak RSS targets take MiB per round; the verdict is about the median")
    func peakRSS() throws {
        let result = Self.smallFiles(
            cairnWalls: [1, 1, 1, 1, 1], tarWalls: [2, 2, 2, 2, 2], createRSS: [70, 120, 75, 79, 90], extractRSS: [81, 82, 60, 85, 83])
        let rows = VerdictRow.rows(for: [result], runs: 5).filter { $0.caseTitle != nil }
        let create = try #require(rows.first { $0.spec.title == "peak RSS, cairn create" })
        #expect(create.values == [70, 120, 75, 79, 90])
        #expect(create.spread?.median == 79 && create.verdict == .pass, "median 79 ≤ 80 although two rounds are over")
        let extract = try #require(rows.first { $0.spec.title == "peak RSS, cairn extract" })
        #expect(extract.spread?.median == 82 && extract.verdict == .fail)
        let time = try #require(rows.first { $0.spec.title == "create wall time vs tar | lz4" })
        #expect(time.spread?.median == 0.5 && time.verdict == .pass, "0.5 ≤ 0.6 on the small files")
        let size = try #require(rows.first { $0.spec.title == "archive size, cairn lz4 vs tar | lz4" })
        #expect(abs((size.spread?.median ?? 0) - 207.0 / 108) < 1e-12 && size.verdict == .fail)
    }

    @Test("incompressible data: the speed is --compression none's wall time over lz4's, at least 0.9")
    func incompressible() throws {
        // none / lz4 per round: 0.9, 0.8, 1.0, 0.95, 0.5 → median 0.9, which meets ≥ 0.9.
        let result = Self.randomData(lz4: [10, 10, 10, 10, 10], none: [9, 8, 10, 9.5, 5])
        let row = try #require(VerdictRow.rows(for: [result], runs: 5).first { $0.spec.kind == .randomData && $0.caseTitle != nil })
        #expect(row.values.map { ($0 * 100).rounded() / 100 } == [0.9, 0.8, 1.0, 0.95, 0.5])
        #expect(row.verdict == .pass)
        let slow = Self.randomData(lz4: [10, 10, 10, 10, 10], none: [8, 8, 9, 8, 10])
        #expect(VerdictRow.rows(for: [slow], runs: 5).first { $0.spec.kind == .randomData }?.verdict == .fail)
    }

    @Test("a target without a case of its kind, or without its peer, is 'not measured' with the reason")
    func notMeasured() throws {
        var result = Self.smallFiles(cairnWalls: [1, 1, 1], tarWalls: [2, 2, 2], createRSS: [50, 50, 50], extractRSS: [50, 50, 50])
        result.operations.removeAll { $0.tool == ToolName.tarZstd }
        let rows = VerdictRow.rows(for: [result], runs: 3)
        let large = rows.filter { $0.spec.kind == .largeFile }
        #expect(large.count == 2 && large.allSatisfy { $0.verdict == .notMeasured("the 4 GiB file case is opt-in: add --large-file") })
        #expect(rows.contains { $0.spec.kind == .tree && $0.verdict.text.hasPrefix("not measured: no tree case") })
        #expect(rows.contains { $0.spec.kind == .corpus && $0.caseTitle == nil })
        let zstd = try #require(rows.first { $0.caseTitle != nil && $0.spec.title.hasPrefix("archive size, cairn zstd:3") })
        #expect(zstd.verdict == .notMeasured("tar | zstd -T0 -3 create did not run on this case"))
        let rss = try #require(rows.first { $0.caseTitle != nil && $0.spec.title == "peak RSS, cairn create" })
        #expect(rss.verdict == .indicative(met: true, rounds: 3, needed: 5), "3 rounds: shown, does not count")
        #expect(!rows.contains { $0.spec.target.source == TargetSpec.issue3 }, "issue 3's targets are not issue 9's table")
    }

    @Test("the verdict table is the report's last section, in Markdown and in the JSON")
    func tableInReport() throws {
        let report = Fixture.report(
            runs: 5,
            cases: [
                Fixture.caseResult(cairnCreate: [1, 1, 1, 1, 1], tarCreate: [2, 2, 2, 2, 2]),
                Self.smallFiles(
                    cairnWalls: [1, 1, 1, 1, 1], tarWalls: [1, 1, 1, 1, 1], createRSS: [100, 100, 100, 100, 100],
                    extractRSS: [50, 50, 50, 50, 50]),
                Self.randomData(lz4: [1, 1, 1, 1, 1], none: [1, 1, 1, 1, 1]),
            ])
        let text = report.markdown()
        let heading = try #require(text.range(of: "## Issue 9 targets: verdicts"))
        #expect(!text[heading.upperBound...].contains("\n## "), "nothing after the verdict table")
        let lines = text.split(separator: "\n")
        #expect(lines.contains { $0 == "| fixture corpus | create wall time vs tar \\| lz4 | 0.50 × | 0.50–0.50 | 5 | ≤ 0.45 × | FAIL |" })
        #expect(lines.contains { $0 == "| fixture small-files | peak RSS, cairn create | 100 MiB | 100–100 | 5 | ≤ 80 MiB | FAIL |" })
        #expect(lines.contains { $0 == "| fixture small-files | peak RSS, cairn extract | 50 MiB | 50–50 | 5 | ≤ 80 MiB | PASS |" })
        #expect(lines.contains { $0 == "| fixture random-data | create speed, lz4 vs --compression none | 1.00 × | 1.00–1.00 | 5 | ≥ 0.90 × | PASS |" })
        #expect(lines.contains { $0.hasPrefix("| large-file | peak RSS, cairn create | – | – | 0 | ≤ 64 MiB | not measured: ") })
        #expect(lines.contains { $0.hasPrefix("Issue 9 targets: ") && $0.contains(" pass, ") && $0.contains(" fail, ") && $0.contains(" not-measured.") })
        let json = report.json()
        let verdicts = try #require(json["verdicts"] as? [[String: Any]])
        #expect(verdicts.count == VerdictRow.rows(for: report.cases, runs: 5).count)
        let rss = try #require(verdicts.first { $0["target"] as? String == "peak RSS, cairn create" && $0["caseKind"] as? String == "small-files" })
        #expect(rss["status"] as? String == "fail" && rss["limit"] as? Double == 80 && rss["unit"] as? String == "MiB")
        #expect((rss["measured"] as? [String: Any])?["median"] as? Double == 100)
    }
}
