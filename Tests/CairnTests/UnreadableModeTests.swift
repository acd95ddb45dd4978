import CairnTestSupport
import Foundation
import Glibc
import Testing

/// A file whose mode denies its owner reading (0000, 0200) whose content a later file repeats:
/// the pass that reads the archive front to back serves the repeat by reading the chunk back
/// from the first file (`Spec/0001-container-format.md §13.4`), so that file keeps a readable
/// mode until the end. Extracted by a user other than root, who cannot read such a file.
@Suite("Unreadable modes")
struct UnreadableModeTests {
    @Test(
        "§13.4: as a user, a repeated chunk is read back from a file of mode 0000 or 0200 before it gets that mode; modes and content as archived",
        .enabled(if: geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")))
    func readBackBeforeUnreadableMode() throws {
        let work = try TemporaryDirectory(prefix: "cairn-unreadable")
        defer { work.remove() }
        chmod(work.path, 0o755)
        var generator = SeededGenerator(seed: 27)
        let content = (0..<(2 << 20)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let tree = work.appending("src/t")
        try FileManager.default.createDirectory(atPath: tree, withIntermediateDirectories: true)
        let files: [(name: String, mode: mode_t)] = [("a_none", 0o000), ("b_write_only", 0o200), ("c_copy", 0o644)]
        for file in files {
            try Data(content).write(to: URL(fileURLWithPath: tree + "/" + file.name))
            chmod(tree + "/" + file.name, file.mode)
        }
        let archive = work.appending("a.cairn")
        let cairn = try ChildProcess.cairnExecutable(besideBundle: Bundle.module.bundleURL)
        #expect(try ChildProcess.run(cairn, ["create", "-q", "-o", archive, "t"], in: work.appending("src")).status == 0)
        chmod(archive, 0o644)
        let drop = ["--reuid=65534", "--regid=65534", "--clear-groups"]
        for (label, operand) in [("file", archive), ("stdin", "-")] {
            let destination = work.appending(label)
            mkdir(destination, 0o777)
            chmod(destination, 0o777)
            let result = try ChildProcess.run(
                URL(fileURLWithPath: "/usr/bin/setpriv"), drop + [cairn.path, "extract", "-q", operand, "-C", destination + "/x"],
                standardInput: label == "stdin" ? archive : nil)
            #expect(result.status == 0, "\(label): \(result.stderr)")
            for file in files {
                let path = destination + "/x/t/" + file.name
                var status = stat()
                #expect(stat(path, &status) == 0, "\(label): \(path)")
                #expect(status.st_mode & 0o7777 == file.mode, "\(label): \(path)")
                // Read as root, who may.
                #expect(FileManager.default.contents(atPath: path) == Data(content), "\(label): \(path)")
            }
        }
    }
}
