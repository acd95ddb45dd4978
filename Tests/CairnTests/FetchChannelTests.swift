import CairnTestSupport
import Foundation
import Synchronization
import Testing

import Cairn

/// The in-memory channel between a fetch's writer thread and its verifier.
@Suite("Fetch channel")
struct FetchChannelTests {
    /// Seeded pieces of 1 B to 300 KiB, and one larger than the ring, sent from a thread while
    /// this one reads in other seeded sizes: every byte arrives once, in order, across the
    /// ring's wrap-arounds, then the end of input.
    @Test("bytes arrive whole and in order across wrap-arounds, then end of input")
    func bytesArriveInOrder() async throws {
        try await onDedicatedThread {
            var generator = SeededGenerator(seed: 0xC4A7)
            let bytes = generator.bytes(3 * FetchChannel.capacity + 12_345)
            var pieces: [Range<Int>] = []
            var at = 0
            while at < bytes.count {
                let size = pieces.count == 3 ? FetchChannel.capacity + 17 : Int.random(in: 1...(300 << 10), using: &generator)
                pieces.append(at..<min(bytes.count, at + size))
                at += size
            }
            let channel = FetchChannel()
            let sent = Mutex<String?>(nil)
            let ranges = pieces
            let writer = Thread {
                do {
                    for piece in ranges {
                        try bytes[piece].withUnsafeBytes { try channel.send($0) }
                    }
                } catch {
                    sent.withLock { $0 = "\(error)" }
                }
                channel.finishSending()
            }
            writer.start()
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            while true {
                let want = Int.random(in: 1...buffer.count, using: &generator)
                let n = try buffer.withUnsafeMutableBytes { (raw) throws(CairnError) in
                    try channel.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<want]))
                }
                if n == 0 { break }
                #expect(n <= want)
                received += buffer[0..<n]
            }
            #expect(sent.withLock { $0 } == nil)
            #expect(received.count == bytes.count)
            #expect(received == bytes)
        }
    }

    /// A verifier that stops: the blocked writer's send fails with the channel's own message,
    /// and later reads see end of input at once, bytes still queued or not.
    @Test("after stopReading a blocked send fails with readerStopped and reads see end of input")
    func stopReadingReleasesTheWriter() async throws {
        try await onDedicatedThread {
            let channel = FetchChannel()
            let outcome = Mutex<String?>(nil)
            let done = DispatchSemaphore(value: 0)
            let writer = Thread {
                // Twice the ring: the send blocks once the ring is full.
                let bytes = [UInt8](repeating: 7, count: 2 * FetchChannel.capacity)
                do {
                    try bytes.withUnsafeBytes { try channel.send($0) }
                    outcome.withLock { $0 = "sent" }
                } catch {
                    outcome.withLock { $0 = (error as? CairnError)?.message ?? "\(error)" }
                }
                done.signal()
            }
            writer.start()
            // The writer fills the ring and waits.
            #expect(done.wait(timeout: .now() + 0.5) == .timedOut)
            channel.stopReading()
            #expect(done.wait(timeout: .now() + 10) == .success)
            #expect(outcome.withLock { $0 } == FetchChannel.readerStopped)
            var buffer = [UInt8](repeating: 0, count: 64)
            let n = try buffer.withUnsafeMutableBytes { (raw) throws(CairnError) in try channel.read(into: raw) }
            #expect(n == 0)
        }
    }
}
