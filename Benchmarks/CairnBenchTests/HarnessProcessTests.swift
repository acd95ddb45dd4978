import CairnTestSupport
import Foundation
import Testing

@Suite("cairn-bench as a process")
struct HarnessProcessTests {
    /// `cairn-bench`, built beside the test bundle (this target depends on it and on `cairn`).
    static func harness() throws -> URL {
        let candidates = [
            Bundle.main.bundleURL.appendingPathComponent("cairn-bench"),
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("cairn-bench"),
        ]
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
            throw HarnessNotFound(description: "cairn-bench not found at \(candidates.map(\.path))")
        }
        return found
    }

    struct HarnessNotFound: Error, CustomStringConvertible { var description: String }

    @Test("a tiny run writes .md, .json and .svg into --out, says its verdicts are indicative from 1 run, and a second run keeps the first")
    func tinyRun() throws {
        let directory = try TemporaryDirectory(prefix: "cairn-bench-run")
        defer { directory.remove() }
        let out = directory.appending("out")
        let arguments = [
            "--only", "end-to-end", "--size-mib", "1", "--small-files", "40", "--runs", "1", "--peers", "none", "--pause", "0",
            "--work", directory.appending("work"), "--out", out,
        ]
        let first = try ChildProcess.run(try Self.harness(), arguments)
        #expect(first.status == 0, "\(first.stderr.suffix(2000))")
        #expect(first.stdout.contains("(indicative: 1 round, needs 5)"))
        #expect(!first.stdout.contains("| PASS |") && !first.stdout.contains("| FAIL |"))
        #expect(first.stdout.contains("## Case 2: 40 small text files"))
        let second = try ChildProcess.run(try Self.harness(), arguments)
        #expect(second.status == 0, "\(second.stderr.suffix(2000))")
        let names = try FileManager.default.contentsOfDirectory(atPath: out).sorted()
        #expect(names.count == 6, "\(names)")
        #expect(names.filter { $0.hasSuffix(".svg") }.count == 2)
        #expect(names.allSatisfy { $0.hasPrefix("results-") && $0.contains("T") && $0.contains("Z") })
        #expect(!FileManager.default.fileExists(atPath: directory.appending("work/e2e")), "archives and trees removed")
    }

    @Test("a tiny run with the issue 9 cases ends with the verdict table: random data, the large file, the profile")
    func tinyTargetRun() throws {
        let directory = try TemporaryDirectory(prefix: "cairn-bench-targets")
        defer { directory.remove() }
        let out = directory.appending("out")
        let arguments = [
            "--only", "end-to-end", "--size-mib", "1", "--small-files", "30", "--random-mib", "2", "--large-file-mib", "3",
            "--profile", "--runs", "1", "--peers", "none", "--pause", "0", "--work", directory.appending("work"), "--out", out,
        ]
        let run = try ChildProcess.run(try Self.harness(), arguments)
        #expect(run.status == 0, "\(run.stderr.suffix(2000))")
        let text = run.stdout
        let table = try #require(text.range(of: "## Issue 9 targets: verdicts"))
        let tail = text[table.upperBound...]
        #expect(tail.contains("| 2 MiB of random data | create speed, lz4 vs --compression none |"))
        #expect(tail.contains("| one 3 MiB file of mixed content | peak RSS, cairn create |"))
        #expect(tail.contains("| one 3 MiB file of mixed content | peak RSS, cairn extract |"))
        #expect(tail.contains("archive size, cairn lz4 vs tar \\| lz4 | – | – | 0 | ≤ 1.00 × | not measured: tar \\| lz4 -1 create did not run"))
        #expect(text.contains("## Where the CPU seconds go (perf)"))
        #expect(text.contains("### Case 2: cairn (lz4) create") && text.contains("### Case 2: cairn (lz4) extract"))
        let json = try #require(try FileManager.default.contentsOfDirectory(atPath: out).first { $0.hasSuffix(".json") })
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: "\(out)/\(json)"))) as? [String: Any])
        #expect((object["verdicts"] as? [[String: Any]])?.isEmpty == false)
        let cases = try #require(object["cases"] as? [[String: Any]])
        #expect(cases.map { $0["kind"] as? String } == ["corpus", "small-files", "random-data", "large-file"])
        #expect((cases[1]["profiles"] as? [[String: Any]])?.count == 2)
    }
}
