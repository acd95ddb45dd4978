import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import Cairn

/// `cairn fetch --identity` of an encrypted archive against a real nginx
/// (`Spec/0004-trusted-archives.md §6.10`): the file written is the remote's bytes, verified as
/// they arrive through their opened blocks; a cut fetch resumes from a sealed block boundary;
/// what cannot be opened is refused, keeping nothing.
@Suite("Fetch of an encrypted archive over HTTP", .serialized)
struct EncryptedFetchTests {
    /// An encrypted archive of ``FetchTests/tree(seed:count:contentSeed:)`` for `recipient`,
    /// signed with `secretKey` when given, at `path`; returns the directory archived.
    @discardableResult
    static func encryptedArchive(
        seed: UInt64, count: Int = 30, at path: String, for recipient: String, signedWith secretKey: String? = nil, work: TemporaryDirectory
    ) throws -> String {
        let source = work.appending("src-" + (path as NSString).lastPathComponent)
        try FetchTests.tree(seed: seed, count: count).materialize(at: source)
        var arguments = ["create", "-q", "--compression", "none", "--recipient", recipient, "-o", path, "."]
        if let secretKey { arguments += ["--sign", secretKey] }
        let created = try FetchCLI.run(arguments, in: source)
        try #require(created.status == 0, "\(created.stderr)")
        return source
    }

    /// Where the sealed blocks of the encrypted archive `bytes` start, and their outer size.
    static func blocks(of bytes: [UInt8]) throws -> (dataStart: UInt64, sealedSize: UInt64) {
        var position = 0
        let (record, prefix) = try OpenedEnvelope.readRecord(name: "archive") { (count) throws(CairnError) in
            let piece = Array(bytes[position..<min(bytes.count, position + count)])
            position += piece.count
            return piece
        }
        return (UInt64(prefix.count), UInt64(record.blockSize) + UInt64(BlockSealer.overhead))
    }

    /// Whether the file at `path` exists.
    static func exists(_ path: String) -> Bool { RawFileSystem.exists(Array(path.utf8)) }

    @Test("§6.10: fetch --identity writes the remote's bytes exactly, verified with --trusted-key too; the result verifies and extracts")
    func verbatimFetch() async throws { try await onDedicatedThread { try Self().verbatimFetchOnThread() } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func verbatimFetchOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-efetch")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        let (identity, recipient) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "me")
        let (pub, sec) = try SignedCreateCommandLineTests.minisignKeys(in: work.path, name: "maker")
        let source = try Self.encryptedArchive(seed: 1, at: served + "/e.cairn", for: recipient, signedWith: sec, work: work)
        let expected = try FetchTests.bytes(served + "/e.cairn")
        let server = try NginxServer(root: served)
        defer { server.stop() }

        let out = work.appending("copy.cairn")
        let result = try FetchCLI.run(["fetch", server.url("e.cairn"), "-o", out, "--identity", identity, "--trusted-key", pub, "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        try FetchTests.expectSame(out, expected)
        #expect(result.stdout.contains("\"archiveBytes\":\(expected.count)"), "\(result.stdout)")
        #expect(!Self.exists(out + ".partial") && !Self.exists(out + ".partial.fetch"))
        let verified = try FetchCLI.run(["verify", "--identity", identity, "--trusted-key", pub, out])
        #expect(verified.status == 0, "\(verified.stderr)")
        let extracted = try FetchCLI.run(["extract", "-q", "--identity", identity, out, "-C", work.appending("out")])
        #expect(extracted.status == 0, "\(extracted.stderr)")
        let a = try TreeSnapshot(at: work.appending("out"), directoryTimes: false)
        let b = try TreeSnapshot(at: source, directoryTimes: false)
        #expect(a == b, "\(a.diff(b))")

        // Another maker's key: refused, nothing kept.
        let (otherPub, _) = try SignedCreateCommandLineTests.minisignKeys(in: work.path, name: "other")
        let untrusted = try FetchCLI.run(["fetch", server.url("e.cairn"), "-o", work.appending("u.cairn"), "--identity", identity, "--trusted-key", otherPub])
        #expect(untrusted.status == 1, "\(untrusted.stderr)")
        #expect(!Self.exists(work.appending("u.cairn")) && !Self.exists(work.appending("u.cairn.partial")))
    }

    @Test(
        "§6.10: a partial file cut inside a sealed block resumes with one range request from the block holding its last verified commit; byte-identical",
        arguments: [35, 80])
    func resumeFromBlockBoundary(percent: Int) async throws {
        try await onDedicatedThread { try Self().resumeFromBlockBoundaryOnThread(percent: percent) }
    }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func resumeFromBlockBoundaryOnThread(percent: Int) throws {
        let work = try TemporaryDirectory(prefix: "cairn-efetch-resume")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        let (identity, recipient) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "me")
        try Self.encryptedArchive(seed: 2, at: served + "/e.cairn", for: recipient, work: work)
        let expected = try FetchTests.bytes(served + "/e.cairn")
        let (dataStart, sealedSize) = try Self.blocks(of: expected)
        let server = try NginxServer(root: served)
        defer { server.stop() }

        // What a killed run leaves: a prefix that ends 1000 bytes into a block, and the state
        // file (no validator: the resume relies on the opened blocks and chain digests).
        let url = server.url("e.cairn")
        let out = work.appending("copy.cairn")
        let cut = Int(dataStart) + (expected.count - Int(dataStart)) * percent / 100 / Int(sealedSize) * Int(sealedSize) + 1000
        try RawFileSystem.writeFile(Array((out + ".partial").utf8), Array(expected[0..<cut]))
        try FetchState(url: url, validator: nil, length: nil).save(for: out)

        let result = try FetchCLI.run(["fetch", url, "-o", out, "--identity", identity, "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        try FetchTests.expectSame(out, expected)
        let fields = server.requestFields()
        try #require(fields.count == 1, "\(server.accessLog())")
        let range = fields[0].range
        let from = try #require(range.hasPrefix("bytes=") && range.hasSuffix("-") ? UInt64(range.dropFirst(6).dropLast()) : nil, "\(range)")
        // At a block boundary, at or before the cut, and at most a commit interval (about 1 MiB)
        // and a block before it.
        #expect(from > dataStart && (from - dataStart) % sealedSize == 0, "resumed at \(from)")
        #expect(from <= UInt64(cut) && UInt64(cut) - from <= (1 << 20) + (256 << 10) + sealedSize, "resumed at \(from), cut at \(cut)")
        #expect(server.accessLog()[0].bodyBytesSent == UInt64(expected.count) - from)
        #expect(result.stdout.contains("\"resumedFrom\":\(from)"), "\(result.stdout)")
    }

    @Test("§6.10: the archive replaced on the server (same name, no validator): the resumed blocks do not open under the partial's keys, and the fetch starts over and gives the new archive exactly")
    func replacedArchive() async throws { try await onDedicatedThread { try Self().replacedArchiveOnThread() } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func replacedArchiveOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-efetch-replaced")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        let (identity, recipient) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "me")
        try Self.encryptedArchive(seed: 7, at: work.appending("old.cairn"), for: recipient, work: work)
        // The same tree encrypted again: another block key, so none of the old blocks opens.
        try Self.encryptedArchive(seed: 7, at: served + "/e.cairn", for: recipient, work: work)
        let old = try FetchTests.bytes(work.appending("old.cairn"))
        let expected = try FetchTests.bytes(served + "/e.cairn")
        let server = try NginxServer(root: served)
        defer { server.stop() }
        let url = server.url("e.cairn")
        let out = work.appending("copy.cairn")
        try RawFileSystem.writeFile(Array((out + ".partial").utf8), Array(old[0..<(old.count / 2)]))
        try FetchState(url: url, validator: nil, length: nil).save(for: out)

        let result = try FetchCLI.run(["fetch", url, "-o", out, "--identity", identity, "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        try FetchTests.expectSame(out, expected)
        #expect(result.stdout.contains("\"restarts\":1"), "\(result.stdout)")
        let fields = server.requestFields()
        #expect(fields.count == 2 && fields[0].range.hasPrefix("bytes=") && fields[1].range.isEmpty, "\(fields)")
    }

    @Test("§6.10: a fetch --identity killed mid-body and rerun continues with range requests; byte-identical")
    func resumeAfterKill() async throws { try await onDedicatedThread { try Self().resumeAfterKillOnThread() } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func resumeAfterKillOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-efetch-kill")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        let (identity, recipient) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "me")
        try Self.encryptedArchive(seed: 3, at: served + "/e.cairn", for: recipient, work: work)
        let expected = try FetchTests.bytes(served + "/e.cairn")
        let server = try NginxServer(root: served, slowRate: "1m")
        defer { server.stop() }
        let url = server.url("slow/e.cairn")
        let out = work.appending("copy.cairn")
        var generator = SeededGenerator(seed: 0xE7C)
        for _ in 0..<2 {
            let child = try FetchCLI.start(["fetch", url, "-o", out, "-q", "--identity", identity])
            usleep(useconds_t(Double.random(in: 0.8...1.4, using: &generator) * 1_000_000))
            kill(child.pid, SIGKILL)
            if child.wait().status == 0 { break }
        }
        let finished = try FetchCLI.run(["fetch", url, "-o", out, "--identity", identity, "--json"])
        #expect(finished.status == 0, "\(finished.stderr)")
        try FetchTests.expectSame(out, expected)
        let ranged = server.accessLog().filter { $0.status == 206 }
        #expect(!ranged.isEmpty, "the reruns asked for ranges: \(server.accessLog())")
        for entry in ranged { #expect(entry.bodyBytesSent < UInt64(expected.count)) }
    }

    @Test("§6.2, §6.10: a stranger's identity, a plain archive given --identity, an encrypted one without: exit 1, nothing left behind")
    func refusals() async throws { try await onDedicatedThread { try Self().refusalsOnThread() } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func refusalsOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-efetch-refuse")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        let (identity, recipient) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "me")
        let (stranger, _) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "stranger")
        try Self.encryptedArchive(seed: 4, count: 8, at: served + "/e.cairn", for: recipient, work: work)
        try FetchTests.archive(FetchTests.tree(seed: 4, count: 8), at: served + "/p.cairn", work: work)
        let server = try NginxServer(root: served)
        defer { server.stop() }

        let cases: [(arguments: [String], says: [String])] = [
            (["fetch", server.url("e.cairn"), "--identity", stranger], ["no identity matches"]),
            (["fetch", server.url("p.cairn"), "--identity", identity], ["not encrypted", "refusing a plain archive"]),
            (["fetch", server.url("e.cairn")], ["encrypted", "--identity"]),
        ]
        for (number, (arguments, says)) in cases.enumerated() {
            let out = work.appending("out\(number).cairn")
            for run in 0..<2 {
                let result = try FetchCLI.run(arguments + ["-o", out])
                #expect(result.status == 1, "case \(number), run \(run): \(result.stderr)")
                for phrase in says { #expect(result.stderr.contains(phrase), "case \(number): \(result.stderr)") }
                #expect(!Self.exists(out) && !Self.exists(out + ".partial") && !Self.exists(out + ".partial.fetch"), "case \(number)")
            }
        }
    }

    @Test("§6.10: a sealed block altered on the server: exit 1 naming the block and its offset, no FILE, the verified blocks before it kept")
    func damagedBlock() async throws { try await onDedicatedThread { try Self().damagedBlockOnThread() } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func damagedBlockOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-efetch-damage")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        let (identity, recipient) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "me")
        try Self.encryptedArchive(seed: 5, at: served + "/e.cairn", for: recipient, work: work)
        var bytes = try FetchTests.bytes(served + "/e.cairn")
        let (dataStart, sealedSize) = try Self.blocks(of: bytes)
        let block = (UInt64(bytes.count) - dataStart) / sealedSize * 2 / 3
        let offset = dataStart + block * sealedSize
        bytes[Int(offset) + 100] ^= 0x20
        try RawFileSystem.writeFile(Array((served + "/e.cairn").utf8), bytes)
        let server = try NginxServer(root: served)
        defer { server.stop() }

        let out = work.appending("copy.cairn")
        let result = try FetchCLI.run(["fetch", server.url("e.cairn"), "-o", out, "--identity", identity])
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains("sealed block \(block) fails authentication") && result.stderr.contains("offset \(offset)"), "\(result.stderr)")
        #expect(!Self.exists(out))
        let kept = UInt64((try? RawFileSystem.status(Array((out + ".partial").utf8)).st_size) ?? 0)
        #expect(kept > dataStart && kept <= offset && (kept - dataStart) % sealedSize == 0, "kept \(kept) of \(bytes.count)")
    }

    @Test("§6.10.3: seeds that no identity opens, or plain ones, are left out with a note: the fetch completes, downloading the archive whole")
    func seedsIgnored() async throws { try await onDedicatedThread { try Self().seedsIgnoredOnThread() } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func seedsIgnoredOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-efetch-seed")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        let (identity, recipient) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "me")
        let (_, otherRecipient) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "other")
        try Self.encryptedArchive(seed: 6, count: 10, at: served + "/e.cairn", for: recipient, work: work)
        try Self.encryptedArchive(seed: 6, count: 10, at: work.appending("foreign.cairn"), for: otherRecipient, work: work)
        try FetchTests.archive(FetchTests.tree(seed: 6, count: 10), at: work.appending("plain.cairn"), work: work)
        let expected = try FetchTests.bytes(served + "/e.cairn")
        let server = try NginxServer(root: served)
        defer { server.stop() }

        let out = work.appending("copy.cairn")
        let result = try FetchCLI.run([
            "fetch", server.url("e.cairn"), "-o", out, "--identity", identity, "--seed", work.appending("foreign.cairn"),
            "--seed", work.appending("plain.cairn"),
        ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("seed \(work.appending("foreign.cairn")) not used: no identity matches"), "\(result.stderr)")
        #expect(result.stderr.contains("seed \(work.appending("plain.cairn")) not used"), "\(result.stderr)")
        try FetchTests.expectSame(out, expected)
        // The whole archive, after the few requests that read its envelope, footer and manifest.
        let sent = server.accessLog().reduce(UInt64(0)) { $0 + $1.bodyBytesSent }
        #expect(sent >= UInt64(expected.count) && sent <= UInt64(expected.count) + (64 << 10), "sent \(sent) of \(expected.count)")
    }
}
