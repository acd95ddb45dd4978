import Foundation
import Testing

@testable import cairn_bench

@Suite("The shaped-link case (issue 26)")
struct LinkTests {
    @Test("--only links selects the link case alone; no other selection includes it; --link-mib sets its size (default 256)")
    func options() throws {
        let defaults = try BenchOptions([])
        #expect(!defaults.runsLinks && defaults.linkMiB == 256)
        #expect(!(try BenchOptions(["--only", "upload"])).runsLinks)
        let links = try BenchOptions(["--only", "links", "--link-mib", "8"])
        #expect(links.runsLinks && !links.runsUpload && !links.runsTransfer && !links.runsEndToEnd && !links.runsStages && links.linkMiB == 8)
        #expect(throws: BenchOptions.UsageError.self) { try BenchOptions(["--link-mib", "0"]) }
    }

    static func run(wall: Double, rssMiB: UInt64 = 40) -> ProcessResult {
        ProcessResult(
            exitStatus: 0, wallSeconds: wall, userSeconds: wall / 4, systemSeconds: 0, peakRSSBytes: rssMiB << 20, standardOutput: "",
            standardError: "")
    }

    static func operation(_ tool: String, _ measure: LinkMeasure, walls: [Double], rssMiB: UInt64 = 40) -> LinkOperation {
        var op = LinkOperation(tool: tool, measure: measure, arguments: ["ip", "netns", "exec", "ns", tool], payloadBytes: 100_000_000)
        op.runs = walls.map { run(wall: $0, rssMiB: rssMiB) }
        return op
    }

    @Test("verdicts come from median MB/s: fetch against aria2c and one connection, upload against rclone, the fetch's peak RSS")
    func verdicts() {
        var result = LinkResult(corpus: Fixture.benchCase(), runs: 3, archiveBytes: 100_000_000, link: "test")
        result.operations = [
            Self.operation(LinkTool.cairnFetch, .fetch, walls: [2, 2.2, 9]),
            Self.operation(LinkTool.aria2, .fetch, walls: [2, 2, 2]),
            Self.operation(LinkTool.cairnFetchOne, .fetch, walls: [8, 8, 8]),
            Self.operation(LinkTool.cairnUpload, .upload, walls: [4, 4, 4]),
            Self.operation(LinkTool.rclone, .upload, walls: [3, 3, 3]),
        ]
        let verdicts = result.verdicts
        #expect(verdicts.map(\.met) == [true, true, false, true], "\(verdicts)")
        // 100 MB in the median 2.2 s: 45.45 MB/s against 50 (aria2c) and 12.5 (one connection).
        #expect(verdicts[0].measured.hasPrefix("0.91x"), "\(verdicts[0])")
        #expect(verdicts[1].measured.hasPrefix("3.64x"), "\(verdicts[1])")
        // Upload: 25 MB/s against rclone's 33.3.
        #expect(verdicts[2].measured.hasPrefix("0.75x"), "\(verdicts[2])")
        result.operations.removeAll { $0.tool == LinkTool.rclone }
        #expect(result.verdicts[2].met == nil)
        let report = Report(date: Date(), machine: .current(), command: "cairn-bench --only links", runs: 3)
        let lines = report.linkSection(result).joined(separator: "\n")
        #expect(lines.contains("| fetch >= 0.9x aria2c -x4 -s4 | 0.91x"))
        #expect(lines.contains("not measured"))
    }
}
