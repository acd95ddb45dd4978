import CairnTestSupport
import Foundation
import Testing

@testable import Cairn

/// minisign's key and signature files, with Debian's `minisign` 0.11 as the oracle
/// (`Spec/0004-trusted-archives.md §2`).
@Suite("minisign keys and signatures")
struct MinisignTests {
    /// Runs `minisign arguments` with `input` on its standard input (minisign reads passwords
    /// there when it is not a terminal).
    static func minisign(_ arguments: [String], input: String = "", in directory: TemporaryDirectory) throws
        -> ChildProcess.Result
    {
        let inputFile = directory.appending(".minisign-input-\(UUID().uuidString)")
        try Data(input.utf8).write(to: URL(fileURLWithPath: inputFile))
        defer { unlink(inputFile) }
        return try ChildProcess.run(
            URL(fileURLWithPath: minisignPath), arguments, in: directory.path, standardInput: inputFile)
    }

    static let minisignPath = "/usr/bin/minisign"
    static let minisignMissing = !FileManager.default.isExecutableFile(atPath: minisignPath)
    static let skipReason: Comment = "Debian's minisign is not installed (make deps installs it)"

    static func text(_ path: String) throws -> String {
        try String(contentsOfFile: path, encoding: .utf8)
    }

    @Test(
        "Spec/0004-trusted-archives.md §2.1, §2.2: keys made by minisign -G -W load, and the public halves agree",
        .disabled(if: minisignMissing, skipReason))
    func minisignKeysWithoutPassword() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let result = try Self.minisign(["-G", "-W", "-p", "k.pub", "-s", "k.key"], in: directory)
        #expect(result.status == 0, "\(result.stderr)")
        let publicKeys = try PublicKey.readKeys(fromFile: directory.appending("k.pub"))
        #expect(publicKeys.count == 1)
        #expect(try !SigningKey.secretKeyFileNeedsPassword(directory.appending("k.key")))
        let key = try SigningKey.read(secretKeyFile: directory.appending("k.key"), password: nil)
        #expect(key.publicKey == publicKeys.first)
        // The comment line names the id as minisign prints it.
        #expect(try Self.text(directory.appending("k.pub")).hasPrefix("untrusted comment: minisign public key \(key.keyID)\n"))
    }

    @Test(
        "Spec/0004-trusted-archives.md §2.2: a key made by minisign -G with a password loads with it, and a wrong password is refused by name",
        .disabled(if: minisignMissing, skipReason))
    func minisignKeyWithPassword() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let result = try Self.minisign(["-G", "-p", "k.pub", "-s", "k.key"], input: "correct horse\ncorrect horse\n", in: directory)
        #expect(result.status == 0, "\(result.stderr)")
        let path = directory.appending("k.key")
        #expect(try SigningKey.secretKeyFileNeedsPassword(path))
        let key = try SigningKey.read(secretKeyFile: path, password: Array("correct horse".utf8))
        #expect(try [key.publicKey] == PublicKey.readKeys(fromFile: directory.appending("k.pub")))
        let wrong = #expect(throws: CairnError.self) {
            try SigningKey.read(secretKeyFile: path, password: Array("correct horsf".utf8))
        }
        #expect(wrong?.code == .invalidArgument)
        #expect(wrong?.description == "\(path): wrong password for secret key")
        #expect(throws: CairnError.self) { try SigningKey.read(secretKeyFile: path, password: nil) }
    }
}
