import CairnTestSupport
import Foundation
import Testing

import Cairn

/// A verifier that reads records out of blocks and checks them on every core
/// (``CheckedRecordStream``) means what the one that reads them one at a time means: same report,
/// same first error (code, offset, message), wherever the blocks' ends cut the records.
@Suite("Checked record stream")
struct CheckedRecordStreamTests {
    /// Hands `bytes` over in blocks of seeded sizes: mostly 1 B to 40 KiB, some shorter than a
    /// record header, so that block ends cut headers, chunk prefixes and payloads.
    final class SlicedBlocks: ByteInput, ByteBlockSource {
        private let bytes: [UInt8]
        private var position = 0
        private var generator: SeededGenerator
        private var handedOut = 0

        init(_ bytes: [UInt8], seed: UInt64) {
            self.bytes = bytes
            generator = SeededGenerator(seed: seed)
        }

        private func nextSize() -> Int {
            Bool.random(using: &generator) ? Int.random(in: 1...7, using: &generator) : Int.random(in: 1...(40 << 10), using: &generator)
        }

        func read(into buffer: UnsafeMutableRawBufferPointer) throws(CairnError) -> Int {
            let n = min(buffer.count, bytes.count - position, nextSize())
            guard n > 0, let base = buffer.baseAddress else { return 0 }
            bytes[position..<(position + n)].withUnsafeBytes { source in
                if let from = source.baseAddress { base.copyMemory(from: from, byteCount: n) }
            }
            position += n
            return n
        }

        func nextBlock() async throws -> ByteBlock? {
            let n = min(bytes.count - position, nextSize())
            guard n > 0 else { return nil }
            let block = ByteBlock(capacity: n)
            _ = bytes[position..<(position + n)].withUnsafeBytes { block.append($0) }
            position += n
            handedOut += 1
            return block
        }

        func recycle(_ block: ByteBlock) { handedOut -= 1 }
        var hasBlockReady: Bool { true }
        /// Blocks handed out and not given back.
        var outstanding: Int { handedOut }
    }

    private static func outcome(_ bytes: [UInt8], seed: UInt64, onEveryCore: Bool) async -> String {
        let input: any ByteInput = onEveryCore ? SlicedBlocks(bytes, seed: seed) : BytesInput(bytes[...])
        do {
            let report = try await StreamVerifier(path: "a", keying: nil, checkingOnEveryCore: onEveryCore).verify(input)
            return "ok \(report)"
        } catch let error as CairnError {
            return "\(error.code) at \(error.offset.map(String.init) ?? "-"): \(error.message) +\(error.additionalErrors.count)"
        } catch {
            return "\(error)"
        }
    }

    @Test("a whole archive in blocks of any size: the same report as records read one at a time; every block given back")
    func wholeArchive() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-checked-records")
        defer { work.remove() }
        let bytes = try await FetchPrefixTests.archive(seed: 41, in: work, name: "a")
        let serial = await Self.outcome(bytes, seed: 0, onEveryCore: false)
        #expect(serial.hasPrefix("ok "))
        for seed in 1...4 as ClosedRange<UInt64> {
            let source = SlicedBlocks(bytes, seed: seed)
            let report = try await StreamVerifier(path: "a", keying: nil).verify(source)
            #expect("ok \(report)" == serial, "seed \(seed)")
            #expect(source.outstanding == 0 || source.outstanding == 1, "seed \(seed): \(source.outstanding) blocks kept")
        }
    }

    @Test("a flipped byte, a cut, bytes after the footer: the same first error as records read one at a time")
    func damageMeansTheSame() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-checked-records")
        defer { work.remove() }
        let bytes = try await FetchPrefixTests.archive(seed: 43, in: work, name: "a")
        var generator = SeededGenerator(seed: 0xF11B)
        var cases: [(String, [UInt8])] = []
        for _ in 0..<24 {
            var damaged = bytes
            let at = Int.random(in: 12..<bytes.count, using: &generator)
            damaged[at] ^= UInt8.random(in: 1...255, using: &generator)
            cases.append(("flip at \(at)", damaged))
        }
        for _ in 0..<8 {
            let cut = Int.random(in: 0..<bytes.count, using: &generator)
            cases.append(("cut at \(cut)", Array(bytes[0..<cut])))
        }
        cases.append(("3 bytes after the footer", bytes + [1, 2, 3]))
        cases.append(("a record header after the footer", bytes + Array(bytes[12..<40])))
        for (index, (name, damaged)) in cases.enumerated() {
            let serial = await Self.outcome(damaged, seed: 0, onEveryCore: false)
            let checked = await Self.outcome(damaged, seed: UInt64(index), onEveryCore: true)
            #expect(checked == serial, "\(name)")
            if name.hasPrefix("cut") || name.contains("after the footer") { #expect(!serial.hasPrefix("ok"), "\(name)") }
        }
    }
}
