import CairnTestSupport
import Foundation
import Testing

@testable import Cairn

/// An encrypted archive cut or altered, read through the executable with an `age-keygen`
/// identity: `info` of an interrupted create's `.partial`, `verify --partial` of a copy with an
/// altered block, and the message a reader gives for an altered block
/// (`Spec/0004-trusted-archives.md §6.3`, §6.9; `Spec/0003-command-line.md §6`).
@Suite("Encrypted archives: cut and altered copies (command line)", .serialized)
struct EncryptedDamageCommandLineTests {
    /// An encrypted archive of ``SealedResumeCommandLineTests/source(_:)``, its bytes, the identity
    /// file, and the outer offset of sealed block `index` (`Spec/0004 §6.2`).
    static func archive(_ work: TemporaryDirectory) throws -> (path: String, bytes: [UInt8], identity: String, block: (Int) -> Int) {
        let source = try SealedResumeCommandLineTests.source(work)
        let (identity, recipient) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "me")
        let archive = work.appending("e.cairn")
        let created = try FetchCLI.run(["create", "-q", "--recipient", recipient, "-o", archive, "data"], in: source)
        try #require(created.status == 0, "\(created.stderr)")
        let (record, dataStart) = try EncryptedInfoDiffCommandLineTests.envelope(of: archive)
        let sealed = Int(record.blockSize) + BlockSealer.overhead
        return (archive, try RawFileSystem.contents(ofFile: Array(archive.utf8)), identity, { dataStart + $0 * sealed })
    }

    @Test("Spec/0003 §6, Spec/0004 §6.9: info --identity of an encrypted .partial prints what is committed (inner lengths), exit 0, as for a plain one")
    func infoOfEncryptedPartial() throws {
        let work = try TemporaryDirectory(prefix: "cairn-sealed-info-partial")
        defer { work.remove() }
        let (_, bytes, identity, block) = try Self.archive(work)
        let partial = work.appending("p.cairn.partial")
        // Cut at a block boundary (as an interrupted create leaves it) and inside a block.
        for cut in [block(300), block(300) + 777] {
            try RawFileSystem.writeFile(Array(partial.utf8), Array(bytes[0..<cut]))
            let text = try FetchCLI.run(["info", "--identity", identity, partial], in: work.path)
            #expect(text.status == 0, "\(text.stderr)")
            #expect(text.stdout.contains("complete:          no") && text.stdout.contains("inner offsets"), "\(text.stdout)")
            #expect(text.stdout.contains("continue it with:  cairn create --resume"), "\(text.stdout)")
            let json = try FetchCLI.run(["info", "--json", "--identity", identity, partial], in: work.path)
            #expect(json.status == 0, "\(json.stderr)")
            let object = try EncryptedInfoDiffCommandLineTests.json(json.stdout)
            #expect(object["complete"] as? Bool == false && object["encrypted"] as? Bool == true, "\(object)")
            let length = try #require((object["verifiedLength"] as? NSNumber)?.intValue)
            let verified = try FetchCLI.run(["verify", "--partial", "--json", "--identity", identity, partial], in: work.path)
            let reference = try EncryptedInfoDiffCommandLineTests.json(verified.stdout)
            #expect(length > 0 && (reference["verifiedLength"] as? NSNumber)?.intValue == length, "\(object) \(reference)")
        }
    }

    @Test("Spec/0004 §6.9: verify --partial --identity of a full-length copy with an altered block exits 0 with the prefix before it, as a cut copy with that block altered does")
    func verifyPartialFullLengthAlteredBlock() throws {
        let work = try TemporaryDirectory(prefix: "cairn-sealed-altered-partial")
        defer { work.remove() }
        let (_, bytes, identity, block) = try Self.archive(work)
        let copy = work.appending("copy.cairn")
        // Block 5 lies inside the first large read of the inner archive; block 100 after it.
        for index in [5, 100] {
            var lengths: [Int] = []
            for end in [bytes.count, bytes.count * 3 / 4] {
                var altered = Array(bytes[0..<end])
                altered[block(index) + 500] ^= 0x01
                try RawFileSystem.writeFile(Array(copy.utf8), altered)
                let result = try FetchCLI.run(["verify", "--partial", "--json", "--identity", identity, copy], in: work.path)
                #expect(result.status == 0, "\(index) \(end): \(result.stderr)")
                let object = try EncryptedInfoDiffCommandLineTests.json(result.stdout)
                #expect(object["complete"] as? Bool == false, "\(object)")
                #expect((object["stopReason"] as? String)?.contains("sealed block \(index) fails authentication") == true, "\(object)")
                lengths.append(try #require((object["verifiedLength"] as? NSNumber)?.intValue))
            }
            #expect(lengths[0] > 0 && lengths[0] == lengths[1], "\(index): \(lengths)")
        }
    }

    @Test("Spec/0004 §6.3: an altered block is reported alone by verify, extract and extract -: not as a cut, and no resume suggested")
    func alteredBlockMessageIsTheBlocks() throws {
        let work = try TemporaryDirectory(prefix: "cairn-sealed-altered-message")
        defer { work.remove() }
        let (_, bytes, identity, block) = try Self.archive(work)
        for index in [0, 5] {
            var altered = bytes
            altered[block(index) + 100] ^= 0x01
            let copy = work.appending("blk\(index).cairn")
            try RawFileSystem.writeFile(Array(copy.utf8), altered)
            let runs = [
                try FetchCLI.run(["verify", "--identity", identity, copy], in: work.path),
                try FetchCLI.run(["extract", "-q", "--identity", identity, copy, "-C", work.appending("x\(index)")], in: work.path),
                try TrustedStreamResumeTests.piped(
                    copy, ["extract", "-q", "--identity", identity, "-", "-C", work.appending("s\(index)")], in: work.path),
            ]
            for run in runs {
                #expect(run.status == 1 && run.stderr.contains("sealed block \(index) fails authentication"), "\(index): \(run.stderr)")
                for misleading in ["--resume", "too short", "incomplete", "ends inside", "--partial"] {
                    #expect(!run.stderr.contains(misleading), "\(index): \(run.stderr)")
                }
            }
            #expect(!FileManager.default.fileExists(atPath: work.appending("x\(index)")))
            #expect(!FileManager.default.fileExists(atPath: work.appending("s\(index)")))
        }
    }
}
