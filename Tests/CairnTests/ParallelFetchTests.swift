import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import Cairn

/// A fetch over several connections (`Spec/0001-container-format.md §13.8`, `Spec/0003 §13`,
/// issue 26) against a real nginx on 127.0.0.1, with the fault proxy in front of it for the
/// faults: pieces written at their offsets and checked in archive order, a cut connection, a
/// range answered with wrong bytes, an archive replaced mid-fetch, a kill and a resume that keeps
/// every range received, and a server without range support.
@Suite("Parallel ranged fetch", .serialized)
struct ParallelFetchTests {
    /// A served archive of about 3 MiB (seeded, incompressible), nginx, and the proxy in front.
    final class Setup {
        let work: TemporaryDirectory
        let served: String
        let server: NginxServer
        let proxy: FaultProxy
        let expected: [UInt8]
        var out: String { work.appending("copy.cairn") }

        init(seed: UInt64, count: Int = 24, slowRate: String = "512k") throws {
            work = try TemporaryDirectory(prefix: "cairn-parallel-fetch")
            served = work.appending("www")
            try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
            try FetchTests.archive(FetchTests.tree(seed: seed, count: count), at: served + "/a.cairn", work: work)
            expected = try FetchTests.bytes(served + "/a.cairn")
            server = try NginxServer(root: served, slowRate: slowRate)
            proxy = try FaultProxy(upstreamPort: server.port)
        }

        deinit {
            proxy.stop()
            server.stop()
            work.remove()
        }
    }

    /// Options of a fetch over 4 connections in pieces of 256 KiB: a few-MiB archive gives a
    /// dozen pieces.
    static func options(retries: Int = 5) -> FetchOptions {
        var options = FetchOptions(retries: retries)
        options.connections = 4
        options.rangeSize = 256 << 10
        return options
    }

    @Test("4 connections in 256 KiB pieces: byte-identical, every piece a bounded range with If-Range, checked progress reaches the end (§13.8)")
    func byteIdentical() async throws {
        let setup = try Setup(seed: 0x26A1)
        let fetcher = try ArchiveFetcher(from: ArchiveLocation(parsing: setup.server.url("a.cairn")), options: Self.options())
        let report = try await fetcher.fetch(to: .file(path: setup.out))
        try FetchTests.expectSame(setup.out, setup.expected)
        #expect(report.connections == 4)
        #expect(report.fetchedBytes == UInt64(setup.expected.count), "every byte downloaded once: \(report)")
        #expect(fetcher.checkedProgress.completedUnitCount == Int64(setup.expected.count))
        #expect(!RawFileSystem.exists(Array((setup.out + ".partial.fetch").utf8)))
        let fields = setup.server.requestFields()
        #expect(fields.count >= 10, "a dozen pieces: \(fields)")
        // The first asks for the first piece alone; every other carries the validator it gave.
        #expect(fields.first?.range == "bytes=0-262143", "\(fields)")
        #expect(fields.dropFirst().allSatisfy { !$0.ifRange.isEmpty && $0.range.hasPrefix("bytes=") }, "\(fields)")
        #expect(setup.server.accessLog().allSatisfy { $0.status == 206 && $0.bodyBytesSent <= 256 << 10 })
    }

    @Test("--connections 1 is one GET front to back without a Range field; a server without ranges gets one GET too (§13.8)")
    func oneConnectionAndNoRanges() async throws {
        try await onDedicatedThread {
            let setup = try Setup(seed: 0x26A2)
            let one = try FetchCLI.run(["fetch", setup.server.url("a.cairn"), "-o", setup.out, "--connections", "1", "--json"])
            #expect(one.status == 0, "\(one.stderr)")
            #expect(one.stdout.contains("\"connections\":1"), "\(one.stdout)")
            try FetchTests.expectSame(setup.out, setup.expected)
            #expect(setup.server.requestFields().map(\.range) == [""])

            let noRanges = setup.work.appending("noranges.cairn")
            let whole = try FetchCLI.run(["fetch", setup.server.url("noranges/a.cairn"), "-o", noRanges, "--json"])
            #expect(whole.status == 0, "\(whole.stderr)")
            #expect(whole.stdout.contains("\"connections\":1"), "\(whole.stdout)")
            try FetchTests.expectSame(noRanges, setup.expected)
            let log = setup.server.accessLog().filter { $0.path.hasPrefix("/noranges/") }
            #expect(log.count == 1 && log.first?.status == 200, "\(log)")

            let bad = try FetchCLI.run(["fetch", setup.server.url("a.cairn"), "-o", setup.work.appending("x"), "--connections", "0"])
            #expect(bad.status == 2, "\(bad.stderr)")
        }
    }

    @Test("one connection cut mid-piece while the others complete: what arrived is kept, the rest asked for again, nothing downloaded twice (§13.8)")
    func oneConnectionCut() async throws {
        let setup = try Setup(seed: 0x26A3)
        try setup.proxy.set(.cut(afterBodyBytes: 100_000, times: 1))
        let fetcher = try ArchiveFetcher(from: ArchiveLocation(parsing: setup.proxy.url("a.cairn")), options: Self.options())
        let report = try await fetcher.fetch(to: .file(path: setup.out))
        try FetchTests.expectSame(setup.out, setup.expected)
        #expect(setup.proxy.requests.filter { $0.fault == "cut" }.count == 1, "\(setup.proxy.requests)")
        #expect(report.retries == 1, "\(report)")
        #expect(report.restarts == 0, "\(report)")
        #expect(report.fetchedBytes == UInt64(setup.expected.count), "the bytes before the cut were kept: \(report)")
    }

    @Test("a range answered with a wrong byte is caught by the checks and fetched again; a byte wrong every time ends with an error naming the URL and offset (§13.8)")
    func wrongBytes() async throws {
        let setup = try Setup(seed: 0x26A4)
        let url = setup.proxy.url("a.cairn")
        let offset = UInt64(setup.expected.count * 2 / 3)
        try setup.proxy.set(.flipByte(atOffset: offset, times: 1))
        let report = try await ArchiveFetcher(from: ArchiveLocation(parsing: url), options: Self.options()).fetch(to: .file(path: setup.out))
        try FetchTests.expectSame(setup.out, setup.expected)
        #expect(setup.proxy.requests.filter { $0.fault == "flip" }.count == 1, "\(setup.proxy.requests)")
        #expect(report.retries == 1, "\(report)")

        let other = setup.work.appending("other.cairn")
        try setup.proxy.set(.flipByte(atOffset: offset, times: nil))
        let error = await #expect(throws: CairnError.self) {
            _ = try await ArchiveFetcher(from: ArchiveLocation(parsing: url), options: Self.options()).fetch(to: .file(path: other))
        }
        #expect(error?.path == url, "\(String(describing: error))")
        #expect(error.flatMap(\.offset).map { $0 <= offset && offset - $0 < 1 << 20 } == true, "\(String(describing: error))")
        #expect(error?.message.contains("fetched again") == true, "\(String(describing: error))")
        #expect(!RawFileSystem.exists(Array(other.utf8)))
    }

    @Test("the archive replaced on the server while a piece stalls: the fetch starts over and ends with the new archive, never a splice (§13.8)")
    func replacedMidFetch() async throws {
        try await onDedicatedThread {
            let setup = try Setup(seed: 0x26A5)
            // The first request stalls after its head and some bytes: the other connections
            // have started on the archive its head described.
            try setup.proxy.set(.stall(afterBodyBytes: 1000, times: 1))
            let child = try FetchCLI.start(["fetch", setup.proxy.url("a.cairn"), "-o", setup.out, "--timeout", "2", "--json"])
            try Await.until("a piece stalls") { setup.proxy.stallCount == 1 || !child.process.isRunning }
            // Another archive, renamed over the served one: another ETag and length.
            let next = setup.served + "/next.cairn"
            try FetchTests.archive(FetchTests.tree(seed: 0x26A6, count: 20), at: next, work: setup.work, name: "next")
            let replacement = try FetchTests.bytes(next)
            #expect(rename(next, setup.served + "/a.cairn") == 0)
            let result = child.wait()
            #expect(result.status == 0, "\(result.stderr)")
            // The rerun's pieces carried the old validator and were refused: nothing of the old
            // archive is in the new one.
            #expect(setup.server.requestFields().contains { !$0.ifRange.isEmpty }, "\(setup.server.requestFields())")
            try FetchTests.expectSame(setup.out, replacement)
            #expect(result.stdout.contains("\"restarts\":1"), "\(result.stdout) \(result.stderr)")
        }
    }

    @Test("killed with pieces received, then rerun: every piece written is kept; the bytes sent twice are at most the connections' unwritten MiB (§13.8)")
    func killAndResume() async throws {
        try await onDedicatedThread {
            let setup = try Setup(seed: 0x26A7, count: 40)
            let url = setup.server.url("slow/a.cairn")
            let total = UInt64(setup.expected.count)
            let child = try FetchCLI.start(["fetch", url, "-o", setup.out, "-q"])
            // Killed once the state records over a third of the archive.
            try Await.until("the state records received ranges") {
                let received = FetchState.load(for: setup.out)?.receivedRanges.reduce(0) { $0 + UInt64($1.count) } ?? 0
                return received > total / 3 || !child.process.isRunning
            }
            kill(child.pid, SIGKILL)
            let killed = child.wait()
            try #require(killed.status != 0, "the fetch ended before the kill")
            let state = try #require(FetchState.load(for: setup.out))
            let kept = state.receivedRanges.reduce(0) { $0 + UInt64($1.count) }
            #expect(state.receivedRanges.count > 1 || kept < total, "\(state)")
            let firstRun = setup.server.accessLog().reduce(0) { $0 + $1.bodyBytesSent }

            let resumed = try FetchCLI.run(["fetch", url, "-o", setup.out, "--json"])
            #expect(resumed.status == 0, "\(resumed.stderr)")
            try FetchTests.expectSame(setup.out, setup.expected)
            #expect(resumed.stdout.contains("\"keptRangeBytes\":") && !resumed.stdout.contains("\"keptRangeBytes\":0,"), "\(resumed.stdout)")
            #expect(resumed.stdout.contains("\"connections\":4"), "the rerun went on over one connection: \(resumed.stdout)")
            let bothRuns = setup.server.accessLog().reduce(0) { $0 + $1.bodyBytesSent }
            #expect(bothRuns > firstRun)
            // Sent twice: at most the ranges in flight (each connection had written all but its
            // last MiB, or less, of its piece).
            let piece = RangeSchedule.pieceSize(remaining: total - FetchWriter.firstRequestBytes, connections: 4, maximum: 8 << 20)
            #expect(bothRuns - total <= 4 * piece, "\(bothRuns - total) bytes sent twice, pieces of \(piece)")
            #expect(bothRuns - firstRun <= total - kept, "the rerun asked only for what the state did not hold")
        }
    }

    /// nginx's ETag of the file at `path`: its mtime and size in hex.
    static func etag(of path: String) throws -> String {
        var status = stat()
        try #require(stat(path, &status) == 0)
        return "\"\(String(status.st_mtim.tv_sec, radix: 16))-\(String(status.st_size, radix: 16))\""
    }

    /// What a run killed with three of its four pieces done leaves: `FILE.partial` holding the
    /// archive but for `hole` (zeros there), and a state file that records every other byte as
    /// received under the served archive's ETag.
    static func leaveKilledRun(_ setup: Setup, url: String, hole: Range<UInt64>) throws {
        var partial = setup.expected
        for offset in hole { partial[Int(offset)] = 0 }
        try RawFileSystem.writeFile(Array((setup.out + ".partial").utf8), partial)
        let total = UInt64(setup.expected.count)
        try FetchState(
            url: url, validator: etag(of: setup.served + "/a.cairn"), length: total, received: [0..<hole.lowerBound, hole.upperBound..<total]
        ).save(for: setup.out)
    }

    @Test("a rerun whose one hole is the piece a killed run had in flight asks for it over every connection, and for nothing else (§13.8)")
    func resumedHoleSharedAmongConnections() async throws {
        let setup = try Setup(seed: 0x26B1, count: 40)
        let url = setup.server.url("a.cairn")
        let total = UInt64(setup.expected.count)
        // The first request's MiB and the pieces after the hole arrived; the hole is what one
        // connection had in flight: a quarter of the rest.
        let start = FetchWriter.firstRequestBytes
        let hole = start..<(start + (total - start) / 4)
        try Self.leaveKilledRun(setup, url: url, hole: hole)

        var options = FetchOptions()
        options.connections = 4
        let report = try await ArchiveFetcher(from: ArchiveLocation(parsing: url), options: options).fetch(to: .file(path: setup.out))
        try FetchTests.expectSame(setup.out, setup.expected)
        #expect(report.connections == 4, "\(report)")
        #expect(report.restarts == 0, "\(report)")
        // Every completed range kept: nginx sent the hole's bytes and no more, in one piece per
        // connection, each bound to the archive by its ETag.
        let log = setup.server.accessLog()
        #expect(log.reduce(0) { $0 + $1.bodyBytesSent } == UInt64(hole.count), "\(log)")
        #expect(log.count == 4 && log.allSatisfy { $0.status == 206 }, "the hole went to one connection: \(log)")
        let etag = try Self.etag(of: setup.served + "/a.cairn")
        #expect(setup.server.requestFields().allSatisfy { $0.ifRange == etag }, "\(setup.server.requestFields())")
        #expect(report.keptRangeBytes >= total - hole.upperBound, "\(report)")
    }

    @Test("a rerun after the archive at the URL was replaced keeps no range: the report says 0 kept and that it started over (§13.8, Spec/0003 §13)")
    func replacedBetweenRunsKeepsNothing() async throws {
        try await onDedicatedThread {
            let setup = try Setup(seed: 0x26B2, count: 40)
            let url = setup.server.url("a.cairn")
            let total = UInt64(setup.expected.count)
            let hole = FetchWriter.firstRequestBytes..<(total / 2)
            try Self.leaveKilledRun(setup, url: url, hole: hole)
            let human = setup.work.appending("human.cairn")
            try RawFileSystem.writeFile(Array((human + ".partial").utf8), try FetchTests.bytes(setup.out + ".partial"))
            try FetchState(url: url, validator: Self.etag(of: setup.served + "/a.cairn"), length: total, received: [0..<hole.lowerBound, hole.upperBound..<total])
                .save(for: human)
            // Another archive renamed over the served one: another ETag and length.
            let next = setup.served + "/next.cairn"
            try FetchTests.archive(FetchTests.tree(seed: 0x26B3, count: 30), at: next, work: setup.work, name: "next")
            let replacement = try FetchTests.bytes(next)
            #expect(rename(next, setup.served + "/a.cairn") == 0)

            let json = try FetchCLI.run(["fetch", url, "-o", setup.out, "--json"])
            #expect(json.status == 0, "\(json.stderr)")
            try FetchTests.expectSame(setup.out, replacement)
            #expect(json.stdout.contains("\"restarts\":1"), "\(json.stdout)")
            #expect(json.stdout.contains("\"keptRangeBytes\":0,"), "the old archive's ranges were counted as kept: \(json.stdout)")
            #expect(json.stdout.contains("\"resumedFrom\":0,"), "\(json.stdout)")

            let line = try FetchCLI.run(["fetch", url, "-o", human])
            #expect(line.status == 0, "\(line.stderr)")
            try FetchTests.expectSame(human, replacement)
            #expect(line.stdout.contains("started over once"), "\(line.stdout)")
            #expect(!line.stdout.contains("of ranges kept") && !line.stdout.contains("resumed at"), "\(line.stdout)")
        }
    }
}

/// The parallel fetch of an `s3://` object (`Spec/0001 §13.8`) from `rclone serve s3`, which
/// answers ranges with 200 and a `Content-Range`.
@Suite("Parallel ranged fetch from S3", .serialized)
struct ParallelS3FetchTests {
    @Test("an s3:// object over 4 connections: byte-identical, several signed range requests (§13.8)")
    func s3Object() async throws {
        try await onDedicatedThread {
            let work = try TemporaryDirectory(prefix: "cairn-parallel-s3")
            defer { work.remove() }
            let server = try RcloneS3Server()
            defer { server.stop() }
            let (source, local) = try ObjectStoreTests.source(work, seed: 0x26A8, count: 40)
            let created = try ObjectStoreTests.cli(["create", "-q", "-o", "s3://cairn/p.cairn", "data"], in: source, server)
            try #require(created.status == 0, "\(created.stderr)")
            let fetched = try ObjectStoreTests.cli(["fetch", "s3://cairn/p.cairn", "-o", "copy.cairn", "--json"], in: work.path, server)
            #expect(fetched.status == 0, "\(fetched.stderr)")
            try FetchTests.expectSame(work.appending("copy.cairn"), local)
            #expect(fetched.stdout.contains("\"connections\":4"), "\(fetched.stdout)")
            #expect(ObjectStoreTests.number("requestCount", in: fetched.stdout) >= 4, "\(fetched.stdout)")
        }
    }
}

/// A seeded fetch's downloads over several connections (`Spec/0001 §13.6.2`, §13.8): the
/// downloads of a plan of copies and downloads are read ahead through the remote source's
/// connections; the bytes downloaded are those of one connection, the result the same.
@Suite("Parallel seeded fetch", .serialized)
struct ParallelSeededFetchTests {
    /// Served `new.cairn` and `old.cairn`: 12 files of 600 KiB, of which 6 differ, so the
    /// downloads are several MiB in several ranges.
    final class Setup {
        let work: TemporaryDirectory
        let server: NginxServer
        let expected: [UInt8]
        let old: String

        init() throws {
            work = try TemporaryDirectory(prefix: "cairn-parallel-seeded")
            let served = work.appending("www")
            try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
            var generator = SeededGenerator(seed: 0x26C1)
            var old = TreeBuilder()
            var new = TreeBuilder()
            old.directory("data")
            new.directory("data")
            for index in 0..<12 {
                let contents = generator.bytes(600 << 10)
                old.file("data/big\(index).bin", contents)
                new.file("data/big\(index).bin", index % 2 == 1 ? generator.bytes(600 << 10) : contents)
            }
            self.old = served + "/old.cairn"
            try FetchTests.archive(old, at: self.old, work: work, name: "old")
            try FetchTests.archive(new, at: served + "/new.cairn", work: work, name: "new")
            expected = try FetchTests.bytes(served + "/new.cairn")
            server = try NginxServer(root: served)
        }

        deinit {
            server.stop()
            work.remove()
        }

        /// Fetches new.cairn with `seed` over `connections`; returns the report, the body bytes
        /// nginx sent for new.cairn, and the connections they came on.
        func fetch(seed: ArchiveLocation, connections: Int, name: String) async throws -> (FetchReport, UInt64, Set<Int>) {
            let before = server.accessLog().count
            let fieldsBefore = server.requestFields().count
            var options = FetchOptions(seeds: [seed])
            options.connections = connections
            let out = work.appending(name)
            let report = try await ArchiveFetcher(from: ArchiveLocation(parsing: server.url("new.cairn")), options: options)
                .fetch(to: .file(path: out))
            try FetchTests.expectSame(out, expected)
            let log = server.accessLog().dropFirst(before).filter { $0.request.contains("/new.cairn") }
            let serials = Set(server.requestFields().dropFirst(fieldsBefore).map(\.connection))
            return (report, log.reduce(0) { $0 + $1.bodyBytesSent }, serials)
        }
    }

    @Test("a plan of copies and downloads (a remote seed) downloads its ranges over 4 connections: the same bytes of the archive as over one (§13.6.2, §13.8)")
    func deltaPlanInParallel() async throws {
        let setup = try Setup()
        let seed = try ArchiveLocation(parsing: setup.server.url("old.cairn"))
        let (one, oneBytes, _) = try await setup.fetch(seed: seed, connections: 1, name: "one.cairn")
        let (four, fourBytes, serials) = try await setup.fetch(seed: seed, connections: 4, name: "four.cairn")
        #expect(one.connections == 1, "\(one)")
        #expect(four.connections == 4, "the plan's downloads went one at a time: \(four)")
        #expect(fourBytes == oneBytes, "4 connections downloaded \(fourBytes) bytes of the archive, one \(oneBytes)")
        #expect(fourBytes < UInt64(setup.expected.count * 2 / 3), "\(fourBytes) of \(setup.expected.count)")
        #expect(four.restarts == 0 && four.rejectedCopies == 0, "\(four)")
        #expect(serials.count > 1, "\(serials)")
    }
}

/// The range arithmetic and hand-out order of a parallel fetch (`Spec/0001 §13.8`), as plain values.
@Suite("Parallel fetch: range schedule")
struct RangeScheduleTests {
    @Test("pieces share the rest among the connections, in 64 KiB units, at most the largest range")
    func pieceSize() {
        #expect(RangeSchedule.pieceSize(remaining: 511 << 20, connections: 4, maximum: 8 << 20) == 8 << 20)
        #expect(RangeSchedule.pieceSize(remaining: 4 << 20, connections: 4, maximum: 8 << 20) == 1 << 20)
        #expect(RangeSchedule.pieceSize(remaining: (4 << 20) + 1, connections: 4, maximum: 8 << 20) == (1 << 20) + (64 << 10))
        #expect(RangeSchedule.pieceSize(remaining: 100, connections: 4, maximum: 8 << 20) == 64 << 10)
        #expect(RangeSchedule.pieceSize(remaining: 0, connections: 4, maximum: 8 << 20) == 64 << 10)
    }

    @Test("the pieces share the bytes still wanted, not the rest after the prefix: one hole of a killed run goes to every connection")
    func sharingTheHoles() {
        let mib: UInt64 = 1 << 20
        // 32 MiB received but for 4..<8 MiB: four pieces of 1 MiB, not one of 4 MiB.
        var schedule = RangeSchedule.sharing(total: 32 * mib, start: 1 * mib, received: [0..<4 * mib, 8 * mib..<32 * mib], connections: 4, maximum: 8 * mib)
        var pieces: [Range<UInt64>] = []
        while let piece = schedule.next() { pieces.append(piece) }
        #expect(pieces == [4 * mib..<5 * mib, 5 * mib..<6 * mib, 6 * mib..<7 * mib, 7 * mib..<8 * mib])
        // A fresh fetch: the first request's piece is taken, the rest shared.
        var fresh = RangeSchedule.sharing(total: 9 * mib, start: 0, received: [], connections: 4, maximum: 8 * mib, taken: 0..<mib)
        #expect(fresh.next() == mib..<3 * mib)
    }

    @Test("merge, subtract, holes and the received end from a position")
    func arithmetic() {
        var ranges: [Range<UInt64>] = []
        RangeSchedule.merge(10..<20, into: &ranges)
        RangeSchedule.merge(30..<40, into: &ranges)
        RangeSchedule.merge(20..<25, into: &ranges)
        RangeSchedule.merge(0..<0, into: &ranges)
        #expect(ranges == [10..<25, 30..<40])
        RangeSchedule.merge(24..<31, into: &ranges)
        #expect(ranges == [10..<40])
        #expect(RangeSchedule.subtract(15..<20, from: ranges) == [10..<15, 20..<40])
        #expect(RangeSchedule.subtract(0..<100, from: ranges).isEmpty)
        #expect(RangeSchedule.holes(in: [10..<15, 20..<40], within: 0..<50) == [0..<10, 15..<20, 40..<50])
        #expect(RangeSchedule.holes(in: [10..<15], within: 12..<14).isEmpty)
        #expect(RangeSchedule.contiguousEnd(of: [10..<15, 20..<40], from: 12) == 15)
        #expect(RangeSchedule.contiguousEnd(of: [10..<15, 20..<40], from: 15) == 15)
    }

    @Test("holes cut into pieces lowest first; a cut piece gives back its remainder; a failure stops the hand-out")
    func handOut() {
        var schedule = RangeSchedule(total: 100, start: 5, received: [0..<10, 40..<50], pieceSize: 20, taken: 10..<15)
        #expect(schedule.next() == 15..<35)
        #expect(schedule.next() == 35..<40)
        schedule.receive(15..<20)
        schedule.end(15..<35, remainder: 20..<35)
        #expect(schedule.receivedEnd(from: 0) == 10)
        schedule.receive(10..<15)
        schedule.end(10..<15)
        #expect(schedule.receivedEnd(from: 0) == 20)
        #expect(schedule.next() == 20..<35)
        schedule.fail(CairnError(.sourceChanged, "changed"))
        #expect(schedule.next() == nil)
        #expect(schedule.failure?.code == .sourceChanged)
        #expect(!schedule.isIdle)
    }
}
