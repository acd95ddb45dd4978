import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import Cairn

/// Secret key files as careful tools treat them (`Spec/0004-trusted-archives.md §2.2` "Secret
/// files", §6.4.4, §6.5): one that its group or others may read is refused as ssh refuses one
/// ("permissions 0644 for KEY are too open", exit 2), unless it is a pipe.
@Suite("Secret key files: permissions", .serialized)
struct SecretKeyFileTests {
    /// A minisign key pair, an age identity, a maker key and an encrypted archive made with them, in `work`.
    struct Keys {
        var pub: String
        var sec: String
        var identity: String
        var recipient: String
        var maker: String
        var archive: String
        var source: String
    }

    static func keys(_ work: TemporaryDirectory) throws -> Keys {
        let (pub, sec) = try SignedCreateCommandLineTests.minisignKeys(in: work.path, name: "maker")
        let (identity, recipient) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "me")
        let maker = work.appending("maker.key")
        let generated = try FetchCLI.run(["key", "generate", "--maker", maker])
        try #require(generated.status == 0, "\(generated.stderr)")
        let source = work.appending("src")
        try FetchTests.tree(seed: 5, count: 4).materialize(at: source)
        let archive = work.appending("e.cairn")
        let created = try FetchCLI.run(["create", "-q", "--recipient", recipient, "--sign", sec, "-o", archive, "."], in: source)
        try #require(created.status == 0, "\(created.stderr)")
        return Keys(pub: pub, sec: sec, identity: identity, recipient: recipient, maker: maker, archive: archive, source: source)
    }

    @Test(
        "§2.2, §6.4.4, §6.5: a secret key, identity or maker key file its group or others may read is refused as ssh does (exit 2, naming it and its mode), by every command; 0600 and a pipe are taken",
        arguments: [0o644, 0o640, 0o604])
    func openSecretFiles(mode: Int) throws {
        let work = try TemporaryDirectory(prefix: "cairn-secret-mode")
        defer { work.remove() }
        let keys = try Self.keys(work)
        let modeText = String(mode, radix: 8)
        let runs: [(file: String, arguments: [String])] = [
            (keys.sec, ["create", "-q", "--sign", keys.sec, "-o", work.appending("s.cairn"), keys.source]),
            (keys.sec, ["sign", "-s", keys.sec, keys.archive]),
            (keys.identity, ["verify", "--identity", keys.identity, keys.archive]),
            (keys.identity, ["list", "--identity", keys.identity, keys.archive]),
            (keys.identity, ["extract", "-q", "--identity", keys.identity, keys.archive, "-C", work.appending("out")]),
            (keys.maker, ["create", "-q", "--recipient", keys.recipient, "--maker-key", keys.maker, "-o", work.appending("m.cairn"), keys.source]),
        ]
        for (file, arguments) in runs {
            #expect(chmod(file, mode_t(mode)) == 0)
            let refused = try FetchCLI.run(arguments)
            #expect(refused.status == 2, "\(arguments): \(refused.stderr)")
            #expect(refused.stderr.contains("permissions 0\(modeText) for '\(file)' are too open"), "\(refused.stderr)")
            #expect(chmod(file, 0o600) == 0)
        }
        #expect(!RawFileSystem.exists(Array(work.appending("s.cairn").utf8)) && !RawFileSystem.exists(Array(work.appending("out").utf8)))
        #expect(!RawFileSystem.exists(Array((keys.archive + ".minisig").utf8)))

        // 0600: taken. A pipe (here `cat FILE |` into /dev/stdin, FILE 0644) is not a file to protect.
        let verified = try FetchCLI.run(["verify", "--identity", keys.identity, "--trusted-key", keys.pub, keys.archive])
        #expect(verified.status == 0, "\(verified.stderr)")
        let copy = work.appending("identity-copy.txt")
        try RawFileSystem.writeFile(Array(copy.utf8), try FetchTests.bytes(keys.identity))
        #expect(chmod(copy, mode_t(mode)) == 0)
        let piped = try TrustedStreamResumeTests.piped(copy, ["verify", "--identity", "/dev/stdin", keys.archive], in: work.path)
        #expect(piped.status == 0, "\(piped.stderr)")

        // The library says the same (`.invalidArgument` naming the file).
        #expect(chmod(keys.identity, mode_t(mode)) == 0)
        let error = #expect(throws: CairnError.self) { _ = try AgeIdentity.readIdentities(fromFile: keys.identity) }
        #expect(error?.code == .invalidArgument && error?.path == keys.identity, "\(String(describing: error))")
        #expect(chmod(keys.sec, mode_t(mode)) == 0)
        #expect(throws: CairnError.self) { _ = try SigningKey.read(secretKeyFile: keys.sec, password: nil) }
    }
}
