import CairnTestSupport
import Foundation
import Testing

@testable import cairn_bench

@Suite("The object-storage case (issue 12)")
struct UploadTests {
    @Test("--only upload selects the upload case alone; no other selection includes it; --upload-mib sets its size")
    func options() throws {
        let defaults = try BenchOptions([])
        #expect(!defaults.runsUpload && defaults.uploadMiB == 512 && defaults.runs == 3)
        #expect(!(try BenchOptions(["--only", "transfer"])).runsUpload)
        #expect(!(try BenchOptions(["--only", "end-to-end"])).runsUpload)
        let upload = try BenchOptions(["--only", "upload", "--upload-mib", "8"])
        #expect(upload.runsUpload && !upload.runsTransfer && !upload.runsEndToEnd && !upload.runsStages && upload.uploadMiB == 8)
        #expect(throws: BenchOptions.UsageError.self) { try BenchOptions(["--upload-mib", "0"]) }
    }

    @Test("the two-step upload adds up wall and CPU, takes the larger peak RSS and the first failure")
    func combined() {
        let a = ProcessResult(
            exitStatus: 0, wallSeconds: 2, userSeconds: 1, systemSeconds: 0.5, peakRSSBytes: 50 << 20, standardOutput: "", standardError: "")
        var b = a
        b.wallSeconds = 3
        b.peakRSSBytes = 80 << 20
        let both = UploadBenchmark.combined([a, b])
        #expect(both.wallSeconds == 5 && both.cpuSeconds == 3 && both.peakRSSBytes == 80 << 20 && both.succeeded)
        b.exitStatus = 7
        #expect(UploadBenchmark.combined([a, b]).exitStatus == 7)
    }

    @Test("the remote extract takes the file nearest 10 MiB, or an eighth of a small tree")
    func extractFile() throws {
        let directory = try TemporaryDirectory(prefix: "cairn-bench-upload-pick")
        defer { directory.remove() }
        let root = directory.appending("tree")
        try SmallChange.writeText(to: "\(root)/a/small.txt", bytes: 1000, seed: 1)
        try SmallChange.writeText(to: "\(root)/b/mid.txt", bytes: 20_000, seed: 2)
        try SmallChange.writeText(to: "\(root)/c/large.txt", bytes: 140_000, seed: 3)
        let picked = try UploadBenchmark.extractFile(in: root)
        #expect(picked.path == "b/mid.txt" && picked.bytes == 20_000)
    }

    @Test("a tiny run against rclone serve s3 reports every step side by side, byte counts from the proxy and the verdict rows")
    func tinyRun() throws {
        let directory = try TemporaryDirectory(prefix: "cairn-bench-upload")
        defer { directory.remove() }
        let out = directory.appending("out")
        // 24 MiB: an archive of two cairn parts (8 MiB each at least), so the kill at 50% lands
        // between them.
        let run = try ChildProcess.run(
            try HarnessProcessTests.harness(),
            ["--only", "upload", "--upload-mib", "24", "--runs", "1", "--pause", "0", "--work", directory.appending("work"), "--out", out])
        #expect(run.status == 0, "\(run.stderr.suffix(2000))")
        let text = run.stdout
        let section = try #require(text.range(of: "## Object storage (issue 12)"))
        let tail = text[section.upperBound...]
        for row in [
            "| upload | cairn create -o s3:// | ", "| upload | cairn create -o FILE + rclone copyto | ",
            "| resume after a kill at 50% | cairn create --resume -o s3:// | ", "| resume after a kill at 50% | rclone copyto (rerun) | ",
            "| remote extract of one file | cairn extract s3:// | ", "| remote extract of one file | rclone copyto + cairn extract FILE | ",
        ] {
            #expect(tail.contains(row), "\(row)")
        }
        #expect(!tail.contains("failed:"), "\(tail)")
        #expect(!text.contains("## Case 1") && !text.contains("## Transfer"), "the upload case runs alone")
        let verdicts = try #require(tail.range(of: "### Issue 12 design limits: verdicts"))
        #expect(tail[verdicts.upperBound...].components(separatedBy: "(indicative: 1 round, needs 3)").count - 1 == 3, "\(tail)")

        let json = try #require(try FileManager.default.contentsOfDirectory(atPath: out).first { $0.hasSuffix(".json") })
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: "\(out)/\(json)"))) as? [String: Any])
        let upload = try #require(object["upload"] as? [String: Any])
        let archive = try #require((upload["archiveBytes"] as? NSNumber)?.uint64Value)
        let operations = try #require(upload["operations"] as? [[String: Any]])
        #expect(operations.count == 6)
        func firstRun(_ tool: String, _ measure: String) throws -> [String: Any] {
            let op = try #require(operations.first { $0["tool"] as? String == tool && $0["measure"] as? String == measure })
            return try #require((op["runs"] as? [[String: Any]])?.first)
        }
        func number(_ run: [String: Any], _ key: String) -> UInt64 { (run[key] as? NSNumber)?.uint64Value ?? 0 }
        #expect(number(try firstRun("cairn create -o s3://", "upload"), "uploadedBytes") == archive)
        #expect((try firstRun("cairn create -o FILE + rclone copyto", "upload")["steps"] as? [Any])?.count == 2)
        let resumed = try firstRun("cairn create --resume -o s3://", "resume after a kill at 50%")
        #expect(number(resumed, "keptBytes") > 0 && number(resumed, "keptBytes") + number(resumed, "uploadedBytes") == archive)
        #expect(number(resumed, "proxyBytes") >= archive && number(resumed, "partSize") == 8 << 20)
        let rerun = try firstRun("rclone copyto (rerun)", "resume after a kill at 50%")
        #expect(number(rerun, "proxyBytes") >= archive + number(rerun, "firstRunBytes"), "rclone sends the whole archive again")
        let remote = number(try firstRun("cairn extract s3://", "remote extract of one file"), "proxyBytes")
        let stored = try #require((upload["extractStoredBytes"] as? NSNumber)?.uint64Value)
        #expect(remote >= stored && remote < archive, "the proxy counts what the ranged GETs read")
        #expect(number(try firstRun("rclone copyto + cairn extract FILE", "remote extract of one file"), "proxyBytes") == archive)
        #expect((upload["verdicts"] as? [[String: Any]])?.count == 3)
    }
}
