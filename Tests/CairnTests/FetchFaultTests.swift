import CairnTestSupport
import Foundation
import Glibc
import Testing

import Cairn

/// `cairn fetch` through the tests' fault-injecting proxy in front of a real nginx (issue 10):
/// a connection the server cuts mid-body, a server that stalls, and a 206 that starts
/// elsewhere than asked.
@Suite("Fetch over HTTP: faults", .serialized)
struct FetchFaultTests {
    /// A served archive of a few MiB, nginx, and the proxy in front of it.
    final class Setup {
        let work: TemporaryDirectory
        let server: NginxServer
        let proxy: FaultProxy
        let expected: [UInt8]
        var url: String { proxy.url("a.cairn") }
        var out: String { work.appending("copy.cairn") }

        init(seed: UInt64) throws {
            work = try TemporaryDirectory(prefix: "cairn-fetch-fault")
            let served = work.appending("www")
            try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
            try FetchTests.archive(FetchTests.tree(seed: seed, count: 24), at: served + "/a.cairn", work: work)
            expected = try FetchTests.bytes(served + "/a.cairn")
            server = try NginxServer(root: served)
            proxy = try FaultProxy(upstreamPort: server.port)
        }

        deinit {
            proxy.stop()
            server.stop()
            work.remove()
        }
    }

    @Test("the server cuts the connection mid-body twice: one run retries from the last verified commit and ends byte-identical")
    func serverCutsTwice() async throws { try await onDedicatedThread { try Self().serverCutsTwiceOnThread() } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func serverCutsTwiceOnThread() throws {
        let setup = try Setup(seed: 21)
        try setup.proxy.set(.cut(afterBodyBytes: 700_000, times: 2))
        // One connection: its requests are counted (`ParallelFetchTests` cuts one of several).
        let result = try FetchCLI.run(["fetch", setup.url, "-o", setup.out, "--json", "--connections", "1"])
        #expect(result.status == 0, "\(result.stderr)")
        try FetchTests.expectSame(setup.out, setup.expected)
        #expect(result.stdout.contains("\"retries\":2"), "\(result.stdout)")
        let requests = setup.proxy.requests
        #expect(requests.count == 3, "\(requests)")
        // The retries asked for ranges: what was verified is not sent again.
        #expect(requests.dropFirst().allSatisfy { $0.status == 206 }, "\(requests)")
    }

    @Test("a stalled server: --timeout ends the transfer, the retry completes it; with --retries 0 exit 1 naming the URL")
    func stall() async throws { try await onDedicatedThread { try Self().stallOnThread() } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func stallOnThread() throws {
        let setup = try Setup(seed: 22)
        try setup.proxy.set(.stall(afterBodyBytes: 400_000, times: 1))
        // The proxy stalls until the client gives up: only --timeout can end this run.
        let failed = try FetchCLI.run(["fetch", setup.url, "-o", setup.out, "--timeout", "1", "--retries", "0"])
        #expect(failed.status == 1)
        #expect(failed.stderr.contains(setup.url), "\(failed.stderr)")
        #expect(!RawFileSystem.exists(Array(setup.out.utf8)))

        // The rerun shares the first piece's remaining 648 kB among the connections (three
        // pieces of 192 KiB and one of 57 KiB, in whichever order they reach the proxy): the
        // first stalls after 50 kB.
        try setup.proxy.set(.stall(afterBodyBytes: 50_000, times: 1))
        let retried = try FetchCLI.run(["fetch", setup.url, "-o", setup.out, "--timeout", "1", "--json"])
        #expect(retried.status == 0, "\(retried.stderr)")
        try FetchTests.expectSame(setup.out, setup.expected)
        #expect(retried.stdout.contains("\"retries\":1"), "\(retried.stdout)")
    }

    @Test("library: cancelling a fetch of a stalled server ends it, not the stall timeout; the partial resumes")
    func cancelWhileStalled() async throws {
        let setup = try Setup(seed: 25)
        // The body stalls after 400 kB until the client gives up; its stall timeout is the tests'
        // safety bound, so only the cancel can end it.
        try setup.proxy.set(.stall(afterBodyBytes: 400_000, times: 1))
        var options = FetchOptions(retries: 0)
        options.stallTimeout = Await.safetyBound
        let fetcher = try ArchiveFetcher(from: ArchiveLocation(parsing: setup.url), options: options)
        let out = setup.out
        let task = Task { try await fetcher.fetch(to: .file(path: out)) }
        // Until the stall: every byte before it has arrived. Progress counts what arrived, piece
        // by piece (the writer gathers 1 MiB before writing).
        try await Await.suspendingUntil("the fetch receives the 400 kB before the stall") {
            setup.proxy.stallCount == 1 && fetcher.progress.completedUnitCount >= 400_000
        }
        let cancelled = Date()
        task.cancel()
        let outcome = await task.result
        let took = Date().timeIntervalSince(cancelled)
        #expect(throws: CancellationError.self) { try outcome.get() }
        // A timer never fires early: ending before the stall timeout could fire, the cancel ended it.
        #expect(took < Await.safetyBound, "cancelling waited for the stall timeout")
        let resumed = try await ArchiveFetcher(from: ArchiveLocation(parsing: setup.url)).fetch(to: .file(path: out))
        try FetchTests.expectSame(out, setup.expected)
        #expect(resumed.resumedFrom > 0)
    }

    @Test("SIGINT ends a fetch stuck on a stalled server at once, exit 130, with §2.3's one line naming the partial and the command")
    func interruptWhileStalled() async throws { try await onDedicatedThread { try Self().interruptWhileStalledOnThread() } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func interruptWhileStalledOnThread() throws {
        let setup = try Setup(seed: 27)
        try setup.proxy.set(.stall(afterBodyBytes: 400_000, times: 1))
        // A stall timeout of the tests' safety bound: only the signal can end the run promptly.
        let timeout = String(Int(Await.safetyBound))
        let child = try FetchCLI.start(["fetch", setup.url, "-o", setup.out, "--timeout", timeout])
        try Await.until("the proxy stalls the fetch") { setup.proxy.stallCount == 1 }
        let signalled = Date()
        kill(child.pid, SIGINT)
        let result = try child.wait(for: "the stalled fetch ends after SIGINT")
        #expect(result.status == 130, "\(result.stderr)")
        // A timer never fires early: ending before the stall timeout could fire, the signal ended it.
        #expect(Date().timeIntervalSince(signalled) < Await.safetyBound, "the fetch waited for its stall timeout")
        let lines = result.stderr.split(separator: "\n")
        #expect(
            lines.last == "cairn: interrupted; kept what verified in \(setup.out).partial; continue with: cairn fetch \(setup.url) -o \(setup.out) --timeout \(timeout)",
            "\(result.stderr)")
        let rerun = try FetchCLI.run(["fetch", setup.url, "-o", setup.out, "-q"])
        #expect(rerun.status == 0, "\(rerun.stderr)")
        try FetchTests.expectSame(setup.out, setup.expected)
    }

    @Test("SIGTERM ends a remote extraction stuck on a stalled server, exit 143")
    func termWhileStalled() async throws { try await onDedicatedThread { try Self().termWhileStalledOnThread() } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func termWhileStalledOnThread() throws {
        let setup = try Setup(seed: 24)
        // Every answer stalls after its first bytes: the footer request, then each retry.
        try setup.proxy.set(.stall(afterBodyBytes: 100))
        let child = try FetchCLI.start(["extract", setup.url, "-C", setup.work.appending("dest"), "--no-progress", "data"])
        try Await.until("the proxy stalls the extraction") { setup.proxy.stallCount >= 1 }
        kill(child.pid, SIGTERM)
        // Without the signal, the stall timeouts and retries end the run with exit 1, not 143.
        let result = try child.wait(for: "the stalled extraction ends after SIGTERM")
        #expect(result.status == 143, "\(result.stderr)")
        #expect(!RawFileSystem.exists(Array(setup.work.appending("dest").utf8)))
    }

    @Test("a 206 that starts elsewhere than asked is never spliced in: the fetch starts over and ends byte-identical")
    func shiftedRange() async throws { try await onDedicatedThread { try Self().shiftedRangeOnThread() } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func shiftedRangeOnThread() throws {
        let setup = try Setup(seed: 23)
        try setup.proxy.set(.cut(afterBodyBytes: 900_000, times: 1))
        let cut = try FetchCLI.run(["fetch", setup.url, "-o", setup.out, "--retries", "0", "-q"])
        #expect(cut.status == 1)
        let prefix = try #require(try? RawFileSystem.status(Array((setup.out + ".partial").utf8)))
        #expect(prefix.st_size > 0)

        try setup.proxy.set(.shiftContentRange(by: 100))
        let rerun = try FetchCLI.run(["fetch", setup.url, "-o", setup.out, "--json"])
        #expect(rerun.status == 0, "\(rerun.stderr)")
        try FetchTests.expectSame(setup.out, setup.expected)
        #expect(rerun.stdout.contains("\"restarts\":1"), "\(rerun.stdout)")
        // The shifted 206 was refused; the archive then came whole, as a 200.
        #expect(setup.proxy.requests.contains { $0.status == 200 && $0.method == "GET" }, "\(setup.proxy.requests)")
    }
}
