import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import Cairn

/// A key of all zero bytes is refused wherever a key is taken (`Spec/0004-trusted-archives.md
/// §2.2` "All-zero keys"): no generator makes one; an empty buffer or a broken file does.
@Suite("All-zero keys")
struct AllZeroKeyTests {
    @Test("§2.2, §6.4, §6.5: a key of all zero bytes is refused wherever a key is taken: maker key (bytes and file), age identity and recipient, Ed25519 seed, secret key and public key")
    func allZeroKeys() throws {
        let zero = [UInt8](repeating: 0, count: 32)
        let refusals: [(String, () throws -> Void)] = [
            ("maker key", { _ = try MakerKey(secretBytes: zero) }),
            ("maker key file", { _ = try MakerKey(fileText: MakerKey.fileTag + " " + Base64.encode(zero) + "\n") }),
            ("age identity", { _ = try AgeIdentity(secretBytes: zero) }),
            ("age recipient", { _ = try AgeRecipient(rawBytes: zero) }),
            ("Ed25519 seed", { _ = try SigningKey(keyID: SigningKeyID(bytes: Array("ZEROKEY!".utf8)), seed: zero) }),
            ("Ed25519 public key", { _ = try PublicKey(keyID: SigningKeyID(bytes: Array("ZEROKEY!".utf8)), rawBytes: zero) }),
        ]
        for (what, make) in refusals {
            do {
                try make()
                Issue.record("an all-zero \(what) was taken")
            } catch let error as CairnError {
                #expect(error.code == .invalidArgument && error.message.contains("all zero"), "\(what): \(error)")
            }
        }
        // A key with one byte set is taken.
        var one = zero
        one[31] = 1
        _ = try MakerKey(secretBytes: one)
        _ = try AgeIdentity(secretBytes: one)

        // On the command line: create --maker-key with an all-zero key file: exit 1 naming it, nothing written.
        let work = try TemporaryDirectory(prefix: "cairn-zero-key")
        defer { work.remove() }
        let (_, recipient) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "me")
        let file = work.appending("zero.key")
        try SmallFile.write(Array((MakerKey.fileTag + " " + Base64.encode(zero) + "\n").utf8), to: file, mode: 0o600, replacing: false)
        try FetchTests.tree(seed: 6, count: 2).materialize(at: work.appending("src"))
        let out = work.appending("z.cairn")
        let result = try FetchCLI.run(["create", "-q", "--recipient", recipient, "--maker-key", file, "-o", out, "."], in: work.appending("src"))
        #expect(result.status == 1 && result.stderr.contains(file) && result.stderr.contains("all zero"), "\(result.stderr)")
        #expect(!RawFileSystem.exists(Array(out.utf8)))
    }
}
