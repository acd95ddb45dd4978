import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import Cairn

/// `--identity -`: the identity file read from standard input, as `age -i -` does
/// (`Spec/0003-command-line.md §14.5`), where the archive itself is not read from it.
@Suite("--identity - (standard input)", .serialized)
struct IdentityFromStandardInputTests {
    @Test("§14.5: --identity - reads the identities from standard input (a pipe) for verify, list and extract; with the archive on standard input too, or given twice, it is a usage error (exit 2), nothing written")
    func identityFromStandardInput() throws {
        let work = try TemporaryDirectory(prefix: "cairn-identity-stdin")
        defer { work.remove() }
        let (identity, recipient) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "me")
        let source = work.appending("src")
        try FetchTests.tree(seed: 9, count: 3).materialize(at: source)
        let archive = work.appending("e.cairn")
        let created = try FetchCLI.run(["create", "-q", "--recipient", recipient, "-o", archive, "."], in: source)
        try #require(created.status == 0, "\(created.stderr)")

        let verified = try TrustedStreamResumeTests.piped(identity, ["verify", "--identity", "-", archive], in: work.path)
        #expect(verified.status == 0, "\(verified.stderr)")
        let listed = try TrustedStreamResumeTests.piped(identity, ["list", "--identity", "-", archive], in: work.path)
        #expect(listed.status == 0 && listed.stdout.contains("data/f0.bin"), "\(listed.stderr)")
        let out = work.appending("out")
        let extracted = try TrustedStreamResumeTests.piped(identity, ["extract", "-q", "--identity", "-", archive, "-C", out], in: work.path)
        #expect(extracted.status == 0, "\(extracted.stderr)")
        let a = try TreeSnapshot(at: out, directoryTimes: false)
        let b = try TreeSnapshot(at: source, directoryTimes: false)
        #expect(a == b, "\(a.diff(b))")
        // A stranger's identity on standard input: refused as from a file.
        let (stranger, _) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "stranger")
        let refused = try TrustedStreamResumeTests.piped(stranger, ["verify", "--identity", "-", archive], in: work.path)
        #expect(refused.status == 1 && refused.stderr.contains("no identity matches"), "\(refused.stderr)")

        // Both on standard input, or - twice: usage errors, before anything is read or written.
        let both = work.appending("both")
        for arguments in [
            ["extract", "-q", "--identity", "-", "-", "-C", both], ["verify", "--identity", "-", "-"],
            ["verify", "--identity", "-", "--identity", "-", archive],
        ] {
            let result = try TrustedStreamResumeTests.piped(archive, arguments, in: work.path)
            #expect(result.status == 2 && result.stderr.contains("standard input"), "\(arguments): \(result.stderr)")
        }
        #expect(!RawFileSystem.exists(Array(both.utf8)))
    }
}
