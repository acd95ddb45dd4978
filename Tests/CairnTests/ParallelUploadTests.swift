import CairnTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

@testable import Cairn

/// Issue 26, items 3 and 4: `create -o s3://` with up to M parts in flight
/// (`Spec/0003-command-line.md §3.3` item 2), resume that keeps every acknowledged part however
/// they completed (item 6), faults on one part or on the completion, `info` of an upload
/// (§6) and `abort` (§16), against `rclone serve s3` on 127.0.0.1, with the fault proxy in front
/// of it for cuts and stalls. Serialized: the kill test follows a child process.
@Suite("Parallel multipart upload", .serialized)
struct ParallelUploadTests {
    /// The environment of a CLI child whose requests go through `proxy`.
    static func environment(_ server: RcloneS3Server, via proxy: FaultProxy) -> [String: String] {
        var environment = ObjectStoreTests.environment(server)
        environment["AWS_ENDPOINT_URL"] = "http://127.0.0.1:\(proxy.port)"
        return environment
    }

    @Test("§3.3 item 2: the window runs M part uploads at once, gives room only when one ends, and keeps the first failure while the others finish")
    func windowRunsMAtOnce() async throws {
        let window = PartUploadWindow(limit: 3)
        let gates = (0..<3).map { _ in DispatchSemaphore(value: 0) }
        let started = Atomic<Int>(0)
        let finished = Atomic<Int>(0)
        for index in 0..<3 {
            let gate = gates[index]
            window.start { () throws(CairnError) in
                started.wrappingAdd(1, ordering: .relaxed)
                gate.wait()
                finished.wrappingAdd(1, ordering: .relaxed)
                if index == 1 { throw CairnError(.network, "part 2 was cut", path: "s3://cairn/k") }
            }
        }
        // All three run together: none can end before its gate opens.
        try Await.until("three uploads running at once") { started.load(ordering: .relaxed) == 3 }
        #expect(window.inFlight == 3)
        gates[0].signal()
        #expect(await window.waitForRoom() == nil)
        #expect(finished.load(ordering: .relaxed) == 1, "room only once one ended")
        #expect(window.inFlight == 2)
        gates[1].signal()
        try Await.until("part 2 failed") { window.failure != nil }
        gates[2].signal()
        let failure = await window.drain()
        #expect(window.inFlight == 0)
        #expect(finished.load(ordering: .relaxed) == 3, "the others finished after the failure")
        #expect(failure?.message == "part 2 was cut", "\(String(describing: failure))")
        #expect(await window.waitForRoom()?.code == .network, "the failure stays")
    }

    @Test("§3.3 item 2: with 4 parts in flight, the parts of an archive larger than its estimate still grow by number (limit 8, 1 MiB first parts): each at least its rule size, at most 8, and a resume with 4 in flight completes byte-identical")
    func partSizeRuleWithPartsInFlight() async throws { try await onDedicatedThread { try Self().partSizeRuleWithPartsInFlightOnThread() } }

    func partSizeRuleWithPartsInFlightOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-par-grow")
        defer { work.remove() }
        let server = try RcloneS3Server()
        defer { server.stop() }
        let source = work.appending("src")
        try ObjectStoreTests.smallFiles(seed: 41, total: 10_500 << 10).materialize(at: source)
        let localPath = work.appending("local.cairn")
        let created = try FetchCLI.run(["create", "-q", "-o", localPath, "data"], in: source)
        try #require(created.status == 0, "\(created.stderr)")
        let local = try FetchTests.bytes(localPath)
        #expect(local.count > 10 << 20, "more than 8 first-size parts hold")
        let rule = PartSizeRule(smallestPartSize: 1 << 20, largestPartSize: 5 << 30, partLimit: 8)
        let location = try S3Location(parsing: "s3://cairn/grown.cairn")
        let store = S3Client(configuration: try ObjectStoreTests.configuration(server))
        let statePath = work.appending("grown.state")
        try blockingAsync {
            var configuration = Archiver.Configuration()
            configuration.sourcePaths = [Array("data".utf8)]
            // Given up after the entries (no manifest yet): abandon waits for the parts in flight.
            let sink = try ObjectStoreSink(
                location: location, store: store, overwrite: false, statePath: statePath, sizeEstimate: nil, rule: rule, uploadConcurrency: 4)
            let archiver = try Archiver(sink: sink, configuration: configuration)
            try await archiver.appendItem(atPath: Array((source + "/data").utf8), pathInArchive: Array("data".utf8))
            await archiver.abandon()
            #expect(sink.partCount >= 7, "\(sink.partCount) parts")
        }
        let recorded = try #require(try MultipartUploadState.load(from: statePath))
        #expect(recorded.parts.map(\.number) == Array(1...recorded.parts.count), "every part made was acknowledged and recorded")
        for part in recorded.parts {
            #expect(part.size >= rule.size(ofPart: part.number, base: 1 << 20), "part \(part.number): \(part.size) bytes")
        }
        #expect(recorded.parts.count >= 7 && recorded.parts[6].size >= 2 << 20, "part 7 is at least twice the first size")
        try blockingAsync {
            var configuration = Archiver.Configuration()
            configuration.sourcePaths = [Array("data".utf8)]
            let resumed = try ObjectStoreSink(
                resuming: location, configuration: store.configuration, statePath: statePath, options: .init(uploadConcurrency: 4))
            let archiver = try Archiver(sink: resumed, configuration: configuration)
            try await archiver.appendItem(atPath: Array((source + "/data").utf8), pathInArchive: Array("data".utf8))
            _ = try await archiver.finish()
            #expect(resumed.partCount <= rule.partLimit, "\(resumed.partCount) parts")
            #expect(resumed.keptBytes == recorded.parts.reduce(0) { $0 + $1.size })
        }
        try FetchTests.expectSame(server.objectPath(key: "grown.cairn"), local)
    }

    @Test("§3.3 items 2, 5, 6: part 1 cut on every try while parts after it succeed: the run fails keeping the upload, the state records the later parts without part 1, and --resume keeps every one of them, sending part 1 and the rest; byte-identical")
    func resumeKeepsPartsOutOfOrder() async throws { try await onDedicatedThread { try Self().resumeKeepsPartsOutOfOrderOnThread() } }

    func resumeKeepsPartsOutOfOrderOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-par-gap")
        defer { work.remove() }
        let server = try RcloneS3Server()
        defer { server.stop() }
        let proxy = try FaultProxy(upstreamPort: server.port)
        defer { proxy.stop() }
        let (source, local) = try ObjectStoreTests.source(work, seed: 42, count: 20)
        let statePath = work.appending("gap.state")
        // Part 1 is cut after 100 KB on every try (5 tries, about 3 s of backoff); the others pass.
        try proxy.set(.cutRequest(afterBodyBytes: 100_000), onlyFor: "^PUT .*partNumber=1&")
        let failed = try ChildProcess.run(
            FetchCLI.executable, ["create", "-q", "--upload-concurrency", "4", "--upload-state", statePath, "-o", "s3://cairn/gap.cairn", "data"],
            in: source, environment: Self.environment(server, via: proxy))
        #expect(failed.status == 1, "\(failed.stderr)")
        #expect(failed.stderr.contains("UploadPart 1"), "\(failed.stderr)")
        #expect(failed.stderr.contains("continue it with --resume"), "\(failed.stderr)")
        #expect(!FileManager.default.fileExists(atPath: server.objectPath(key: "gap.cairn")))
        let recorded = try #require(try MultipartUploadState.load(from: statePath))
        let numbers = recorded.parts.map(\.number)
        #expect(!numbers.contains(1), "\(numbers)")
        #expect(numbers.contains(2), "part 2 went while part 1 was retried: \(numbers)")
        #expect(proxy.requests.filter { $0.fault == "cutrequest" }.count == 5, "\(proxy.requests)")

        // info shows the upload and the command that continues it.
        let info = try ChildProcess.run(FetchCLI.executable, ["info", statePath], in: work.path, environment: ObjectStoreTests.environment(server))
        #expect(info.status == 0, "\(info.stderr)")
        #expect(info.stdout.contains("upload id:         \(recorded.uploadID)"), "\(info.stdout)")
        #expect(info.stdout.contains("parts done:        \(numbers.count) ("), "\(info.stdout)")
        #expect(info.stdout.contains("cairn create --resume -o s3://cairn/gap.cairn --s3-endpoint http://127.0.0.1:\(proxy.port) --upload-state \(statePath) data"), "\(info.stdout)")

        try proxy.set(.passThrough)
        let resumed = try ChildProcess.run(
            FetchCLI.executable, ["create", "--json", "--resume", "--upload-state", statePath, "-o", "s3://cairn/gap.cairn", "data"],
            in: source, environment: Self.environment(server, via: proxy))
        #expect(resumed.status == 0, "\(resumed.stderr)")
        try FetchTests.expectSame(server.objectPath(key: "gap.cairn"), local)
        let kept = recorded.parts.reduce(UInt64(0)) { $0 + $1.size }
        #expect(ObjectStoreTests.number("keptBytes", in: resumed.stdout) == kept, "every acknowledged part kept: \(resumed.stdout)")
        #expect(ObjectStoreTests.number("uploadedBytes", in: resumed.stdout) == UInt64(local.count) - kept, "\(resumed.stdout)")
        #expect(!FileManager.default.fileExists(atPath: statePath))
    }

    @Test("§3.3 item 5: one part cut twice while the other parts in flight go through: retried, the upload completes byte-identical to a local create")
    func cutPartAmongOthers() async throws { try await onDedicatedThread { try Self().cutPartAmongOthersOnThread() } }

    func cutPartAmongOthersOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-par-cut")
        defer { work.remove() }
        let server = try RcloneS3Server()
        defer { server.stop() }
        let proxy = try FaultProxy(upstreamPort: server.port)
        defer { proxy.stop() }
        let (source, local) = try ObjectStoreTests.source(work, seed: 43, count: 14)
        try proxy.set(.cutRequest(afterBodyBytes: 2 << 20, times: 2), onlyFor: "^PUT .*partNumber=2&")
        let created = try ChildProcess.run(
            FetchCLI.executable, ["create", "-q", "--upload-concurrency", "3", "-o", "s3://cairn/cut.cairn", "data"], in: source,
            environment: Self.environment(server, via: proxy))
        #expect(created.status == 0, "\(created.stderr)")
        #expect(proxy.requests.filter { $0.fault == "cutrequest" }.count == 2, "\(proxy.requests)")
        #expect(proxy.requests.filter { $0.method == "PUT" && $0.target.contains("partNumber=2&") }.count == 3, "\(proxy.requests)")
        try FetchTests.expectSame(server.objectPath(key: "cut.cairn"), local)
        #expect(!FileManager.default.fileExists(atPath: try ObjectStoreTests.statePath(server, "s3://cairn/cut.cairn")))
    }

    @Test("§3.3 items 4 and 6: killed after CompleteMultipartUpload was sent, before its answer was read: the printed resume command finds the object complete (exit 0), removes the state; one object, byte-identical")
    func killAfterCompleteSent() async throws { try await onDedicatedThread { try Self().killAfterCompleteSentOnThread() } }

    func killAfterCompleteSentOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-par-complete")
        defer { work.remove() }
        let server = try RcloneS3Server()
        defer { server.stop() }
        let proxy = try FaultProxy(upstreamPort: server.port)
        defer { proxy.stop() }
        let (source, local) = try ObjectStoreTests.source(work, seed: 44, count: 10)
        // The default state file of the upload through the proxy (its endpoint is recorded).
        let state = try ArchiveLocation.uploadStatePath(
            of: S3Location(parsing: "s3://cairn/done.cairn"), endpoint: "http://127.0.0.1:\(proxy.port)",
            environment: ["XDG_STATE_HOME": ObjectStoreTests.stateHome(server)])
        // CompleteMultipartUpload reaches the store; its answer stops after the head.
        try proxy.set(.stall(afterBodyBytes: 0, times: 1), onlyFor: "^POST .*uploadId=")
        let environment = Self.environment(server, via: proxy)
        let child = try ChildProcess.start(FetchCLI.executable, ["create", "-q", "-o", "s3://cairn/done.cairn", "data"], in: source, environment: environment)
        try Await.until("CompleteMultipartUpload's answer stalls") { proxy.stallCount == 1 || !child.process.isRunning }
        kill(child.pid, SIGKILL)
        _ = child.wait()
        #expect(proxy.stallCount == 1)
        #expect(FileManager.default.fileExists(atPath: state), "the kill left the state file")
        try FetchTests.expectSame(server.objectPath(key: "done.cairn"), local)

        let info = try ChildProcess.run(FetchCLI.executable, ["info", "s3://cairn/done.cairn", "--uploads"], in: source, environment: environment)
        #expect(info.status == 0, "\(info.stderr)")
        #expect(info.stdout.contains("the last part too"), "\(info.stdout)")
        let command = try #require(info.stdout.split(separator: "\n").first { $0.hasPrefix("continue it with:") }).dropFirst("continue it with:".count)
            .trimmingCharacters(in: .whitespaces)
        #expect(command == "cairn create --resume -o s3://cairn/done.cairn --s3-endpoint http://127.0.0.1:\(proxy.port) data", "\(command)")

        try proxy.set(.passThrough)
        // The printed command, as a user pastes it (cairn found on PATH).
        var shellEnvironment = environment
        shellEnvironment["PATH"] = try FetchCLI.executable.deletingLastPathComponent().path + ":/usr/bin:/bin"
        let resumed = try ChildProcess.run(URL(fileURLWithPath: "/bin/sh"), ["-c", command], in: source, environment: shellEnvironment)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.stdout.contains("already complete; nothing to resume"), "\(resumed.stdout)")
        #expect(!FileManager.default.fileExists(atPath: state))
        try FetchTests.expectSame(server.objectPath(key: "done.cairn"), local)
        #expect(proxy.requests.filter { $0.method == "POST" && $0.target.contains("uploadId=") }.count == 1, "Complete was sent once: \(proxy.requests)")
    }

    @Test("§16: abort gives up the recorded upload (the store forgets it), removes the state file, exit 0; again, or for an object with nothing recorded: exit 1, named; info --uploads shows it first")
    func abortRecordedUpload() async throws { try await onDedicatedThread { try Self().abortRecordedUploadOnThread() } }

    func abortRecordedUploadOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-par-abort")
        defer { work.remove() }
        let server = try RcloneS3Server()
        defer { server.stop() }
        let (source, _) = try ObjectStoreTests.source(work, seed: 45, count: 8)
        let location = try S3Location(parsing: "s3://cairn/a.cairn")
        let configuration = try ObjectStoreTests.configuration(server)
        let state = try ObjectStoreTests.statePath(server, "s3://cairn/a.cairn")
        try blockingAsync {
            var archiverConfiguration = Archiver.Configuration()
            archiverConfiguration.sourcePaths = [Array("data".utf8)]
            let sink = try ObjectStoreSink(location: location, configuration: configuration, statePath: state)
            let archiver = try Archiver(sink: sink, configuration: archiverConfiguration)
            try await archiver.appendItem(atPath: Array((source + "/data").utf8), pathInArchive: Array("data".utf8))
            await archiver.abandon()
        }
        let recorded = try #require(try MultipartUploadState.load(from: state))
        try #require(!recorded.parts.isEmpty)
        let parts = server.url(bucket: "cairn", key: "a.cairn") + "?uploadId=\(recorded.uploadID)"
        #expect(try server.request("GET", parts).status == 200, "the store holds the upload")

        let info = try ObjectStoreTests.cli(["info", "--json", "s3://cairn/a.cairn", "--uploads"], in: work.path, server)
        #expect(info.status == 0, "\(info.stderr)")
        #expect(info.stdout.contains("\"uploadID\":\"\(recorded.uploadID)\""), "\(info.stdout)")
        #expect(ObjectStoreTests.number("partsDone", in: info.stdout) == UInt64(recorded.parts.count), "\(info.stdout)")
        #expect(ObjectStoreTests.number("bytesDone", in: info.stdout) == recorded.parts.reduce(0) { $0 + $1.size }, "\(info.stdout)")

        let aborted = try ObjectStoreTests.cli(["abort", "s3://cairn/a.cairn"], in: work.path, server)
        #expect(aborted.status == 0, "\(aborted.stderr)")
        #expect(aborted.stdout.contains("aborted the multipart upload to s3://cairn/a.cairn (upload id \(recorded.uploadID)"), "\(aborted.stdout)")
        #expect(!FileManager.default.fileExists(atPath: state))
        #expect(try server.request("GET", parts).status == 404, "the store no longer knows the upload")

        let again = try ObjectStoreTests.cli(["abort", "s3://cairn/a.cairn"], in: work.path, server)
        #expect(again.status == 1)
        #expect(again.stderr.contains("no interrupted upload to s3://cairn/a.cairn is recorded"), "\(again.stderr)")
        let none = try ObjectStoreTests.cli(["info", "s3://cairn/a.cairn", "--uploads"], in: work.path, server)
        #expect(none.status == 1)
        #expect(none.stderr.contains("no interrupted upload"), "\(none.stderr)")
        let usage = try ObjectStoreTests.cli(["abort", "a.cairn"], in: work.path, server)
        #expect(usage.status == 2, "\(usage.stderr)")
        let bad = try ObjectStoreTests.cli(["create", "--upload-concurrency", "0", "-o", "s3://cairn/b.cairn", "data"], in: source, server)
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("--upload-concurrency takes a count from 1 to 64, not '0'"), "\(bad.stderr)")
        let timeout = try ObjectStoreTests.cli(["create", "--timeout", "0", "-o", "s3://cairn/b.cairn", "data"], in: source, server)
        #expect(timeout.status == 2, "\(timeout.stderr)")
        #expect(timeout.stderr.contains("--timeout takes seconds"), "\(timeout.stderr)")
        let abortTimeout = try ObjectStoreTests.cli(["abort", "--timeout", "x", "s3://cairn/b.cairn"], in: source, server)
        #expect(abortTimeout.status == 2, "\(abortTimeout.stderr)")
        let localTimeout = try ObjectStoreTests.cli(["create", "--timeout", "5", "-o", "l.cairn", "data"], in: source, server)
        #expect(localTimeout.status == 2, "--timeout is for -o s3://: \(localTimeout.stderr)")
        let local = try ObjectStoreTests.cli(["create", "--upload-concurrency", "2", "-o", "l.cairn", "data"], in: source, server)
        #expect(local.status == 2, "\(local.stderr)")
        #expect(!FileManager.default.fileExists(atPath: source + "/l.cairn"))
    }
}
