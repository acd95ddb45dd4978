import CairnTestSupport
import Foundation
import Glibc
import Testing

import Cairn

/// The effect of command-line options the library implements (`Spec/0003-command-line.md §4`,
/// §2.1): `--strip-components`, `--overwrite` / `--keep-old-files` / `--skip-old-files`, `-v`
/// (`ExtractionOptions`), and the progress total past a too-small estimate (`ByteProgress`).
@Suite("Command line option effects")
struct CommandLineOptionEffectTests {
    @Test("past a total that was too small the bar ends at 100% of the real size, never above it")
    func progressPastTotal() throws {
        let work = try BehaviourFixture.work("progress-past")
        defer { work.remove() }
        try BehaviourFixture.tree().materialize(at: work.appending("tree"))
        let result = try BehaviourCLI.run(
            ["create", "-q", "--progress", "--size-estimate", "1", "-o", work.appending("p.cairn"), "tree"], in: work.path)
        #expect(result.status == 0, "\(result.stderr)")
        let bar = BehaviourFixture.lastBar(result.stderr, label: "create")
        #expect(!bar.isEmpty, "\(result.stderr)")
        // The estimate (1 byte) grew ahead of the content (ByteProgress) and the last frame
        // shows the real total.
        #expect(bar.contains("100%") && bar.contains("MB/s") && !bar.contains("/ 1 B"), "\(bar)")
    }

    @Test("extract --strip-components 1 drops the top-level directory")
    func stripComponents() throws {
        let work = try BehaviourFixture.work("strip")
        defer { work.remove() }
        let archive = try BehaviourFixture.archive(in: work)
        let destination = work.appending("out")
        let result = try BehaviourCLI.run(["extract", "-q", "--strip-components", "1", archive, "-C", destination])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try RawFileSystem.contents(ofFile: Array((destination + "/docs/a.txt").utf8)) == Array("hello, cairn\n".utf8))
        #expect(!RawFileSystem.exists(Array((destination + "/tree").utf8)))
    }

    @Test("--overwrite replaces an existing file; --skip-old-files keeps it; --keep-old-files keeps it and fails")
    func existingFiles() throws {
        let work = try BehaviourFixture.work("existing")
        defer { work.remove() }
        let archive = try BehaviourFixture.archive(in: work)
        let old = Array("old\n".utf8)
        let new = Array("hello, cairn\n".utf8)
        for (flag, status, kept) in [("--overwrite", Int32(0), false), ("--skip-old-files", 0, true), ("--keep-old-files", 1, true)] {
            let destination = work.appending("dest\(flag)")
            try FileManager.default.createDirectory(atPath: destination + "/tree/docs", withIntermediateDirectories: true)
            let existing = Array((destination + "/tree/docs/a.txt").utf8)
            try RawFileSystem.writeFile(existing, old)
            let result = try BehaviourCLI.run(["extract", "-q", flag, archive, "-C", destination])
            #expect(result.status == status, "\(flag): \(result.stderr)")
            #expect(try RawFileSystem.contents(ofFile: existing) == (kept ? old : new), "\(flag)")
            #expect(
                try RawFileSystem.contents(ofFile: Array((destination + "/tree/notes.txt").utf8)).count == 5000,
                "\(flag): the other entries are extracted")
        }
    }

    @Test("extract -v prints each entry's path on standard error")
    func verbose() throws {
        let work = try BehaviourFixture.work("verbose")
        defer { work.remove() }
        let archive = try BehaviourFixture.archive(in: work)
        let result = try BehaviourCLI.run(["extract", "-q", "-v", archive, "-C", work.appending("out")])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = Set(result.stderr.split(separator: "\n").map(String.init))
        for path in ["tree", "tree/docs", "tree/docs/a.txt", "tree/docs/b.bin", "tree/latest", "tree/notes.txt"] {
            #expect(lines.contains(path), "\(path) in \(result.stderr)")
        }
    }
}
