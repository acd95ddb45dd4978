import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import cairn_bench

@Suite("Benchmark cases and options")
struct CasesTests {
    @Test("options: 3 runs by default, --tree repeatable, --peers chooses, unknown peers refused")
    func options() throws {
        let defaults = try BenchOptions([])
        #expect(defaults.runs == 3 && defaults.sizeMiB == 1024 && defaults.smallFiles == 100_000 && defaults.peers == nil)
        let given = try BenchOptions(["--tree", "/a", "--tree=/b", "--peers", "borg,tar-lz4", "--small-files", "0", "--pause", "0"])
        #expect(given.trees == ["/a", "/b"])
        #expect(given.peers == [.tarLZ4, .borg], "in the report's order")
        #expect(given.smallFiles == 0 && given.pauseSeconds == 0)
        #expect(try BenchOptions(["--peers", "none"]).peers == [])
        let realtime = try BenchOptions(["--realtime"])
        #expect(!defaults.realtime && realtime.realtime)
        // A switch given a value is refused, not taken as on (`--realtime=0` once started a full run).
        for option in ["--realtime=0", "--keep=no", "--targets=1", "--profile=", "--large-file=1"] {
            #expect(throws: BenchOptions.UsageError.self, "\(option)") { try BenchOptions([option]) }
        }
        // The test process is time-shared, and the report says so.
        #expect(Scheduling.description.hasPrefix("time sharing"))
        #expect(throws: BenchOptions.UsageError.self) { try BenchOptions(["--peers", "zip"]) }
        #expect(throws: BenchOptions.UsageError.self) { try BenchOptions(["--runs", "0"]) }
        #expect(Peer.forCase(.corpus, chosen: nil, targets: false) == Peer.allCases)
        #expect(Peer.forCase(.smallFiles, chosen: nil, targets: false) == [.tarLZ4, .tarZstd])
        #expect(Peer.forCase(.tree, chosen: nil, targets: false) == [.tarLZ4, .tarZstd])
    }

    @Test("the small-files case: seeded, deterministic, 200–3000 bytes of text per file, 1,000 to a directory")
    func smallFiles() throws {
        let directory = try TemporaryDirectory(prefix: "cairn-bench-small")
        defer { directory.remove() }
        try SmallFiles(count: 1100, seed: 7).generate(at: directory.appending("a"))
        try SmallFiles(count: 1100, seed: 7).generate(at: directory.appending("b"))
        try SmallFiles(count: 100, seed: 8).generate(at: directory.appending("c"))
        let tally = TreeTally.walk(directory.appending("a"))
        #expect(tally.files == 1100 && tally.directories == 2)
        var sizes: [Int] = []
        var same = true
        var differs = false
        TreeTally.visitFiles(directory.appending("a")) { path in
            let a = FileManager.default.contents(atPath: path) ?? Data()
            sizes.append(a.count)
            let relative = String(path.dropFirst(directory.appending("a").count))
            if FileManager.default.contents(atPath: directory.appending("b") + relative) != a { same = false }
            if let c = FileManager.default.contents(atPath: directory.appending("c") + relative), c != a { differs = true }
            #expect(!a.contains(0), "text only")
        }
        #expect(same, "the same seed gives the same bytes")
        #expect(differs, "another seed gives other bytes")
        #expect(sizes.allSatisfy { (200...3000).contains($0) })
        let mean = Double(sizes.reduce(0, +)) / Double(sizes.count)
        #expect(abs(mean - 1600) < 100, "uniform 200–3000: 100,000 files make about 160 MB (mean \(mean))")
        var info = stat()
        #expect(lstat(directory.appending("a/d001/f001000.txt"), &info) == 0)
        #expect(info.st_mtim.tv_sec == 1_700_000_000 - 1000, "fixed mtimes")
    }

    @Test("every round extracts into a directory of its own and every create and extract is settled first")
    func freshExtractionDirectories() throws {
        let benchCase = Fixture.benchCase(.corpus)
        let e2e = EndToEnd(cairn: "/bin/true", work: "/tmp/unused", runs: 3, keep: false, pauseSeconds: 3, peerChoice: nil)
        let runner = ProcessRunner(logDirectory: "/tmp/unused")
        func extractDirectories(round: Int) -> [String: String] {
            var found: [String: String] = [:]
            for tool in e2e.tools(for: benchCase, in: "/w/case", peers: Peer.allCases, round: round, runner: runner) {
                for step in tool.steps where step.kind == .extract {
                    #expect(step.kind.settles)
                    found[tool.name] = step.arguments.joined(separator: " ")
                }
            }
            return found
        }
        let one = extractDirectories(round: 1)
        let two = extractDirectories(round: 2)
        #expect(
            Set(one.keys) == [
                ToolName.cairnLZ4, ToolName.cairnZstd, ToolName.tarLZ4, ToolName.tarZstd, ToolName.casync, ToolName.borg, ToolName.restic,
                ToolName.cairnSigned, ToolName.cairnEncrypted, ToolName.tarLZ4Age,
            ])
        for (tool, command) in one {
            #expect(command.contains("/out-1"), "\(tool): \(command)")
            #expect(two[tool]?.contains("/out-2") == true, "\(tool): \(two[tool] ?? "")")
        }
        #expect(OperationResult.Kind.create.settles && !OperationResult.Kind.list.settles)
    }

    @Test("cairn runs with lz4 and with zstd:3 on every case; the resume steps only on the corpus")
    func cairnTools() {
        let e2e = EndToEnd(cairn: "/bin/cairn", work: "/tmp/unused", runs: 3, keep: false, pauseSeconds: 0, peerChoice: nil)
        let runner = ProcessRunner(logDirectory: "/tmp/unused")
        for kind in [BenchCase.Kind.corpus, .smallFiles, .tree] {
            let tools = e2e.tools(for: Fixture.benchCase(kind), in: "/w", peers: [], round: 1, runner: runner)
            let zstd = tools.first { $0.name == ToolName.cairnZstd }
            #expect(zstd?.steps.first?.arguments.contains("zstd:3") == true)
            let lz4 = tools.first { $0.name == ToolName.cairnLZ4 }
            #expect(lz4?.steps.contains { $0.kind == .resume } == (kind == .corpus))
            #expect(!tools.contains { $0.name == ToolName.tarLZ4 }, "no peers asked for")
        }
    }
}
