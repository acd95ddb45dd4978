import CairnTestSupport
import Foundation
import Testing

@testable import Cairn

/// The extraction of an unkeyed encrypted stream (`create --recipient` alone: random chunk keys)
/// cut short, then continued (`Spec/0004-trusted-archives.md §6.9`, "Streams";
/// `Spec/0003-command-line.md §4.1`): from the whole stream again and from the file.
@Suite("Encrypted streams: extract --resume", .serialized)
struct EncryptedStreamResumeTests {
    @Test("§6.9: cat x | extract - --identity cut at a block boundary, inside a block, or inside the envelope, then extract --resume (the stream again, or the file): the tree it was made from")
    func unkeyedStreamResumes() throws {
        let work = try TemporaryDirectory(prefix: "cairn-sealed-stream-resume")
        defer { work.remove() }
        let (archive, bytes, identity, block) = try EncryptedDamageCommandLineTests.archive(work)
        // The tree `archive(_:)` made it of (`SealedResumeCommandLineTests.source(_:)`).
        let whole = try TreeSnapshot(at: work.appending("src") + "/data", directoryTimes: false)
        let cuts = [100, block(120), block(120) + 5000, bytes.count * 2 / 3]
        for (index, cut) in cuts.enumerated() {
            for fromFile in [false, true] {
                let destination = work.appending("out-\(index)-\(fromFile)")
                let piece = work.appending("piece.cairn")
                try RawFileSystem.writeFile(Array(piece.utf8), Array(bytes[0..<cut]))
                let first = try TrustedStreamResumeTests.piped(piece, ["extract", "-q", "--identity", identity, "-", "-C", destination], in: work.path)
                #expect(first.status == 1, "cut at \(cut): \(first.stderr)")
                let resumed =
                    fromFile
                    ? try FetchCLI.run(["extract", "-q", "--resume", "--identity", identity, archive, "-C", destination], in: work.path)
                    : try TrustedStreamResumeTests.piped(
                        archive, ["extract", "-q", "--resume", "--identity", identity, "-", "-C", destination], in: work.path)
                #expect(resumed.status == 0, "cut at \(cut), from the file: \(fromFile): \(resumed.stderr)")
                let got = try TreeSnapshot(at: destination + "/data", directoryTimes: false)
                #expect(got == whole, "cut at \(cut): \(got.diff(whole))")
            }
        }
    }
}
