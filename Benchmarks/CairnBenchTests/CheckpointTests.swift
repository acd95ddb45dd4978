import CairnTestSupport
import Foundation
import Testing

@testable import cairn_bench

@Suite("The checkpoint case (issue 23)")
struct CheckpointTests {
    @Test("--only checkpoint selects issue 23's checkpoint case alone; no other selection includes it; --checkpoint-mib sets its size")
    func checkpointOptions() throws {
        let defaults = try BenchOptions([])
        #expect(!defaults.runsCheckpoint && defaults.checkpointMiB == 270)
        #expect(!(try BenchOptions(["--only", "end-to-end"])).runsCheckpoint)
        let checkpoint = try BenchOptions(["--only", "checkpoint", "--checkpoint-mib", "4"])
        #expect(checkpoint.runsCheckpoint && !checkpoint.runsEndToEnd && !checkpoint.runsStages && checkpoint.checkpointMiB == 4)
        #expect(throws: BenchOptions.UsageError.self) { try BenchOptions(["--checkpoint-mib", "0"]) }
    }

    @Test("a 16 MiB run measures TRUNCATE and PASSIVE alone and during cairn create; the section names both")
    func tinyRun() throws {
        let directory = try TemporaryDirectory(prefix: "cairn-bench-checkpoint")
        defer { directory.remove() }
        let harness = try HarnessProcessTests.harness()
        let cairn = harness.deletingLastPathComponent().appendingPathComponent("cairn").path
        let rows = try CheckpointStallBenchmark(cairn: cairn, work: directory.appending("work"), mib: 16, runs: 1).run()
        #expect(rows.map(\.mode) == ["TRUNCATE", "PASSIVE"])
        for row in rows {
            #expect(row.walBytes > 16 << 20 && row.alone.count == 1 && row.duringExport.count == 1 && row.exportSeconds.count == 1)
            #expect(row.alone.allSatisfy { $0.code == 0 } && row.duringExport.allSatisfy { $0.code == 0 })
        }
        let report = Report(date: Date(), machine: .current(), command: "cairn-bench --only checkpoint", runs: 1)
        #expect(report.checkpointSection(rows).contains { $0.hasPrefix("| TRUNCATE | ") })
    }
}
