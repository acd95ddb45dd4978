import CairnTestSupport
import Foundation
import Testing

@testable import Cairn

/// The last sealed block of an encrypted archive altered (`Spec/0004-trusted-archives.md §6.3`,
/// "Opening" item 1): damage at its outer offset, told alone by every reader, never the account
/// of a cut to resume.
@Suite("Encrypted archives: an altered last block (command line)", .serialized)
struct AlteredLastBlockTests {
    @Test("§6.3: an altered last sealed block is reported by verify, extract and extract - as authentication failed at its outer offset: not as a cut, and no resume suggested")
    func alteredLastBlock() throws {
        let work = try TemporaryDirectory(prefix: "cairn-sealed-altered-last")
        defer { work.remove() }
        let (_, bytes, identity, block) = try EncryptedDamageCommandLineTests.archive(work)
        let (record, dataStart) = try EncryptedInfoDiffCommandLineTests.envelope(of: work.appending("e.cairn"))
        let sealed = Int(record.blockSize) + BlockSealer.overhead
        let last = (bytes.count - dataStart - 1) / sealed
        // Long enough to hold the footer (`Spec/0004 §6.3` "Opening" item 1: the writer's last block).
        try #require(last > 1 && bytes.count - block(last) - BlockSealer.overhead >= Footer.framedLength)
        // A byte of its ciphertext, and a byte of its tag.
        for (name, at) in [("text", block(last) + BlockSealer.nonceByteCount + 3), ("tag", bytes.count - 2)] {
            var altered = bytes
            altered[at] ^= 0x20
            let copy = work.appending("last-\(name).cairn")
            try RawFileSystem.writeFile(Array(copy.utf8), altered)
            let runs = [
                try FetchCLI.run(["verify", "--identity", identity, copy], in: work.path),
                try FetchCLI.run(["extract", "-q", "--identity", identity, copy, "-C", work.appending("x-\(name)")], in: work.path),
                try TrustedStreamResumeTests.piped(
                    copy, ["extract", "-q", "--identity", identity, "-", "-C", work.appending("s-\(name)")], in: work.path),
            ]
            for run in runs {
                #expect(run.status == 1, "\(name): \(run.stderr)")
                #expect(run.stderr.contains("sealed block \(last) fails authentication") && run.stderr.contains("offset \(block(last))"), "\(name): \(run.stderr)")
                for misleading in ["--resume", "truncated", "ends after sealed block", "cut after", "too short", "--partial"] {
                    #expect(!run.stderr.contains(misleading), "\(name): \(run.stderr)")
                }
            }
            #expect(!FileManager.default.fileExists(atPath: work.appending("x-\(name)")))
            #expect(!FileManager.default.fileExists(atPath: work.appending("s-\(name)")))
        }
    }
}
