import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import Cairn

/// `cairn create --sign SECFILE` (`Spec/0003-command-line.md §3`, §3.1;
/// `Spec/0004-trusted-archives.md §3.4`, §3.5) with keys made by Debian's `minisign -G`, the
/// interop oracle, to a file, through `--resume`, and to `s3://` (`rclone serve s3`).
@Suite("create --sign (command line)", .serialized)
struct SignedCreateCommandLineTests {
    /// A password-less minisign key pair made by `minisign -G -W` in `directory`, as
    /// (public key file, secret key file).
    static func minisignKeys(in directory: String, name: String) throws -> (pub: String, sec: String) {
        let pub = directory + "/\(name).pub"
        let sec = directory + "/\(name).sec"
        let made = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/minisign"), ["-G", "-W", "-p", pub, "-s", sec], in: directory)
        try #require(made.status == 0, "minisign -G: \(made.stderr)")
        return (pub, sec)
    }

    static func source(_ work: TemporaryDirectory) throws -> String {
        let source = work.appending("src")
        try ArchiveSignatureTests.tree(largeBytes: 6 * 1024 * 1024).materialize(at: source + "/data")
        return source
    }

    @Test("§3.4: create --sign with a minisign -G key writes a 2.2 archive whose signatures verify with the minisign public key; a resume needs the same key (§3.5)")
    func signWithMinisignKeyAndResume() throws {
        let work = try TemporaryDirectory(prefix: "cairn-sign-cli")
        defer { work.remove() }
        let source = try Self.source(work)
        let (pub, sec) = try Self.minisignKeys(in: work.path, name: "maker")
        let (_, otherSecret) = try Self.minisignKeys(in: work.path, name: "other")
        let key = try #require(try PublicKey.readKeys(fromFile: pub).first)
        let archive = work.appending("a.cairn")
        let created = try FetchCLI.run(["create", "-q", "--sign", sec, "-o", archive, "data"], in: source)
        try #require(created.status == 0, "\(created.stderr)")
        let bytes = try RawFileSystem.contents(ofFile: Array(archive.utf8))
        _ = try ArchiveSignatureTests.SignedLayout(bytes, key: key)

        // Cut at two thirds and resumed: without the key, with another, then with it.
        let target = work.appending("r.cairn")
        try RawFileSystem.writeFile(Array((target + ".partial").utf8), Array(bytes[0..<(bytes.count * 2 / 3)]))
        let unsigned = try FetchCLI.run(["create", "-q", "--resume", "-o", target, "data"], in: source)
        #expect(unsigned.status == 1 && unsigned.stderr.contains("signed by key \(key.keyID)"), "\(unsigned.stderr)")
        let other = try FetchCLI.run(["create", "-q", "--resume", "--sign", otherSecret, "-o", target, "data"], in: source)
        #expect(other.status == 1 && other.stderr.contains("not by the key given"), "\(other.stderr)")
        let resumed = try FetchCLI.run(["create", "-q", "--resume", "--sign", sec, "-o", target, "data"], in: source)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(try RawFileSystem.contents(ofFile: Array(target.utf8)) == bytes, "the resumed archive is the uninterrupted one")
        // An unsigned partial is not continued with --sign.
        let plain = work.appending("p.cairn")
        #expect(try FetchCLI.run(["create", "-q", "-o", plain, "data"], in: source).status == 0)
        let plainBytes = try RawFileSystem.contents(ofFile: Array(plain.utf8))
        let second = work.appending("q.cairn")
        try RawFileSystem.writeFile(Array((second + ".partial").utf8), Array(plainBytes[0..<(plainBytes.count / 2)]))
        let refused = try FetchCLI.run(["create", "-q", "--resume", "--sign", sec, "-o", second, "data"], in: source)
        #expect(refused.status == 1 && refused.stderr.contains("not signed"), "\(refused.stderr)")
    }

    @Test("§3.4: a secret key file that is missing or not a key fails with exit 1 naming it, and nothing is written")
    func badKeyFile() throws {
        let work = try TemporaryDirectory(prefix: "cairn-sign-cli-bad")
        defer { work.remove() }
        let source = try Self.source(work)
        try RawFileSystem.writeFile(Array(work.appending("junk.sec").utf8), Array("not a key\n".utf8))
        // A secret file (`Spec/0004 §2.2`): one others may read is refused before it is parsed.
        chmod(work.appending("junk.sec"), 0o600)
        for keyFile in [work.appending("missing.sec"), work.appending("junk.sec")] {
            let result = try FetchCLI.run(["create", "-q", "--sign", keyFile, "-o", work.appending("x.cairn"), "data"], in: source)
            #expect(result.status == 1 && result.stderr.contains(keyFile), "\(result.stderr)")
            #expect(!RawFileSystem.exists(Array(work.appending("x.cairn").utf8)))
            #expect(!RawFileSystem.exists(Array(work.appending("x.cairn.partial").utf8)))
        }
    }

    @Test("§3.5: create -o s3:// --sign uploads the signed archive a local create --sign writes; an abandoned signed upload resumes byte-identical")
    func signedUploadAndResume() async throws { try await onDedicatedThread { try Self().signedUploadAndResumeOnThread() } }

    func signedUploadAndResumeOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-sign-s3")
        defer { work.remove() }
        let server = try RcloneS3Server()
        defer { server.stop() }
        let source = work.appending("src")
        try ObjectStoreTests.tree(seed: 25, count: 10).materialize(at: source)
        let (_, sec) = try Self.minisignKeys(in: work.path, name: "maker")
        let local = work.appending("local.cairn")
        try #require(try FetchCLI.run(["create", "-q", "--sign", sec, "-o", local, "data"], in: source).status == 0)
        let localBytes = try RawFileSystem.contents(ofFile: Array(local.utf8))
        let uploaded = try ObjectStoreTests.cli(["create", "-q", "--sign", sec, "-o", "s3://cairn/s.cairn", "data"], in: source, server)
        #expect(uploaded.status == 0, "\(uploaded.stderr)")
        try FetchTests.expectSame(server.objectPath(key: "s.cairn"), localBytes)

        // An upload abandoned after some parts, resumed with the same key (Archiver on the sink).
        let key = try SigningKey.read(secretKeyFile: sec, password: nil)
        let location = try S3Location(parsing: "s3://cairn/r.cairn")
        let configuration = try ObjectStoreTests.configuration(server)
        let statePath = work.appending("r.state")
        var archiverConfiguration = Archiver.Configuration()
        archiverConfiguration.sourcePaths = [Array("data".utf8)]
        archiverConfiguration.signingKey = key
        let settings = archiverConfiguration
        try blockingAsync {
            let first = try ObjectStoreSink(location: location, configuration: configuration, statePath: statePath)
            let archiver = try Archiver(sink: first, configuration: settings)
            try await archiver.appendItem(atPath: Array((source + "/data").utf8), pathInArchive: Array("data".utf8))
            await archiver.abandon()
            #expect(first.uploadedBytes >= 8 << 20, "at least one part reached the store")
        }
        try blockingAsync {
            let resumed = try ObjectStoreSink(resuming: location, configuration: configuration, statePath: statePath)
            let archiver = try Archiver(sink: resumed, configuration: settings)
            try await archiver.appendItem(atPath: Array((source + "/data").utf8), pathInArchive: Array("data".utf8))
            _ = try await archiver.finish()
            #expect(resumed.keptBytes > 0)
        }
        try FetchTests.expectSame(server.objectPath(key: "r.cairn"), localBytes)
    }
}
