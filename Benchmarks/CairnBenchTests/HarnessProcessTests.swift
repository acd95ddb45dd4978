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

    @Test("a tiny run writes .md, .json and .svg into --out, says no verdict from 1 run, and a second run keeps the first")
    func tinyRun() throws {
        let directory = try TemporaryDirectory(prefix: "cairn-bench-run")
        defer { directory.remove() }
        let out = directory.appending("out")
        let arguments = [
            "--only", "end-to-end", "--size-mib", "1", "--small-files", "40", "--runs", "1", "--peers", "none", "--pause", "0",
            "--work", directory.appending("work"), "--out", out,
        ]
        let first = try ChildProcess.run(try Self.harness(), arguments, timeout: 240)
        #expect(first.status == 0, "\(first.stderr.suffix(2000))")
        #expect(first.stdout.contains("no verdict (fewer than 3 runs)"))
        #expect(!first.stdout.contains("within target") && !first.stdout.contains("over target"))
        #expect(first.stdout.contains("## Case 2: 40 small text files"))
        let second = try ChildProcess.run(try Self.harness(), arguments, timeout: 240)
        #expect(second.status == 0, "\(second.stderr.suffix(2000))")
        let names = try FileManager.default.contentsOfDirectory(atPath: out).sorted()
        #expect(names.count == 6, "\(names)")
        #expect(names.filter { $0.hasSuffix(".svg") }.count == 2)
        #expect(names.allSatisfy { $0.hasPrefix("results-") && $0.contains("T") && $0.contains("Z") })
        #expect(!FileManager.default.fileExists(atPath: directory.appending("work/e2e")), "archives and trees removed")
    }
}
