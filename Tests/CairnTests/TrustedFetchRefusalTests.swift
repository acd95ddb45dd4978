import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import Cairn

/// What a fetch refuses at once, against a real nginx: a seeded fetch with `--trusted-key` of an
/// unsigned remote (`Spec/0004-trusted-archives.md §4.1`, §4.3), and a `--seed` that is not an
/// archive (`Spec/0003-command-line.md §13`, the seed rule), for a plain and an encrypted fetch alike.
@Suite("Fetch refusals: trusted keys and bad seeds", .serialized)
struct TrustedFetchRefusalTests {
    /// Whether the file at `path` exists.
    static func exists(_ path: String) -> Bool { RawFileSystem.exists(Array(path.utf8)) }

    /// Expects nothing of a fetch to `out` to be left: no file, no partial file, no set-aside seed, no state.
    static func expectNothingLeft(_ out: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for suffix in ["", ".partial", ".partial.seed", ".partial.fetch"] {
            #expect(!exists(out + suffix), "\(out + suffix) was left", sourceLocation: sourceLocation)
        }
    }

    @Test("§4.1, §4.3: a seeded fetch with --trusted-key of an unsigned remote is refused once, from its footer and manifest, naming the URL; nothing is left")
    func seededUnsignedRemote() async throws { try await onDedicatedThread { try Self().seededUnsignedRemoteOnThread() } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func seededUnsignedRemoteOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-fetch-unsigned")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        let old = work.appending("old.cairn")
        try FetchTests.archive(FetchTests.tree(seed: 31, count: 20), at: old, work: work, name: "old")
        try FetchTests.archive(FetchTests.tree(seed: 31, count: 20, contentSeed: 32), at: served + "/a.cairn", work: work, name: "new")
        let size = try FetchTests.bytes(served + "/a.cairn").count
        let (pub, _) = try SignedCreateCommandLineTests.minisignKeys(in: work.path, name: "maker")
        let server = try NginxServer(root: served)
        defer { server.stop() }

        let out = work.appending("copy.cairn")
        let url = server.url("a.cairn")
        let result = try FetchCLI.run(["fetch", url, "-o", out, "--seed", old, "--trusted-key", pub])
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains(url) && result.stderr.contains("not signed"), "\(result.stderr)")
        // Once: no rebuild, no second attempt with copies ("starting over").
        #expect(!result.stderr.contains("starting over") && !result.stderr.contains("instead"), "\(result.stderr)")
        Self.expectNothingLeft(out)
        // Refused from the footer, the head and the manifest: no chunk record was downloaded.
        let sent = server.accessLog().reduce(UInt64(0)) { $0 + $1.bodyBytesSent }
        #expect(sent < UInt64(size / 4), "\(sent) of \(size) bytes sent")

        // Signed by another key: refused as early, naming both keys' absence of trust.
        let (_, otherSec) = try SignedCreateCommandLineTests.minisignKeys(in: work.path, name: "other")
        let source = work.appending("src-new")
        let signed = try FetchCLI.run(["create", "-q", "--compression", "none", "--sign", otherSec, "-o", served + "/s.cairn", "."], in: source)
        try #require(signed.status == 0, "\(signed.stderr)")
        let other = try FetchCLI.run(["fetch", server.url("s.cairn"), "-o", out, "--seed", old, "--trusted-key", pub])
        #expect(other.status == 1, "\(other.stderr)")
        #expect(other.stderr.contains("not by a trusted key") && !other.stderr.contains("starting over"), "\(other.stderr)")
        Self.expectNothingLeft(out)
    }

    @Test(
        "Spec/0003 §13, a bad seed: one rule for a plain and an encrypted fetch; missing or not an archive is refused before any request (exit 1 naming it, nothing left); damaged is used as far as it goes, and the fetch gives the remote's archive",
        arguments: [false, true])
    func badSeed(encrypted: Bool) async throws { try await onDedicatedThread { try Self().badSeedOnThread(encrypted: encrypted) } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func badSeedOnThread(encrypted: Bool) throws {
        let work = try TemporaryDirectory(prefix: "cairn-fetch-bad-seed")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        let (identity, recipient) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "me")
        let (_, sec) = try SignedCreateCommandLineTests.minisignKeys(in: work.path, name: "maker")
        let old = work.appending("old.cairn")
        let remote = served + "/a.cairn"
        if encrypted {
            try EncryptedFetchTests.encryptedArchive(seed: 41, count: 16, at: old, for: recipient, signedWith: sec, work: work)
            try EncryptedFetchTests.encryptedArchive(seed: 41, count: 17, at: remote, for: recipient, signedWith: sec, work: work)
        } else {
            try FetchTests.archive(FetchTests.tree(seed: 41, count: 16), at: old, work: work, name: "old")
            try FetchTests.archive(FetchTests.tree(seed: 41, count: 17), at: remote, work: work, name: "new")
        }
        let expected = try FetchTests.bytes(remote)
        let server = try NginxServer(root: served)
        defer { server.stop() }
        let keys = encrypted ? ["--identity", identity] : []
        let out = work.appending("copy.cairn")

        let notArchive = work.appending("notes.txt")
        try RawFileSystem.writeFile(Array(notArchive.utf8), Array(String(repeating: "not an archive\n", count: 100).utf8))
        for (seed, says) in [(work.appending("missing.cairn"), "missing.cairn"), (notArchive, "not a Cairn archive"), (work.path, work.path)] {
            let result = try FetchCLI.run(["fetch", server.url("a.cairn"), "-o", out, "--seed", seed] + keys)
            #expect(result.status == 1, "\(seed): \(result.stderr)")
            #expect(result.stderr.contains(seed) && result.stderr.contains(says), "\(result.stderr)")
            Self.expectNothingLeft(out)
        }
        #expect(server.accessLog().isEmpty, "a bad seed is refused before any request: \(server.accessLog().count) made")

        // Damaged in its middle: used up to the damage; the fetch completes, identical.
        var damaged = try FetchTests.bytes(old)
        for at in stride(from: damaged.count / 2, to: damaged.count / 2 + 4096, by: 512) { damaged[at] ^= 0x5A }
        let damagedPath = work.appending("damaged.cairn")
        try RawFileSystem.writeFile(Array(damagedPath.utf8), damaged)
        let fetched = try FetchCLI.run(["fetch", server.url("a.cairn"), "-o", out, "--seed", damagedPath, "--json"] + keys)
        #expect(fetched.status == 0, "\(fetched.stderr)")
        if encrypted {
            // Rebuilt and sealed again (`Spec/0004 §6.10.3`): the same inner archive, verified.
            let verified = try FetchCLI.run(["verify", "--identity", identity, out])
            #expect(verified.status == 0, "\(verified.stderr)")
        } else {
            try FetchTests.expectSame(out, expected)
        }
        #expect(!fetched.stdout.contains("\"seedBytes\":0,"), "the damaged seed's first half helped: \(fetched.stdout)")
    }
}
