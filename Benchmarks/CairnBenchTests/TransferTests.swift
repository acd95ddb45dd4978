import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import cairn_bench

@Suite("The transfer case (issue 10)")
struct TransferTests {
    @Test("--only transfer selects the transfer case alone; no other selection includes it; --transfer-mib sets its size")
    func options() throws {
        let defaults = try BenchOptions([])
        #expect(!defaults.runsTransfer && defaults.transferMiB == 512)
        #expect(!(try BenchOptions(["--only", "end-to-end"])).runsTransfer)
        #expect(!(try BenchOptions(["--only", "stages"])).runsTransfer)
        let transfer = try BenchOptions(["--only", "transfer", "--transfer-mib", "8"])
        #expect(transfer.runsTransfer && !transfer.runsEndToEnd && !transfer.runsStages && transfer.transferMiB == 8)
        #expect(throws: BenchOptions.UsageError.self) { try BenchOptions(["--transfer-mib", "0"]) }
    }

    @Test("the small change appends 64 KiB to a text file, changes 3 × 16 bytes of the largest file, adds a 1 MiB file")
    func smallChange() throws {
        let directory = try TemporaryDirectory(prefix: "cairn-bench-change")
        defer { directory.remove() }
        let root = directory.appending("tree")
        try FileManager.default.createDirectory(atPath: "\(root)/b", withIntermediateDirectories: true)
        try SmallChange.writeText(to: "\(root)/b/notes.md", bytes: 1000, seed: 1)
        var generator = SeededGenerator(seed: 3)
        let big = generator.bytes(200_000)
        #expect(FileManager.default.createFile(atPath: "\(root)/a.bin", contents: Data(big)))
        let applied = try SmallChange.apply(to: root, seed: 1)
        #expect(applied == SmallChange.Applied(
            appendedTo: "b/notes.md", overwrittenIn: "a.bin", overwrittenAt: [50_000, 100_000, 150_000], added: SmallChange.addedPath))
        #expect(TreeTally.size(of: "\(root)/b/notes.md") == 1000 + 65_536)
        let changed = Array(try #require(FileManager.default.contents(atPath: "\(root)/a.bin")))
        let differing = big.indices.filter { $0 < changed.count && big[$0] != changed[$0] }
        #expect(differing.count == 48 && changed.count == big.count)
        #expect(Set(differing.map { $0 / 50_000 }) == [1, 2, 3])
        #expect(TreeTally.size(of: "\(root)/\(SmallChange.addedPath)") == 1 << 20)
    }

    @Test("a tiny run against nginx reports every measurement side by side and issue 10's verdicts, indicative from 1 round")
    func tinyRun() throws {
        guard FileManager.default.isExecutableFile(atPath: NginxServer.executable) else {
            Issue.record("nginx is not installed at \(NginxServer.executable): install nginx-light (make deps)")
            return
        }
        let directory = try TemporaryDirectory(prefix: "cairn-bench-transfer")
        defer { directory.remove() }
        let out = directory.appending("out")
        let run = try ChildProcess.run(
            try HarnessProcessTests.harness(),
            ["--only", "transfer", "--transfer-mib", "2", "--runs", "1", "--pause", "0", "--work", directory.appending("work"), "--out", out])
        #expect(run.status == 0, "\(run.stderr.suffix(2000))")
        let text = run.stdout
        let section = try #require(text.range(of: "## Transfer (issue 10)"))
        let tail = text[section.upperBound...]
        for row in [
            "| full fetch | cairn fetch | ", "| full fetch | curl -o | ", "| full fetch | curl -o + sync | ", "| resume after a cut at 50% | cairn fetch | ",
            "| resume after a cut at 50% | curl -C - | ", "| resume after a cut at 90% | cairn fetch | ",
            "| resume after a cut at 90% | curl -C - | ", "| seeded delta | cairn fetch --seed old.cairn | ",
            "| seeded delta | zsync -i old.cairn | ", "| remote extract of one file | cairn extract URL | ",
            "| remote extract of a file and 3 copies | cairn extract URL | ", "| remote extract --resume after a cut at 10% | cairn extract URL | ",
        ] {
            #expect(tail.contains(row), "\(row)")
        }
        #expect(!tail.contains("failed:"), "\(tail)")
        #expect(!text.contains("## Case 1"), "the transfer case runs alone")
        let verdicts = try #require(tail.range(of: "### Issue 10 targets: verdicts"))
        let table = tail[verdicts.upperBound...]
        #expect(table.components(separatedBy: "(indicative: 1 round, needs 3)").count - 1 >= 5, "\(table)")
        #expect(table.contains("full fetch throughput, cairn (verifying) / curl"))
        let json = try #require(try FileManager.default.contentsOfDirectory(atPath: out).first { $0.hasSuffix(".json") })
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: "\(out)/\(json)"))) as? [String: Any])
        let transfer = try #require(object["transfer"] as? [String: Any])
        let operations = try #require(transfer["operations"] as? [[String: Any]])
        #expect(operations.count == 13, "the 12 of issue 10 and issue 23, and issue 25's encrypted seeded delta")
        let full = try #require(operations.first { $0["tool"] as? String == "curl -o" })
        let layout = try #require(transfer["layout"] as? [String: Any])
        let archive = try #require((layout["newArchiveBytes"] as? NSNumber)?.uint64Value)
        let sent = try #require((full["runs"] as? [[String: Any]])?.first?["bodyBytes"] as? NSNumber)
        #expect(sent.uint64Value == archive, "nginx counts curl's body bytes: the whole archive")
        #expect((transfer["verdicts"] as? [[String: Any]])?.count == 9)
        // Issue 23: the deduplicated extraction fetches each record once (no cut: the same bytes
        // however loaded the machine); the resumed one is measured (what its killed first run
        // was sent depends on how far the server got ahead of it, as for the fetch resumes).
        let verdictRows = transfer["verdicts"] as? [[String: Any]] ?? []
        func row(_ title: String) -> [String: Any]? { verdictRows.first { ($0["target"] as? String)?.hasPrefix(title) == true } }
        let copies = row("remote extract of a file and 3 copies: bytes")
        #expect((copies?["status"] as? String)?.hasSuffix("pass") == true, "\(String(describing: copies))")
        let resumed = row("remote extract --resume after a cut at 10%: bytes re-sent")
        #expect((resumed?["perRound"] as? [Double])?.count == 1, "\(String(describing: resumed))")
        func number(_ key: String) -> UInt64 { (layout[key] as? NSNumber)?.uint64Value ?? 0 }
        #expect(number("deltaYardstickBytes") > number("manifestAndFooterBytes") && number("deltaYardstickBytes") < archive)
        #expect(number("newChunkRecords") > 0, "the small change makes new chunks")
        #expect(number("commitCount") > 0 && number("resumeAllowanceBytes") == number("largestCommitIntervalBytes") + (1 << 20))
        #expect(number("extractStoredBytes") > 0 && number("extractYardstickBytes") < archive)
    }

    @Test("a cairn that takes the URL for a local path (or rejects it) makes the remote extract not measured; other failures do not")
    func urlSupport() {
        func result(_ status: Int32, _ stderr: String) -> ProcessResult {
            ProcessResult(
                exitStatus: status, wallSeconds: 0, userSeconds: 0, systemSeconds: 0, peakRSSBytes: 0, standardOutput: "", standardError: stderr)
        }
        #expect(TransferBenchmark.lacksURLSupport(result(1, "cairn: error: http://127.0.0.1:1/a.cairn: cannot open: No such file or directory")))
        #expect(TransferBenchmark.lacksURLSupport(result(2, "usage: cairn extract ARCHIVE")))
        #expect(!TransferBenchmark.lacksURLSupport(result(1, "cairn: error: http://127.0.0.1:1/a.cairn: the server answered 500")))
        #expect(!TransferBenchmark.lacksURLSupport(result(1, "cairn: error: http://127.0.0.1:1/a.cairn: the server answered 404 Not Found")))
    }
}
