import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import cairn_bench

@Suite("Issue 9 target cases")
struct TargetCasesTests {
    @Test("--targets: 5 rounds, a 512 MiB random-data tree, no corpus extras; --runs and --random-mib override; --large-file is opt-in")
    func targetOptions() throws {
        let plain = try BenchOptions([])
        #expect(!plain.targets && plain.runs == 3 && plain.randomMiB == 0 && plain.largeFileMiB == nil && plain.corpusExtras && !plain.profile)
        let targets = try BenchOptions(["--targets"])
        #expect(targets.runs == 5 && targets.randomMiB == 512 && !targets.corpusExtras && targets.largeFileMiB == nil)
        let small = try BenchOptions(["--targets", "--runs", "2", "--random-mib", "64", "--profile"])
        #expect(small.runs == 2 && small.randomMiB == 64 && small.profile)
        #expect(try BenchOptions(["--large-file"]).largeFileMiB == 4096)
        #expect(try BenchOptions(["--large-file-mib", "8"]).largeFileMiB == 8, "a size implies the case")
        #expect(try BenchOptions(["--large-file-mib=8", "--large-file"]).largeFileMiB == 8, "--large-file keeps a given size")
        #expect(throws: BenchOptions.UsageError.self) { try BenchOptions(["--large-file-mib", "0"]) }
        #expect(throws: BenchOptions.UsageError.self) { try BenchOptions(["--random-mib", "-1"]) }
    }

    @Test("peers: tar-lz4 and tar-zstd everywhere with --targets, none on the random-data and large-file cases")
    func targetPeers() {
        #expect(Peer.forCase(.corpus, chosen: nil, targets: true) == [.tarLZ4, .tarZstd])
        #expect(Peer.forCase(.tree, chosen: nil, targets: true) == [.tarLZ4, .tarZstd])
        #expect(Peer.forCase(.randomData, chosen: nil, targets: true) == [])
        #expect(Peer.forCase(.largeFile, chosen: [.borg], targets: false) == [])
        #expect(Peer.forCase(.corpus, chosen: [.borg], targets: true) == [.borg], "--peers wins")
    }

    @Test("trees nobody here wrote: man and python3, the Swift toolchain's in place of a missing one, a line for each skipped")
    func systemTrees() {
        let all = SystemTrees.choose { _ in true }
        #expect(all.paths == ["/usr/share/man", "/usr/lib/python3"] && all.notes.isEmpty)
        let noPython = SystemTrees.choose { $0 != "/usr/lib/python3" }
        #expect(noPython.paths == ["/usr/share/man", "/opt/swift/usr/lib/swift"])
        #expect(noPython.notes == ["/usr/lib/python3 is missing: benchmarking /opt/swift/usr/lib/swift in its place"])
        let onlySwift = SystemTrees.choose { $0 == "/opt/swift/usr/lib/swift" }
        #expect(onlySwift.paths == ["/opt/swift/usr/lib/swift"], "the fallback stands in once")
        #expect(onlySwift.notes.count == 2 && onlySwift.notes[1].hasSuffix("already stands in for another): skipped"))
        let none = SystemTrees.choose { _ in false }
        #expect(none.paths.isEmpty)
        #expect(none.notes.last?.hasPrefix("no tree nobody here wrote exists") == true)
    }

    @Test("random data: cairn lz4 against --compression none, create only; the large file: cairn lz4 create and extract; no extras with --targets")
    func targetTools() {
        var e2e = EndToEnd(cairn: "/bin/cairn", work: "/tmp/unused", runs: 5, keep: false, pauseSeconds: 0, peerChoice: nil)
        let runner = ProcessRunner(logDirectory: "/tmp/unused")
        func steps(_ kind: BenchCase.Kind) -> [String] {
            e2e.tools(for: Fixture.benchCase(kind), in: "/w", peers: [], round: 1, runner: runner).flatMap { tool in
                tool.steps.map { "\(tool.name) \($0.operation)" }
            }
        }
        #expect(steps(.randomData) == ["\(ToolName.cairnLZ4) create", "\(ToolName.cairnNone) create"])
        let none = e2e.tools(for: Fixture.benchCase(.randomData), in: "/w", peers: [], round: 1, runner: runner)[1]
        let arguments = none.steps[0].arguments
        #expect(arguments.firstIndex(of: "--compression").map { arguments[$0 + 1] } == "none")
        #expect(steps(.largeFile) == ["\(ToolName.cairnLZ4) create", "\(ToolName.cairnLZ4) extract"])
        #expect(steps(.corpus).contains("\(ToolName.cairnLZ4) create --resume (cut at 90%)"))
        e2e.corpusExtras = false
        #expect(
            steps(.corpus) == [
                "\(ToolName.read) read tree", "\(ToolName.cairnLZ4) create", "\(ToolName.cairnLZ4) extract", "\(ToolName.cairnZstd) create",
                "\(ToolName.cairnZstd) extract",
            ])
    }

    @Test("the large-file case is refused when the disk lacks room, before anything is generated")
    func largeFileSpace() throws {
        #expect(LargeFile.bytesNeeded(fileBytes: 4 << 30, alreadyGenerated: true) == (4 << 30) * 2 + (4 << 30) / 64 + (1 << 30))
        #expect(LargeFile.bytesNeeded(fileBytes: 4 << 30, alreadyGenerated: false) == (4 << 30) * 3 + (4 << 30) / 64 + (1 << 30))
        let directory = try TemporaryDirectory(prefix: "cairn-bench-space")
        defer { directory.remove() }
        try LargeFile.checkFreeSpace(in: directory.path, fileBytes: 1 << 20, alreadyGenerated: false)
        #expect {
            try LargeFile.checkFreeSpace(in: directory.path, fileBytes: 1 << 60, alreadyGenerated: false)
        } throws: { error in
            "\(error)".hasPrefix("refusing the large-file case: it needs ") && "\(error)".contains(directory.path)
        }
        var options = try BenchOptions(["--large-file", "--work", directory.appending("work")])
        options.largeFileMiB = 1 << 30  // 1 PiB
        var notes: [String] = []
        #expect(throws: BenchError.self) { try BenchCase.prepareAll(options: options, notes: &notes) }
        #expect(!FileManager.default.fileExists(atPath: directory.appending("work/corpus-1024MiB-seed1")), "refused before the corpus")
    }

    @Test("the large file: mixed content in 1 MiB blocks, deterministic, no two blocks equal")
    func largeFileContent() throws {
        let directory = try TemporaryDirectory(prefix: "cairn-bench-large")
        defer { directory.remove() }
        try LargeFile(mebibytes: 12, seed: 3).generate(at: directory.appending("a"))
        try LargeFile(mebibytes: 12, seed: 3).generate(at: directory.appending("b"))
        let a = try #require(FileManager.default.contents(atPath: directory.appending("a/data.bin")))
        #expect(a.count == 12 << 20)
        #expect(FileManager.default.contents(atPath: directory.appending("b/data.bin")) == a)
        let blocks = (0..<12).map { a.subdata(in: ($0 << 20)..<(($0 + 1) << 20)) }
        #expect(Set(blocks).count == 12)
        let textBlocks = blocks.filter { block in block.prefix(4096).allSatisfy { $0 == 0x0a || (0x20..<0x7f).contains($0) } }
        #expect(!textBlocks.isEmpty && textBlocks.count < 12, "some blocks are text, some are not")
    }

    @Test("the random-data tree adds up to its size, in 1–16 MiB files, the same for the same seed")
    func randomTree() throws {
        let directory = try TemporaryDirectory(prefix: "cairn-bench-random")
        defer { directory.remove() }
        try RandomTree(totalBytes: 20 << 20, seed: 5).generate(at: directory.appending("a"))
        try RandomTree(totalBytes: 20 << 20, seed: 5).generate(at: directory.appending("b"))
        let tally = TreeTally.walk(directory.appending("a"))
        #expect(tally.bytes == 20 << 20 && tally.files >= 2)
        var same = true
        TreeTally.visitFiles(directory.appending("a")) { path in
            let relative = String(path.dropFirst(directory.appending("a").count))
            if FileManager.default.contents(atPath: directory.appending("b") + relative) != FileManager.default.contents(atPath: path) { same = false }
        }
        #expect(same)
    }

    @Test("extracted trees of a case with many files stay until the case ends when they fit; the wait follows vm.dirty_expire_centisecs")
    func extractedTrees() throws {
        var many = Fixture.benchCase(.smallFiles, bytes: 160_000_000)
        many.fileCount = 100_000
        var fewFiles = Fixture.benchCase(.largeFile, bytes: 4 << 30)
        fewFiles.fileCount = 1
        let needed = ExtractedTrees.bytesNeeded(many, trees: 20)
        #expect(needed == 20 * (160_000_000 + 100_000 * 4096))
        #expect(ExtractedTrees.keepUntilCaseEnd(many, trees: 20, freeBytes: needed + (2 << 30)))
        #expect(!ExtractedTrees.keepUntilCaseEnd(many, trees: 20, freeBytes: needed + (2 << 30) - 1), "no room: removed as measured")
        #expect(!ExtractedTrees.keepUntilCaseEnd(fewFiles, trees: 5, freeBytes: 1 << 50), "one file: nothing to wait for")
        #expect(ExtractedTrees.recentlyDeletedSeconds(centisecs: "3000\n") == 36)
        #expect(ExtractedTrees.recentlyDeletedSeconds(centisecs: "500") == 11)
        #expect(ExtractedTrees.recentlyDeletedSeconds(centisecs: nil) == 36)

        let directory = try TemporaryDirectory(prefix: "cairn-bench-trees")
        defer { directory.remove() }
        let e2e = EndToEnd(cairn: "/bin/cairn", work: directory.path, runs: 5, keep: false, pauseSeconds: 0, peerChoice: nil)
        let runner = ProcessRunner(logDirectory: directory.path)
        for keepTrees in [true, false] {
            let tools = e2e.tools(
                for: many, in: directory.appending("case"), peers: [.tarLZ4], round: 1, runner: runner, keepExtractedTrees: keepTrees)
            for tool in tools {
                for step in tool.steps where step.kind == .extract {
                    let out = "\(directory.appending("case"))/\(dirName(tool.name))/out-1"
                    try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
                    step.cleanUp()
                    #expect(FileManager.default.fileExists(atPath: out) == keepTrees, "\(tool.name), keep \(keepTrees)")
                    try? FileManager.default.removeItem(atPath: out)
                }
            }
        }
    }
}
