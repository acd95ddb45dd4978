import CairnTestSupport
import Foundation
import Glibc
import Testing

import Cairn

/// A resumed fetch reads its partial file once (issue 10): the verifier that finds the partial's
/// last valid commit goes on from there with the server's bytes, so the prefix is neither read
/// nor checked twice, and bytes that do not continue it (another archive, a prefix damaged on
/// disk) still fail.
@Suite("Fetch: one pass over the partial file")
struct FetchPrefixTests {
    /// An archive of ``FetchTests/tree(seed:count:contentSeed:)`` made in process: its bytes.
    static func archive(seed: UInt64, contentSeed: UInt64? = nil, in work: TemporaryDirectory, name: String) async throws -> [UInt8] {
        let source = work.appending("src-" + name)
        try FetchTests.tree(seed: seed, count: 24, contentSeed: contentSeed).materialize(at: source)
        return try await RoundTrip.archive(path: source, to: work.appending(name + ".cairn")).bytes
    }

    /// Verifies `partial` as a fetch's rerun does: returns the outcome, the bytes read, and the
    /// verifier to go on with.
    static func readPrefix(_ partial: [UInt8], at path: String, trusting trusted: UInt64 = 0) async throws
        -> (StreamVerifier.PrefixOutcome, UInt64, StreamVerifier)
    {
        try RawFileSystem.writeFile(Array(path.utf8), partial)
        let input = try FileDescriptor.open(path, flags: O_RDONLY)
        defer { _ = try? input.close() }
        let verifier = StreamVerifier(path: path, trustingContentBelow: trusted, keying: nil)
        let outcome = try await verifier.readPrefix(from: input)
        return (outcome, verifier.prefixBytesRead, verifier)
    }

    @Test("the one hold-until-commit rule ends every cut prefix where verifyPrefix does: a 1.x archive, and a 2.0 one checked on every core or one record at a time")
    func prefixRuleAcrossReaders() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-fetch-prefix-rule")
        defer { work.remove() }
        let version1 = try GoldenArchive.fixtureBytes()
        let version2 = try await Self.archive(seed: 47, in: work, name: "b")
        let path = work.appending("p.partial")
        var generator = SeededGenerator(seed: 0x9_1E5C)
        for (name, bytes) in [("1.x", version1), ("2.0", version2)] {
            var cuts = [bytes.count - 1, bytes.count]
            for _ in 0..<10 { cuts.append(Int.random(in: 1..<bytes.count, using: &generator)) }
            for cut in cuts {
                try RawFileSystem.writeFile(Array(path.utf8), Array(bytes[0..<cut]))
                let expected = try await Extractor.verifyPrefix(at: .file(path: path)).verifiedLength
                for onEveryCore in [true, false] {
                    let input = try FileDescriptor.open(path, flags: O_RDONLY)
                    defer { _ = try? input.close() }
                    let outcome = try await StreamVerifier(path: path, keying: nil, checkingOnEveryCore: onEveryCore).readPrefix(from: input)
                    switch outcome {
                    case .continuing(let at), .complete(let at):
                        #expect(at == expected, "\(name) cut at \(cut), on every core: \(onEveryCore)")
                    case .unusable(let at):
                        #expect(at == 0 && expected == 0, "\(name) cut at \(cut), on every core: \(onEveryCore): \(outcome)")
                    }
                    if cut == bytes.count, case .complete = outcome {} else if cut == bytes.count {
                        Issue.record("\(name): the whole archive is complete, not \(outcome)")
                    }
                }
            }
        }
    }

    @Test("a cut partial is read once, ends at the last commit verifyPrefix finds, and the bytes after it complete the same verification")
    func resumesAtTheLastCommit() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-fetch-prefix")
        defer { work.remove() }
        let bytes = try await Self.archive(seed: 31, in: work, name: "a")
        let whole = try await Extractor.verify(input: BytesInput(bytes[...]), path: "whole", keying: nil)
        let path = work.appending("a.partial")
        var generator = SeededGenerator(seed: 0x0E_9A55)
        var cuts = [0, 5, bytes.count - 1]
        for _ in 0..<12 { cuts.append(Int.random(in: 0..<bytes.count, using: &generator)) }
        for cut in cuts {
            let partial = Array(bytes[0..<cut])
            let (outcome, read, verifier) = try await Self.readPrefix(partial, at: path)
            // The one pass reads the partial file once: its size, no more.
            #expect(read == UInt64(cut), "cut at \(cut)")
            let expected = try await Extractor.verifyPrefix(at: .file(path: path)).verifiedLength
            let start: UInt64
            switch outcome {
            case .continuing(let at):
                #expect(at == expected && at > 0, "cut at \(cut)")
                start = at
            case .unusable(let at):
                #expect(at == 0 && expected == 0, "cut at \(cut): \(outcome)")
                start = 0
            case .complete:
                Issue.record("cut at \(cut): a cut archive is not complete")
                continue
            }
            let rest = start > 0 ? verifier : StreamVerifier(path: path, keying: nil)
            let report = try await rest.verify(BytesInput(bytes[Int(start)...]))
            #expect(report == whole, "cut at \(cut)")
        }
        // The whole archive as the partial: complete, checked without another byte.
        let (outcome, read, verifier) = try await Self.readPrefix(bytes + [1, 2, 3], at: path)
        #expect(outcome == .complete(at: UInt64(bytes.count)))
        #expect(read == UInt64(bytes.count + 3))
        #expect(try await verifier.finish() == whole)
    }

    @Test("after the prefix, another archive's bytes fail at the first commit (never spliced); a prefix damaged on disk ends before the damage")
    func refusesWhatDoesNotContinueIt() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-fetch-prefix-other")
        defer { work.remove() }
        let bytes = try await Self.archive(seed: 32, in: work, name: "a")
        // The same tree and names, other contents: the same layout, other chain digests.
        let other = try await Self.archive(seed: 32, contentSeed: 99, in: work, name: "b")
        let path = work.appending("a.partial")
        let cut = bytes.count / 2
        let (outcome, _, verifier) = try await Self.readPrefix(Array(bytes[0..<cut]), at: path)
        guard case .continuing(let start) = outcome else {
            Issue.record("\(outcome)")
            return
        }
        #expect(other.count > Int(start))
        do {
            _ = try await verifier.verify(BytesInput(other[Int(start)...]))
            Issue.record("another archive's bytes verified after the prefix")
        } catch let error as CairnError {
            #expect(error.code == .checksumMismatch || error.code == .corrupted, "\(error)")
            #expect((error.offset ?? 0) >= start, "\(error)")
        }

        // One byte of a chunk's payload changed on disk: that record's CRC-32 fails, so the prefix
        // ends at the commit before it, and the archive's own bytes after that complete it.
        let whole = try await Extractor.verify(input: BytesInput(bytes[...]), path: "whole", keying: nil)
        var damaged = Array(bytes[0..<cut])
        let at = cut / 2
        damaged[at] ^= 0x55
        let (second, read, resumed) = try await Self.readPrefix(damaged, at: path)
        guard case .continuing(let end) = second else {
            Issue.record("\(second)")
            return
        }
        #expect(end <= UInt64(at))
        #expect(read <= UInt64(cut))
        #expect(try await resumed.verify(BytesInput(bytes[Int(end)...])) == whole)
    }

    @Test("a prefix changed on disk with its CRC-32 kept fails its next commit: read again up to the commit before, then continued")
    func changedWithItsCRC() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-fetch-prefix-changed")
        defer { work.remove() }
        let bytes = try await Self.archive(seed: 33, in: work, name: "a")
        let whole = try await Extractor.verify(input: BytesInput(bytes[...]), path: "whole", keying: nil)
        let path = work.appending("a.partial")
        let cut = bytes.count * 3 / 4
        // A chunk changed with its CRC-32 recomputed: only the chain digest of the commit after it
        // (or the chunk's id) finds it.
        let layout = try await Extractor(at: .file(path: work.appending("a.cairn")))
        defer { layout.close() }
        let chunk = try #require(layout.reader.manifest.chunks.last { $0.pack == nil && Int($0.offset) < cut / 2 })
        var changed = Array(bytes[0..<cut])
        let payloadEnd = Int(chunk.offset) + RecordFraming.headerLength + ChunkRecordPrefix.length + Int(chunk.storedLength)
        changed[payloadEnd - 1] ^= 0x01
        let crc = changed[Int(chunk.offset)..<payloadEnd].withUnsafeBytes { CRC32.checksum($0) }
        for index in 0..<4 { changed[payloadEnd + index] = UInt8(truncatingIfNeeded: crc >> (8 * index)) }
        let (outcome, read, _) = try await Self.readPrefix(changed, at: path)
        let expected = try await Extractor.verifyPrefix(at: .file(path: path)).verifiedLength
        #expect(expected > 0 && expected <= chunk.offset)
        #expect(outcome == .unusable(verifiedUpTo: expected))
        #expect(read <= UInt64(cut))
        // Cut there, the file reads to its end cleanly, and the archive's bytes after it complete it.
        let (again, _, verifier) = try await Self.readPrefix(Array(changed[0..<Int(expected)]), at: path)
        #expect(again == .continuing(at: expected))
        #expect(try await verifier.verify(BytesInput(bytes[Int(expected)...])) == whole)
    }
}

/// An archive's bytes as a ``ByteInput``, handed out in pieces of at most 100,000 bytes.
final class BytesInput: ByteInput {
    private let bytes: ArraySlice<UInt8>
    private var position: Int

    init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        position = bytes.startIndex
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws(CairnError) -> Int {
        let n = min(buffer.count, bytes.endIndex - position, 100_000)
        guard n > 0, let base = buffer.baseAddress else { return 0 }
        bytes[position..<(position + n)].withUnsafeBytes { source in
            guard let from = source.baseAddress else { return }
            base.copyMemory(from: from, byteCount: n)
        }
        position += n
        return n
    }
}
