import CairnTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

@testable import Cairn

/// A sink that keeps every byte in memory and, while `stalled`, suspends every write.
final class StallableSink: ArchiveSink, Sendable {
    private struct State {
        var bytes: [UInt8] = []
        var stalled: Bool
        var waiting: [CheckedContinuation<Void, Never>] = []
        var writes = 0
    }
    private let state: Mutex<State>

    init(stalled: Bool) { state = Mutex(State(stalled: stalled)) }

    var bytes: [UInt8] { state.withLock { $0.bytes } }
    var writes: Int { state.withLock { $0.writes } }

    func write(_ bytes: [UInt8]) async throws {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let proceed = state.withLock { s -> Bool in
                s.writes += 1
                if s.stalled {
                    s.waiting.append(continuation)
                    return false
                }
                return true
            }
            if proceed { continuation.resume() }
        }
        state.withLock { $0.bytes.append(contentsOf: bytes) }
    }

    func release() {
        let waiting = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.stalled = false
            defer { s.waiting = [] }
            return s.waiting
        }
        for continuation in waiting { continuation.resume() }
    }

    func finish() async throws {}
    func abandon() async {}
}

/// An endless-if-asked async sequence of seeded byte arrays that counts what it produced.
struct CountingSource: AsyncSequence, Sendable {
    typealias Element = [UInt8]
    let pieces: Int
    let pieceSize: Int
    let produced: Counter

    final class Counter: Sendable {
        let value = Atomic<Int>(0)
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        var remaining: Int
        let pieceSize: Int
        let produced: Counter
        var generator = SeededGenerator(seed: 42)

        mutating func next() async -> [UInt8]? {
            guard remaining > 0 else { return nil }
            remaining -= 1
            produced.value.add(pieceSize, ordering: .relaxed)
            return generator.bytes(pieceSize)
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(remaining: pieces, pieceSize: pieceSize, produced: produced)
    }
}

@Suite("Pipeline")
struct PipelineTests {
    @Test("A stalled sink makes append suspend: bytes read stay within the backpressure budget")
    func stalledSinkSuspendsAppend() async throws {
        let sink = StallableSink(stalled: true)
        let counter = CountingSource.Counter()
        let source = CountingSource(pieces: 256, pieceSize: 256 * 1024, produced: counter)  // 64 MiB
        var configuration = Archiver.Configuration()
        configuration.backpressure = .watermark(low: .mebibytes(2), high: .mebibytes(4))
        configuration.batchBytes = 1 << 20
        let archiver = try Archiver(sink: sink, configuration: configuration)
        nonisolated(unsafe) let unsafeArchiver = archiver
        let task = Task {
            try await unsafeArchiver.append(contentsOf: source, pathInArchive: "big.bin")
            let properties = try await unsafeArchiver.finish()
            return (properties.uncompressedBytes, unsafeArchiver.peakBytesInFlight)
        }
        // Once the sink holds a write, nothing returns to the budget: a producer suspended on it
        // has read all it will read while the sink is stalled (one that never suspends reads
        // all 64 MiB, which the expectations below report).
        try await Await.suspendingUntil("the producer suspends on the backpressure budget") {
            sink.writes > 0 && (archiver.isWaitingForBudget || counter.value.load(ordering: .relaxed) == 64 << 20)
        }
        let producedWhileStalled = counter.value.load(ordering: .relaxed)
        // High watermark (4 MiB) + the batch being filled + one source piece + the 1 MiB output flush.
        #expect(producedWhileStalled <= 8 << 20, "read \(producedWhileStalled) bytes while the sink was stalled")
        #expect(producedWhileStalled < 64 << 20)
        sink.release()
        let (content, peak) = try await task.value
        #expect(content == 64 << 20)
        #expect(peak <= 4 << 20)
        #expect(counter.value.load(ordering: .relaxed) == 64 << 20)
    }

    @Test("The default backpressure budget follows the workers: two 1 MiB batches each, two more, resuming at half")
    func defaultBudgetFollowsWorkers() {
        #expect(BackpressurePolicy.forWorkers(2) == .watermark(low: .mebibytes(3), high: .mebibytes(6)))
        #expect(BackpressurePolicy.forWorkers(8) == .watermark(low: .mebibytes(9), high: .mebibytes(18)))
        #expect(BackpressurePolicy.forWorkers(0) == .watermark(low: .mebibytes(2), high: .mebibytes(4)))
        #expect(BackpressurePolicy.forWorkers(-5) == BackpressurePolicy.forWorkers(1))
        let cores = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        #expect(BackpressurePolicy.default == .forWorkers(cores))
        #expect(Archiver.Configuration().backpressure == .forWorkers(cores))
    }

    @Test("An archive streamed through a pipe extracts identical, verifying as it reads")
    func pipeRoundTrip() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var generator = SeededGenerator(seed: 7)
        let first = generator.bytes(3 << 20)
        let second = Array(first[1000..<(2 << 20)]) + generator.bytes(100_000)
        let sink = StallableSink(stalled: false)
        let archiver = try Archiver(sink: sink)
        for (name, content) in [("a/first.bin", first), ("a/second.bin", second), ("a/first-again.bin", first)] {
            let pieces = AsyncStream<[UInt8]> { continuation in
                var offset = 0
                var rng = SeededGenerator(seed: UInt64(content.count))
                while offset < content.count {
                    let size = min(content.count - offset, Int(rng.next() % 300_000) + 1)
                    continuation.yield(Array(content[offset..<(offset + size)]))
                    offset += size
                }
                continuation.finish()
            }
            try await archiver.append(contentsOf: pieces, pathInArchive: name, modificationTime: 1_700_000_000_123_456_789)
        }
        _ = try await archiver.finish()
        let archive = sink.bytes

        let pipe = Pipe()
        let writer = Thread {
            archive.withUnsafeBytes { raw in
                var offset = 0
                while offset < raw.count, let base = raw.baseAddress {
                    let n = Glibc.write(pipe.fileHandleForWriting.fileDescriptor, base + offset, min(65536, raw.count - offset))
                    if n <= 0 { break }
                    offset += n
                }
            }
            try? pipe.fileHandleForWriting.close()
        }
        writer.start()
        let destination = directory.url.appendingPathComponent("out")
        let report = try await Extractor.extractStream(from: pipe.fileHandleForReading, to: destination)
        #expect(report.fileCount == 3)
        #expect(report.archiveBytes == UInt64(archive.count))
        for (name, content) in [("a/first.bin", first), ("a/second.bin", second), ("a/first-again.bin", first)] {
            let data = try Data(contentsOf: destination.appendingPathComponent(name))
            #expect(Array(data) == content, "\(name) differs")
        }
    }

    @Test("A stream cut before its footer shows nothing at the destination, keeps what verified, and resumes")
    func truncatedStreamLeavesNothing() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let sink = StallableSink(stalled: false)
        let archiver = try Archiver(sink: sink)
        var generator = SeededGenerator(seed: 9)
        let content = generator.bytes(1 << 20)
        let second = generator.bytes(1 << 20)
        try await archiver.append(contentsOf: AsyncStream { $0.yield(content); $0.finish() }, pathInArchive: "f.bin")
        try await archiver.append(contentsOf: AsyncStream { $0.yield(second); $0.finish() }, pathInArchive: "g.bin")
        _ = try await archiver.finish()
        // Cut inside the second file: the first is committed and verified, so it is kept.
        let cut = Array(sink.bytes[0..<(sink.bytes.count * 3 / 4)])
        let file = directory.url.appendingPathComponent("cut.cairn")
        try Data(cut).write(to: file)
        let handle = try FileHandle(forReadingFrom: file)
        defer { try? handle.close() }
        let destination = directory.url.appendingPathComponent("out")
        do {
            _ = try await Extractor.extractStream(from: handle, to: destination)
            Issue.record("a cut stream extracted")
        } catch let error as CairnError {
            #expect(error.code == .truncated)
            #expect(error.message.contains("verified"))
        }
        #expect(!FileManager.default.fileExists(atPath: destination.path))
        // What verified is kept in the staging directory for `--resume`, never at the destination.
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains("staging") }
        #expect(leftovers == [".out.cairn-staging"])
        // Without resume, a second extraction refuses to touch the staged one.
        let full = directory.url.appendingPathComponent("full.cairn")
        try Data(sink.bytes).write(to: full)
        let again = try FileHandle(forReadingFrom: full)
        await #expect(throws: CairnError.self) { _ = try await Extractor.extractStream(from: again, to: destination) }
        try again.close()
        // With resume, the whole stream completes the extraction.
        var options = ExtractionOptions()
        options.resume = true
        let resumed = try FileHandle(forReadingFrom: full)
        defer { try? resumed.close() }
        _ = try await Extractor.extractStream(from: resumed, to: destination, options: options)
        #expect(Array(try Data(contentsOf: destination.appendingPathComponent("f.bin"))) == content)
        #expect(Array(try Data(contentsOf: destination.appendingPathComponent("g.bin"))) == second)
        let after = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains("staging") }
        #expect(after.isEmpty)
    }

    @Test("Export progress ends at exactly 100% and never passes it")
    func progressStaysWithinTotal() async throws {
        let sink = StallableSink(stalled: false)
        var configuration = Archiver.Configuration()
        configuration.sizeEstimate = 1 << 20  // an underestimate: the content is 3 MiB
        let archiver = try Archiver(sink: sink, configuration: configuration)
        var generator = SeededGenerator(seed: 3)
        let content = generator.bytes(3 << 20)
        try await archiver.append(contentsOf: AsyncStream { $0.yield(content); $0.finish() }, pathInArchive: "f.bin")
        #expect(archiver.progress.completedUnitCount <= archiver.progress.totalUnitCount)
        _ = try await archiver.finish()
        #expect(archiver.progress.completedUnitCount == archiver.progress.totalUnitCount)
        #expect(archiver.progress.fractionCompleted == 1.0)
    }
}
