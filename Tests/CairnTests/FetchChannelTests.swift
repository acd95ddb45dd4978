import CairnTestSupport
import Foundation
import Synchronization
import Testing

import Cairn

/// The in-memory channel between a fetch's writer thread and its verifier.
@Suite("Fetch channel")
struct FetchChannelTests {
    /// Sends `bytes` from a thread in seeded pieces of 1 B to 300 KiB gathered into the channel's
    /// blocks, as the fetch's writer does; records a send error in `sent`.
    private final class SendOutcome: Sendable {
        let error = Mutex<String?>(nil)
    }

    private static func startWriter(_ bytes: [UInt8], channel: FetchChannel, seed: UInt64, sent: SendOutcome) {
        var generator = SeededGenerator(seed: seed)
        var pieces: [Range<Int>] = []
        var at = 0
        while at < bytes.count {
            let size = Int.random(in: 1...(300 << 10), using: &generator)
            pieces.append(at..<min(bytes.count, at + size))
            at += size
        }
        let ranges = pieces
        let writer = Thread {
            do {
                var block: ByteBlock?
                for piece in ranges {
                    var done = piece.lowerBound
                    while done < piece.upperBound {
                        let target = try block ?? channel.emptyBlock()
                        block = target
                        done += bytes[done..<piece.upperBound].withUnsafeBytes { target.append($0) }
                        if target.room == 0 {
                            try channel.send(target)
                            block = nil
                        }
                    }
                }
                if let block { try channel.send(block) }
            } catch {
                sent.error.withLock { $0 = "\(error)" }
            }
            channel.finishSending()
        }
        writer.start()
    }

    /// Many more bytes than the channel holds at once: every byte arrives once and in order
    /// through the blocks (given back as they are read, so the writer can go on), then the end.
    @Test("blocks arrive whole and in order, reused, then end of input")
    func blocksArriveInOrder() async throws {
        var generator = SeededGenerator(seed: 0xC4A7)
        let bytes = generator.bytes(2 * FetchChannel.blockLimit * FetchChannel.blockSize + 12_345)
        let channel = FetchChannel()
        let sent = SendOutcome()
        Self.startWriter(bytes, channel: channel, seed: 0xC4A8, sent: sent)
        var received: [UInt8] = []
        var distinct = Set<ObjectIdentifier>()
        while let block = await channel.nextBlock() {
            #expect(block.end > block.start)
            received += block.valid
            distinct.insert(ObjectIdentifier(block))
            channel.recycle(block)
        }
        #expect(sent.error.withLock { $0 } == nil)
        #expect(received.count == bytes.count)
        #expect(received == bytes)
        #expect(distinct.count <= FetchChannel.blockLimit)
    }

    /// The prelude and header are read with `read(into:)`, the rest as blocks: the block that
    /// read had begun comes next with what it had not read.
    @Test("bytes read with read(into:) and then as blocks arrive once and in order")
    func readThenBlocks() async throws {
        var generator = SeededGenerator(seed: 0x51DE)
        let bytes = generator.bytes(3 * FetchChannel.blockSize + 777)
        let channel = FetchChannel()
        let sent = SendOutcome()
        Self.startWriter(bytes, channel: channel, seed: 0x51DF, sent: sent)
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 100)
        for _ in 0..<3 {
            let n = try await onDedicatedThread { [buffer] in
                var copy = buffer
                let n = try copy.withUnsafeMutableBytes { (raw) throws(CairnError) in try channel.read(into: raw) }
                return Array(copy[0..<n])
            }
            received += n
        }
        buffer = []
        while let block = await channel.nextBlock() {
            received += block.valid
            channel.recycle(block)
        }
        #expect(sent.error.withLock { $0 } == nil)
        #expect(received == bytes)
    }

    /// A verifier that stops: the writer, waiting for a block while the verifier holds them
    /// all, fails with the channel's own message, and later reads see end of input at once.
    @Test("after stopReading a waiting writer fails with readerStopped and reads see end of input")
    func stopReadingReleasesTheWriter() async throws {
        let channel = FetchChannel()
        let outcome = Mutex<String?>(nil)
        let sent = CountingSource.Counter()
        let done = DispatchSemaphore(value: 0)
        let writer = Thread {
            do throws(CairnError) {
                // More blocks than exist: the writer waits once the verifier holds them all.
                for _ in 0...FetchChannel.blockLimit {
                    let block = try channel.emptyBlock()
                    block.end = block.capacity
                    try channel.send(block)
                    sent.value.add(1, ordering: .relaxed)
                }
                outcome.withLock { $0 = "sent" }
            } catch {
                outcome.withLock { $0 = error.message }
            }
            done.signal()
        }
        writer.start()
        // Every block sent and none given back: the writer's next emptyBlock() waits.
        try await Await.suspendingUntil("the writer sends all \(FetchChannel.blockLimit) blocks") {
            sent.value.load(ordering: .relaxed) == FetchChannel.blockLimit
        }
        #expect(outcome.withLock { $0 } == nil, "the writer went on without a free block")
        channel.stopReading()
        let ended = try await onDedicatedThread { done.wait(timeout: .now() + Await.safetyBound) == .success }
        #expect(ended, "stopReading() did not release the waiting writer")
        #expect(outcome.withLock { $0 } == FetchChannel.readerStopped)
        #expect(await channel.nextBlock() == nil)
        let n = try await onDedicatedThread {
            var buffer = [UInt8](repeating: 0, count: 64)
            return try buffer.withUnsafeMutableBytes { (raw) throws(CairnError) in try channel.read(into: raw) }
        }
        #expect(n == 0)
    }
}
