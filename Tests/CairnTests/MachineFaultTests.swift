import CairnTestSupport
import Foundation
import Glibc
import Testing

import Cairn

/// Faults of the machine (issue 5): a full disk while writing the archive and while extracting,
/// simulated with `RLIMIT_FSIZE` (`bash -c 'ulimit -f N; exec cairn ...'`; `cairn` ignores
/// `SIGXFSZ`, so the limit surfaces as `EFBIG`), and an unreadable archive. Each ends with exit
/// status 1, a message naming the file, no partial file at a final path, and nothing that was
/// there before changed (`Spec/0003-command-line.md §2`, `§3`, `§4`).
@Suite("Machine faults")
struct MachineFaultTests {
    static let mebibyte = 1 << 20

    /// `tree/` with six 1 MiB files of seeded random bytes and a few small ones.
    static func makeTree(at root: String, seed: UInt64) throws {
        var generator = SeededGenerator(seed: seed)
        var tree = TreeBuilder()
        for index in 0..<6 { tree.file("part-\(index).bin", generator.bytes(mebibyte)) }
        tree.file("notes/a.txt", Array("alpha\n".utf8))
        tree.file("notes/b.txt", Array("beta\n".utf8))
        tree.directory("empty")
        try tree.materialize(at: root)
    }

    /// Everything in `directory`, with the root's own mtime left out (a staging directory made
    /// and removed inside it moves that).
    static func snapshotIgnoringRootTime(_ directory: String) throws -> TreeSnapshot {
        var snapshot = try TreeSnapshot(at: directory)
        snapshot.nodes[[]]?.modificationTime = nil
        return snapshot
    }

    @Test("a full disk while writing the archive: exit 1 naming it, no ARCHIVE, a valid ARCHIVE.partial that --resume completes identically")
    func fullDiskWhileCreating() async throws {
        let work = try TemporaryDirectory()
        defer { work.remove() }
        try Self.makeTree(at: work.appending("src/tree"), seed: 701)
        let archive = work.appending("out.cairn")
        let partial = archive + ".partial"

        let limitKiB = 2048
        let failed = try FaultCLI.run(
            ["create", "-q", "--compression", "none", "-o", archive, "tree"], in: work.appending("src"),
            fileSizeLimitKiB: limitKiB)
        #expect(failed.status == 1, "\(failed.stderr)")
        #expect(failed.stderr.contains("cairn: error: \(partial): write failed"), "\(failed.stderr)")
        #expect(failed.stderr.contains("continue it with --resume"), "\(failed.stderr)")
        #expect(!RawFileSystem.exists(Array(archive.utf8)), "ARCHIVE is never a partial file")
        let partialStatus = try RawFileSystem.status(Array(partial.utf8))
        #expect(partialStatus.st_size <= limitKiB * 1024)

        // What is there is a valid prefix: it verifies up to its last commit.
        let prefix = try await Extractor.verifyPrefix(at: .file(path: partial))
        #expect(!prefix.isComplete)
        #expect(prefix.verifiedLength > 1_000_000, "verified \(prefix.verifiedLength) bytes")
        #expect(prefix.fileBytes == UInt64(partialStatus.st_size))

        let resumed = try FaultCLI.run(
            ["create", "-q", "--compression", "none", "--resume", "-o", archive, "tree"], in: work.appending("src"))
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(!RawFileSystem.exists(Array(partial.utf8)))
        let reference = work.appending("reference.cairn")
        let uninterrupted = try FaultCLI.run(
            ["create", "-q", "--compression", "none", "-o", reference, "tree"], in: work.appending("src"))
        #expect(uninterrupted.status == 0, "\(uninterrupted.stderr)")
        let resumedBytes = try RawFileSystem.contents(ofFile: Array(archive.utf8))
        let referenceBytes = try RawFileSystem.contents(ofFile: Array(reference.utf8))
        #expect(resumedBytes.count == referenceBytes.count)
        #expect(resumedBytes == referenceBytes, "the resumed archive is byte for byte the uninterrupted one")
        _ = try await Extractor.verifyArchive(at: .file(path: archive))
    }

    /// An archive of a tree whose one big file (4 MiB of random bytes) cannot be written under
    /// a 1 MiB file-size limit.
    static func makeArchive(in work: TemporaryDirectory) throws -> String {
        var generator = SeededGenerator(seed: 702)
        var tree = TreeBuilder()
        tree.file("a-small.txt", Array("small\n".utf8))
        tree.file("big.bin", generator.bytes(4 * mebibyte))
        tree.file("c/d.txt", Array("after\n".utf8))
        try tree.materialize(at: work.appending("src/tree"))
        let archive = work.appending("tree.cairn")
        let create = try FaultCLI.run(["create", "-q", "-o", archive, "tree"], in: work.appending("src"))
        guard create.status == 0 else { throw CairnError(.io, "create failed: \(create.stderr)") }
        return archive
    }

    @Test("a full disk while extracting into a new destination: exit 1 naming the file, no DEST, no staging directory")
    func fullDiskWhileExtractingIntoNewDestination() throws {
        let work = try TemporaryDirectory()
        defer { work.remove() }
        let archive = try Self.makeArchive(in: work)
        let destination = work.appending("restore")
        let before = try RawFileSystem.names(atPath: Array(work.path.utf8))

        let result = try FaultCLI.run(["extract", "-q", archive, "-C", destination], fileSizeLimitKiB: 1024)
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.hasPrefix("cairn: error: "), "\(result.stderr)")
        #expect(result.stderr.contains("tree/big.bin"), "names the file being written: \(result.stderr)")
        #expect(!RawFileSystem.exists(Array(destination.utf8)))
        #expect(try RawFileSystem.names(atPath: Array(work.path.utf8)) == before, "no staging directory remains")
    }

    @Test("a full disk while extracting into an existing destination: exit 1, its files unchanged, nothing new in it")
    func fullDiskWhileExtractingIntoExistingDestination() throws {
        let work = try TemporaryDirectory()
        defer { work.remove() }
        let archive = try Self.makeArchive(in: work)
        let destination = work.appending("restore")
        var existing = TreeBuilder()
        existing.file("keep.txt", Array("mine\n".utf8), mode: 0o600)
        existing.file("sub/keep.bin", Array(repeating: 7, count: 10_000))
        existing.symlink("sub/link", target: "../keep.txt")
        try existing.materialize(at: destination)
        let before = try Self.snapshotIgnoringRootTime(destination)
        let beside = try RawFileSystem.names(atPath: Array(work.path.utf8))

        let result = try FaultCLI.run(["extract", "-q", archive, "-C", destination], fileSizeLimitKiB: 1024)
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains("tree/big.bin"), "\(result.stderr)")
        let after = try Self.snapshotIgnoringRootTime(destination)
        #expect(before == after, "\(before.diff(after))")
        #expect(try RawFileSystem.names(atPath: Array(work.path.utf8)) == beside)

        // Without the limit the same extraction succeeds next to the existing files.
        let again = try FaultCLI.run(["extract", "-q", archive, "-C", destination])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(
            try RawFileSystem.names(atPath: Array(destination.utf8)) == [Array("keep.txt".utf8), Array("sub".utf8), Array("tree".utf8)])
    }

    @Test(
        "an unreadable archive: list, verify and extract exit 1 naming it",
        .enabled(if: getuid() != 0, "running as root: permission bits do not stop root from reading a file"))
    func unreadableArchive() throws {
        let work = try TemporaryDirectory()
        defer { work.remove() }
        let archive = try Self.makeArchive(in: work)
        #expect(chmod(archive, 0) == 0)
        for command in [["list", archive], ["verify", archive], ["extract", archive, "-C", work.appending("out")]] {
            let result = try FaultCLI.run(command)
            #expect(result.status == 1, "\(command[0]): \(result.stderr)")
            #expect(result.stderr.contains(archive), "\(command[0]): \(result.stderr)")
        }
        #expect(!RawFileSystem.exists(Array(work.appending("out").utf8)))
    }
}

// MARK: - Running the executable

/// Runs the built `cairn` executable, optionally under a file-size limit (see ``ChildProcess``).
enum FaultCLI {
    typealias Result = ChildProcess.Result

    static func run(_ arguments: [String], in directory: String? = nil, fileSizeLimitKiB: Int? = nil, timeout: Double = Await.safetyBound)
        throws -> Result
    {
        try ChildProcess.run(
            ChildProcess.cairnExecutable(besideBundle: Bundle.module.bundleURL), arguments, in: directory,
            fileSizeLimitKiB: fileSizeLimitKiB, timeout: timeout)
    }
}
