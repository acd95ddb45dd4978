import CairnTestSupport
import Foundation
import Glibc
import Testing

import Cairn

/// SIGINT and SIGTERM during `create` and `extract` (`Spec/0003-command-line.md §2`): exit 130 /
/// 143, one line on standard error naming what was kept and the command that continues it, and
/// that command does continue it. Each signal is sent at an event (a commit in the `.partial`,
/// the input drained), never after a delay, and nothing is timed: the create's remaining work or
/// the extraction's endless input is what only a prompt stop gets out of. Serialized: they share
/// two cores.
@Suite("Interruption (command line)", .serialized)
struct InterruptionCommandLineTests {
    /// Six files of seeded, compressible text, 1 MiB each: slow to compress at zstd level 19,
    /// so a signal arrives while `create` runs.
    static func slowTree() -> TreeBuilder {
        var generator = SeededGenerator(seed: 0x516)
        let words = ["alpha", "notes", "sqlite", "record", "cairn", "omega", "ledger", "photo"].map { Array($0.utf8) }
        var tree = TreeBuilder()
        for index in 0..<6 {
            var text: [UInt8] = []
            text.reserveCapacity(1 << 20)
            while text.count < 1 << 20 {
                text += words[Int(generator.next() % UInt64(words.count))]
                text += Array(String(generator.next() % 1000).utf8) + [0x20]
            }
            tree.file("slow/f\(index).txt", Array(text.prefix(1 << 20)))
        }
        return tree
    }

    @Test("SIGINT during create: exit 130, one line naming the .partial kept and the create --resume that finishes it")
    func createInterrupted() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-interrupt-create")
        defer { work.remove() }
        try Self.slowTree().materialize(at: work.path)
        let archive = work.appending("export.cairn")
        let partial = Array((archive + ".partial").utf8)
        // -v names each entry on standard error once it is written: the event to signal at.
        let child = try BehaviourCLI.start(
            ["create", "-q", "-v", "--compression", "zstd:19", "--chunking", "cdc:4k:16k:64k", "-o", archive, "slow"], in: work.path)
        // Signalled once the first file is written: five slow files are still ahead.
        try Await.until("create -v names slow/f0.txt") {
            child.stderrSoFar.split(separator: "\n").contains("slow/f0.txt") || !child.process.isRunning
        }
        #expect(RawFileSystem.exists(partial))
        kill(child.pid, SIGINT)
        let result = try child.wait(for: "create ends after SIGINT")
        try #require(result.status == 130, "exit 130 after SIGINT: \(result.status) \(result.stderr)")
        // Stopping promptly means it did not first compress the rest (seconds of zstd level 19).
        let kept = try await Extractor.verifyPrefix(at: .file(path: archive + ".partial"))
        #expect(!kept.isComplete && kept.contentBytes < 6 << 20, "stops promptly: \(kept.contentBytes) bytes committed")
        // The entries -v named, then one line.
        let lines = result.stderr.split(separator: "\n").map(String.init)
        #expect(lines.dropLast().allSatisfy { $0 == "slow" || $0.hasPrefix("slow/f") }, "one line after the entries: \(result.stderr)")
        let line = try #require(lines.last)
        #expect(line.hasPrefix("cairn: interrupted; kept \(archive).partial ("), "\(line)")
        #expect(line.contains(" committed"), "\(line)")
        #expect(!FileManager.default.fileExists(atPath: archive), "no archive appears at ARCHIVE")
        let command = try #require(line.components(separatedBy: "continue with: ").last)
        #expect(command == "cairn create --resume -q -v --compression zstd:19 --chunking cdc:4k:16k:64k -o \(archive) slow")

        let continued = try Self.shell(command, in: work.path)
        #expect(continued.status == 0, "\(continued.stderr)")
        // Without --force, create never starts over a .partial, so success means it continued it.
        let verify = try BehaviourCLI.run(["verify", "--json", archive])
        #expect(verify.status == 0, "\(verify.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(verify.stdout.utf8)) as? [String: Any])
        #expect((report["contentBytes"] as? NSNumber)?.intValue == 6 << 20)
    }

    @Test("Spec/0004-trusted-archives.md §6.9, Spec/0003 §2.3: SIGINT during create --recipient: the line's command drops --recipient (which --resume refuses) for --identity IDENTITY_FILE, and with the identity filled in it finishes the archive")
    func encryptedCreateInterrupted() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-interrupt-create-sealed")
        defer { work.remove() }
        try Self.slowTree().materialize(at: work.path)
        let (identity, recipient) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "me")
        let archive = work.appending("export.cairn")
        let child = try BehaviourCLI.start(
            ["create", "-q", "-v", "--recipient", recipient, "--compression", "zstd:19", "--chunking", "cdc:4k:16k:64k", "-o", archive, "slow"],
            in: work.path)
        try Await.until("create -v names slow/f0.txt") {
            child.stderrSoFar.split(separator: "\n").contains("slow/f0.txt") || !child.process.isRunning
        }
        kill(child.pid, SIGINT)
        let result = try child.wait(for: "create ends after SIGINT")
        try #require(result.status == 130, "exit 130 after SIGINT: \(result.status) \(result.stderr)")
        let line = try #require(result.stderr.split(separator: "\n").map(String.init).last)
        // No committed figures: the .partial is not opened without an identity.
        #expect(line.hasPrefix("cairn: interrupted; kept \(archive).partial; continue with: "), "\(line)")
        #expect(!line.contains(recipient) && !line.contains("--recipient"), "\(line)")
        #expect(line.hasSuffix(" (IDENTITY_FILE: an age identity file of one of its recipients)"), "\(line)")
        let command = try #require(line.components(separatedBy: "continue with: ").last?.components(separatedBy: " (IDENTITY_FILE").first)
        #expect(
            command == "cairn create --resume -q -v --identity IDENTITY_FILE --compression zstd:19 --chunking cdc:4k:16k:64k -o \(archive) slow")

        let continued = try Self.shell(command.replacingOccurrences(of: "IDENTITY_FILE", with: identity), in: work.path)
        #expect(continued.status == 0, "\(continued.stderr)")
        let verify = try BehaviourCLI.run(["verify", "--json", "--identity", identity, archive])
        #expect(verify.status == 0, "\(verify.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(verify.stdout.utf8)) as? [String: Any])
        #expect((report["contentBytes"] as? NSNumber)?.intValue == 6 << 20)
    }

    @Test("SIGTERM during extract - (its input stalled): exit 143, one line naming the staging directory and the extract --resume that finishes it")
    func extractInterrupted() throws {
        let work = try TemporaryDirectory(prefix: "cairn-interrupt-extract")
        defer { work.remove() }
        let archive = try BehaviourFixture.archive(in: work)
        let bytes = try RawFileSystem.contents(ofFile: Array(archive.utf8))
        let fifo = work.appending("stream")
        try #require(mkfifo(fifo, 0o600) == 0)
        // Held open for writing (and reading, so opening never blocks) for the whole test: the
        // child never sees the end of its input, as behind a stalled network.
        let writer = open(fifo, O_RDWR | O_NONBLOCK)
        try #require(writer >= 0)
        defer { close(writer) }
        let destination = work.appending("dest")
        let child = try BehaviourCLI.start(["extract", "-q", "-", "-C", destination], standardInput: fifo)
        try Self.write(Array(bytes[0..<(bytes.count * 2 / 3)]), to: writer)
        let staging = Array(work.appending(".dest.cairn-staging").utf8)
        try Await.until("the staging journal appears") { RawFileSystem.exists(staging + Array("/.cairn-journal".utf8)) }
        // Everything written was read: from here on the child waits for input that never comes.
        try Await.until("the extraction reads all of its input so far") {
            var unread: Int32 = 0
            return ioctl(writer, UInt(FIONREAD), &unread) == 0 && unread == 0
        }
        kill(child.pid, SIGTERM)
        // Its input never ends, so only the signal can end it.
        let result = try child.wait(for: "extract, blocked reading, ends after SIGTERM")
        try #require(result.status == 143, "exit 143 after SIGTERM: \(result.status) \(result.stderr)")
        let lines = result.stderr.split(separator: "\n").map(String.init)
        #expect(lines.count == 1, "one line: \(result.stderr)")
        let line = try #require(lines.first)
        #expect(line.hasPrefix("cairn: interrupted; kept what verified in \(work.appending(".dest.cairn-staging"));"), "\(line)")
        #expect(RawFileSystem.exists(staging), "the staging directory is kept")
        #expect(!RawFileSystem.exists(Array(destination.utf8)), "nothing at DEST")
        let tail = try #require(line.components(separatedBy: "continue with: ").last)
        let command = try #require(tail.components(separatedBy: " (with the whole stream").first)
        #expect(command == "cairn extract --resume -q - -C \(destination)")
        #expect(tail.hasSuffix("(with the whole stream on standard input again)"))

        let continued = try Self.shell(command + " < " + archive, in: work.path)
        #expect(continued.status == 0, "\(continued.stderr)")
        #expect(!RawFileSystem.exists(staging))
        let extracted = try TreeSnapshot(at: destination + "/tree")
        let source = try TreeSnapshot(at: work.appending("tree"))
        #expect(extracted == source, "\(extracted.diff(source))")
    }

    /// Runs `command` with bash, the built `cairn` first on PATH.
    static func shell(_ command: String, in directory: String) throws -> ChildProcess.Result {
        let bin = try BehaviourCLI.executable().deletingLastPathComponent().path
        return try ChildProcess.run(
            URL(fileURLWithPath: "/bin/bash"), ["-c", "PATH=\(bin):$PATH; \(command)"], in: directory)
    }

    /// Writes `bytes` to a non-blocking descriptor as the reader takes them.
    static func write(_ bytes: [UInt8], to fd: Int32) throws {
        var offset = 0
        try Await.until("the reader takes all \(bytes.count) bytes (it took \(offset))") {
            let n = bytes.withUnsafeBytes { raw in Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset) }
            if n > 0 { offset += n }
            return offset == bytes.count
        }
    }
}
