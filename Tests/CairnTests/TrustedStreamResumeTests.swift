import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import Cairn

/// An interrupted extraction with `--trusted-key` keeps the entries a verified signature covers
/// and `--resume` continues it (`Spec/0004-trusted-archives.md §4.2`), through the executable:
/// from a pipe, and over nginx for an encrypted and signed archive (§6.9).
@Suite("Trusted extraction: interrupted and resumed (command line)", .serialized)
struct TrustedStreamResumeTests {
    /// About 30 MB of incompressible files larger than the signature interval (one signature
    /// every 4 MiB, `Spec/0004 §3.4` rule 2), so the signed commits lie inside files.
    static func source(_ work: TemporaryDirectory) throws -> String {
        var generator = SeededGenerator(seed: 2504)
        var tree = TreeBuilder()
        for number in 0..<4 { tree.file("f\(number).bin", generator.bytes(7_500_000 + number * 4_099)) }
        tree.file("last.txt", Array("last\n".utf8))
        let source = work.appending("src")
        try tree.materialize(at: source + "/data")
        return source
    }

    /// `cat file | cairn arguments...`: the archive through a pipe, as `head -c N | cairn extract -`.
    static func piped(_ file: String, _ arguments: [String], in directory: String) throws -> ChildProcess.Result {
        try ChildProcess.run(
            URL(fileURLWithPath: "/bin/bash"), ["-c", "cat \"$1\" | \"$0\" \"${@:2}\"", try FetchCLI.executable.path, file] + arguments,
            in: directory)
    }

    /// The `commit N DIGEST` lines of the staging journal at `staging`.
    static func journaledCommits(_ staging: String) -> [String] {
        let text = (try? String(contentsOfFile: staging + "/.cairn-journal", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").filter { $0.hasPrefix("commit ") }.map(String.init)
    }

    @Test("§4.2: extract - --trusted-key of a signed archive cut at 60% keeps the entries its verified signatures cover, as without the key, and --resume ends with the same tree")
    func pipeCutKeepsSignedPrefix() throws {
        let work = try TemporaryDirectory(prefix: "cairn-trusted-stream-resume")
        defer { work.remove() }
        let source = try Self.source(work)
        let (pub, sec) = try SignedCreateCommandLineTests.minisignKeys(in: work.path, name: "maker")
        let archive = work.appending("s.cairn")
        let created = try FetchCLI.run(["create", "-q", "--sign", sec, "-o", archive, "data"], in: source)
        try #require(created.status == 0, "\(created.stderr)")
        let bytes = try RawFileSystem.contents(ofFile: Array(archive.utf8))
        let cut = work.appending("cut.cairn")
        try RawFileSystem.writeFile(Array(cut.utf8), Array(bytes[0..<(bytes.count * 6 / 10)]))
        let expected = try TreeSnapshot(at: source + "/data")

        // Without the key: what the commits verified is kept (the reference).
        let plain = try Self.piped(cut, ["extract", "-q", "-", "-C", work.appending("plain")], in: work.path)
        #expect(plain.status == 1 && plain.stderr.contains("--resume"), "\(plain.stderr)")
        let plainCommits = Self.journaledCommits(work.appending(".plain.cairn-staging"))
        try #require(!plainCommits.isEmpty, "the reference run journals commits")

        let out = work.appending("out")
        let staging = work.appending(".out.cairn-staging")
        let trusted = try Self.piped(cut, ["extract", "-q", "-", "-C", out, "--trusted-key", pub], in: work.path)
        #expect(trusted.status == 1 && trusted.stderr.contains("are kept") && trusted.stderr.contains("--resume"), "\(trusted.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out), "nothing at the destination before the root signature verified")
        let kept = Self.journaledCommits(staging)
        #expect(!kept.isEmpty, "the signed entries are kept: \(trusted.stderr)")
        // Everything journaled was journaled without the key too; the last kept one is covered by a
        // signature, so at most one signature interval behind the reference.
        #expect(Set(kept).isSubset(of: Set(plainCommits)), "\(kept) \(plainCommits)")
        let entries = { (line: String) in Int(line.split(separator: " ")[1]) ?? 0 }
        #expect(kept.last.map(entries) ?? 0 >= 2, "\(kept)")

        let resumed = try Self.piped(archive, ["extract", "-q", "--resume", "-", "-C", out, "--trusted-key", pub], in: work.path)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        let tree = try TreeSnapshot(at: out + "/data")
        #expect(tree == expected, "\(tree.diff(expected))")
        #expect(!FileManager.default.fileExists(atPath: staging))
    }

    @Test("§4.2, §6.9: extract URL --identity --trusted-key of an encrypted and signed archive cut at 60% keeps the signed entries; --resume over nginx ends with the same tree")
    func remoteEncryptedCutKeepsSignedPrefix() throws {
        let work = try TemporaryDirectory(prefix: "cairn-trusted-remote-resume")
        defer { work.remove() }
        let source = try Self.source(work)
        let (pub, sec) = try SignedCreateCommandLineTests.minisignKeys(in: work.path, name: "maker")
        let (identity, recipient) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "me")
        let www = work.appending("www")
        try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
        let archive = www + "/e.cairn"
        let created = try FetchCLI.run(["create", "-q", "--recipient", recipient, "--sign", sec, "-o", archive, "data"], in: source)
        try #require(created.status == 0, "\(created.stderr)")
        let bytes = try RawFileSystem.contents(ofFile: Array(archive.utf8))
        try RawFileSystem.writeFile(Array((www + "/cut.cairn").utf8), Array(bytes[0..<(bytes.count * 6 / 10)]))
        let expected = try TreeSnapshot(at: source + "/data")
        let server = try NginxServer(root: www)
        defer { server.stop() }

        let out = work.appending("out")
        let options = ["--identity", identity, "--trusted-key", pub, "-C", out]
        let cut = try FetchCLI.run(["extract", "-q", server.url("cut.cairn")] + options, in: work.path)
        #expect(cut.status == 1 && cut.stderr.contains("--resume"), "\(cut.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out))
        #expect(!Self.journaledCommits(work.appending(".out.cairn-staging")).isEmpty, "the signed entries are kept: \(cut.stderr)")
        let continued = try FetchCLI.run(["extract", "-q", "--resume", server.url("e.cairn")] + options, in: work.path)
        #expect(continued.status == 0, "\(continued.stderr)")
        let tree = try TreeSnapshot(at: out + "/data")
        #expect(tree == expected, "\(tree.diff(expected))")
    }
}
