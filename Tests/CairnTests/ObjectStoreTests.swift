import CairnTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

@testable import Cairn

/// `s3://` archives against a real S3 server, `rclone serve s3` on 127.0.0.1 (issue 12):
/// uploads while archiving, resumes after a kill or an abandoned run, no object at the key before
/// completion, wrong credentials, a missing bucket, a server that goes away mid-part, and ranges
/// answered with 200. Serialized: the kill tests depend on timing and share two cores.
@Suite("Object storage over S3", .serialized)
struct ObjectStoreTests {
    /// Files of seeded random bytes (incompressible, no dedup): `count` × 1–3 MiB, so an archive
    /// spans several 8 MiB parts.
    static func tree(seed: UInt64, count: Int = 12) -> TreeBuilder {
        var generator = SeededGenerator(seed: seed)
        var tree = TreeBuilder()
        tree.directory("data")
        for index in 0..<count {
            let size = Int.random(in: (1 << 20)...(3 << 20), using: &generator)
            tree.file("data/f\(index).bin", generator.bytes(size))
        }
        tree.file("data/notes.txt", Array(String(repeating: "a line of notes\n", count: 400).utf8))
        return tree
    }

    /// The environment of a CLI child talking to `server`.
    /// Where the CLI children of `server`'s tests keep upload states (`XDG_STATE_HOME`).
    static func stateHome(_ server: RcloneS3Server) -> String { server.root + "-state" }

    /// The default state file of an upload to `s3://BUCKET/KEY` on `server` (Spec/0003 §3.3).
    static func statePath(_ server: RcloneS3Server, _ location: String) throws -> String {
        try ArchiveLocation.uploadStatePath(
            of: S3Location(parsing: location), endpoint: server.endpoint, environment: ["XDG_STATE_HOME": stateHome(server)])
    }

    static func environment(_ server: RcloneS3Server, secret: String? = nil) -> [String: String] {
        var environment = server.environment
        environment["XDG_STATE_HOME"] = stateHome(server)
        if let secret { environment["AWS_SECRET_ACCESS_KEY"] = secret }
        environment["AWS_SESSION_TOKEN"] = ""
        return environment
    }

    static func cli(_ arguments: [String], in directory: String, _ server: RcloneS3Server, secret: String? = nil) throws
        -> ChildProcess.Result
    {
        try ChildProcess.run(
            FetchCLI.executable, arguments, in: directory, environment: environment(server, secret: secret))
    }

    /// A source tree at `work/src` and the archive a local `create` of it writes.
    static func source(_ work: TemporaryDirectory, seed: UInt64, count: Int = 12) throws -> (directory: String, local: [UInt8]) {
        let source = work.appending("src")
        try tree(seed: seed, count: count).materialize(at: source)
        let local = work.appending("local.cairn")
        let created = try FetchCLI.run(["create", "-q", "-o", local, "data"], in: source)
        try #require(created.status == 0, "\(created.stderr)")
        return (source, try FetchTests.bytes(local))
    }

    static func configuration(_ server: RcloneS3Server, secret: String? = nil) throws -> S3Configuration {
        try S3Configuration(
            endpoint: server.endpoint, region: server.region,
            credentials: S3Credentials(accessKeyID: server.accessKeyID, secretAccessKey: secret ?? server.secretAccessKey),
            addressing: server.addressing == .pathStyle ? .path : .virtualHosted)
    }

    @Test("create -o s3:// uploads the archive byte for byte as a local create writes it; list, verify, extract and fetch read it back")
    func roundTrip() async throws { try await onDedicatedThread { try Self().roundTripOnThread() } }

    func roundTripOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-s3-round")
        defer { work.remove() }
        let server = try RcloneS3Server()
        defer { server.stop() }
        let (source, local) = try Self.source(work, seed: 1)

        let created = try Self.cli(["create", "--json", "-o", "s3://cairn/exports/a.cairn", "data"], in: source, server)
        #expect(created.status == 0, "\(created.stderr)")
        try FetchTests.expectSame(server.objectPath(key: "exports/a.cairn"), local)
        #expect(created.stdout.contains("\"uploadedBytes\" : \(local.count)") || created.stdout.contains("\"uploadedBytes\":\(local.count)"), "\(created.stdout)")
        #expect(!FileManager.default.fileExists(atPath: try Self.statePath(server, "s3://cairn/exports/a.cairn")), "the state file is removed once the object exists")

        let listed = try Self.cli(["list", "s3://cairn/exports/a.cairn"], in: work.path, server)
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout.contains("data/f11.bin"), "\(listed.stdout)")
        let verified = try Self.cli(["verify", "s3://cairn/exports/a.cairn"], in: work.path, server)
        #expect(verified.status == 0, "\(verified.stderr)")

        // One file: rclone answers its ranges with 200 and a Content-Range.
        let one = try Self.cli(["extract", "s3://cairn/exports/a.cairn", "-C", "one", "data/f3.bin"], in: work.path, server)
        #expect(one.status == 0, "\(one.stderr)")
        #expect(try FetchTests.bytes(work.appending("one/data/f3.bin")) == FetchTests.bytes(source + "/data/f3.bin"))
        let whole = try Self.cli(["extract", "s3://cairn/exports/a.cairn", "-C", "all"], in: work.path, server)
        #expect(whole.status == 0, "\(whole.stderr)")
        #expect(try TreeSnapshot(at: work.appending("all/data")) == TreeSnapshot(at: source + "/data"))

        let fetched = try Self.cli(["fetch", "s3://cairn/exports/a.cairn", "-o", "copy.cairn", "-q"], in: work.path, server)
        #expect(fetched.status == 0, "\(fetched.stderr)")
        try FetchTests.expectSame(work.appending("copy.cairn"), local)
        // An s3:// seed: its chunk records are copied with range requests.
        let seeded = try Self.cli(
            ["fetch", "s3://cairn/exports/a.cairn", "-o", "seeded.cairn", "--seed", "s3://cairn/exports/a.cairn", "--json"], in: work.path, server)
        #expect(seeded.status == 0, "\(seeded.stderr)")
        try FetchTests.expectSame(work.appending("seeded.cairn"), local)
        #expect(Self.number("seedBytes", in: seeded.stdout) > UInt64(local.count / 2), "\(seeded.stdout)")

        // An existing object is never replaced without --force.
        let again = try Self.cli(["create", "-q", "-o", "s3://cairn/exports/a.cairn", "data"], in: source, server)
        #expect(again.status == 1)
        #expect(again.stderr.contains("s3://cairn/exports/a.cairn: already exists; use --force"), "\(again.stderr)")
        let forced = try Self.cli(["create", "-q", "--force", "-o", "s3://cairn/exports/a.cairn", "data/notes.txt"], in: source, server)
        #expect(forced.status == 0, "\(forced.stderr)")
        #expect(try FetchTests.bytes(server.objectPath(key: "exports/a.cairn")).count < 100_000)
        // An archive smaller than the opening suffix request: rclone answers that suffix 416.
        let small = try Self.cli(["list", "s3://cairn/exports/a.cairn"], in: work.path, server)
        #expect(small.status == 0, "\(small.stderr)")
        #expect(small.stdout.contains("notes.txt"), "\(small.stdout)")
    }

    @Test("an upload abandoned after some parts resumes with the same upload: the parts the store holds are not sent again, and the object is byte-identical")
    func resumeAbandonedUpload() async throws { try await onDedicatedThread { try Self().resumeAbandonedUploadOnThread() } }

    func resumeAbandonedUploadOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-s3-resume")
        defer { work.remove() }
        let server = try RcloneS3Server()
        defer { server.stop() }
        let (source, local) = try Self.source(work, seed: 2, count: 16)
        let location = try S3Location(parsing: "s3://cairn/r.cairn")
        let configuration = try Self.configuration(server)
        let statePath = work.appending("r.state")
        let objectPath = server.objectPath(key: "r.cairn")

        try blockingAsync {
            var archiverConfiguration = Archiver.Configuration()
            archiverConfiguration.sourcePaths = [Array("data".utf8)]
            // The first run: half the files, then given up (as a kill leaves it: nothing completed).
            let first = try ObjectStoreSink(location: location, configuration: configuration, statePath: statePath)
            let archiver = try Archiver(sink: first, configuration: archiverConfiguration)
            try await archiver.appendItem(atPath: Array((source + "/data").utf8), pathInArchive: Array("data".utf8))
            await archiver.abandon()
            #expect(first.uploadedBytes >= 8 << 20, "at least one part reached the store")
            #expect(!FileManager.default.fileExists(atPath: objectPath), "no object before completion")
        }
        let recorded = try #require(try MultipartUploadState.load(from: statePath))
        #expect(recorded.parts.count >= 1)

        try blockingAsync {
            var archiverConfiguration = Archiver.Configuration()
            archiverConfiguration.sourcePaths = [Array("data".utf8)]
            let resumed = try ObjectStoreSink(resuming: location, configuration: configuration, statePath: statePath)
            #expect(resumed.isResumed)
            let archiver = try Archiver(sink: resumed, configuration: archiverConfiguration)
            try await archiver.appendItem(atPath: Array((source + "/data").utf8), pathInArchive: Array("data".utf8))
            _ = try await archiver.finish()
            let kept = recorded.parts.reduce(UInt64(0)) { $0 + $1.size }
            #expect(resumed.keptBytes == kept)
            #expect(resumed.uploadedBytes == UInt64(local.count) - kept, "only the parts the store lacked were sent")
        }
        try FetchTests.expectSame(server.objectPath(key: "r.cairn"), local)
        #expect(!FileManager.default.fileExists(atPath: statePath))
    }

    @Test("create -o s3:// killed during the upload leaves no object at the key; --resume completes it byte-identical, sending less than the whole")
    func killThenResume() async throws { try await onDedicatedThread { try Self().killThenResumeOnThread() } }

    func killThenResumeOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-s3-kill")
        defer { work.remove() }
        let server = try RcloneS3Server()
        defer { server.stop() }
        let (source, local) = try Self.source(work, seed: 3, count: 20)
        let state = try Self.statePath(server, "s3://cairn/k.cairn")
        let child = try ChildProcess.start(
            FetchCLI.executable, ["create", "-q", "-o", "s3://cairn/k.cairn", "data"], in: source, environment: Self.environment(server))
        // Kill it once the state file records two parts.
        try Await.until("the upload state records 2 parts") {
            Self.recordedParts(state) >= 2 || !child.process.isRunning
        }
        kill(child.pid, SIGKILL)
        _ = child.wait()
        #expect(!FileManager.default.fileExists(atPath: server.objectPath(key: "k.cairn")), "no object at the key after a kill")
        let head = try server.request("HEAD", server.url(bucket: "cairn", key: "k.cairn"))
        #expect(head.status == 404)

        let refused = try Self.cli(["create", "-q", "-o", "s3://cairn/k.cairn", "data"], in: source, server)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("k.cairn.partial.upload") && refused.stderr.contains("--resume"), "\(refused.stderr)")

        let resumed = try Self.cli(["create", "--json", "--resume", "-o", "s3://cairn/k.cairn", "data"], in: source, server)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.stderr.contains("resuming the upload"), "\(resumed.stderr)")
        try FetchTests.expectSame(server.objectPath(key: "k.cairn"), local)
        let uploaded = Self.number("uploadedBytes", in: resumed.stdout)
        let kept = Self.number("keptBytes", in: resumed.stdout)
        #expect(kept >= 16 << 20, "\(resumed.stdout)")
        #expect(uploaded + kept == UInt64(local.count), "\(resumed.stdout)")
        #expect(!FileManager.default.fileExists(atPath: state))

        let nothing = try Self.cli(["create", "--resume", "-o", "s3://cairn/k.cairn", "data"], in: source, server)
        #expect(nothing.status == 0)
        #expect(nothing.stdout.contains("already complete; nothing to resume"), "\(nothing.stdout)")
    }

    @Test("--force never aborts an upload another cairn process is running with the same state file")
    func forceRespectsALiveUpload() async throws { try await onDedicatedThread { try Self().forceRespectsALiveUploadOnThread() } }

    func forceRespectsALiveUploadOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-s3-live")
        defer { work.remove() }
        let server = try RcloneS3Server()
        defer { server.stop() }
        let (source, local) = try Self.source(work, seed: 12, count: 16)
        let state = try Self.statePath(server, "s3://cairn/live.cairn")
        let child = try ChildProcess.start(
            FetchCLI.executable, ["create", "-q", "-o", "s3://cairn/live.cairn", "data"], in: source, environment: Self.environment(server))
        try Await.until("the upload state records 1 part") {
            Self.recordedParts(state) >= 1 || !child.process.isRunning
        }
        let forced = try Self.cli(["create", "-q", "-f", "-o", "s3://cairn/live.cairn", "data/notes.txt"], in: source, server)
        #expect(forced.status == 1)
        #expect(forced.stderr.contains("another cairn process is uploading"), "\(forced.stderr)")
        let first = child.wait()
        #expect(first.status == 0, "\(first.stderr)")
        try FetchTests.expectSame(server.objectPath(key: "live.cairn"), local)
    }

    @Test("a state file left behind by a completed upload: --resume says it is complete; an object that is not the upload's is not replaced")
    func recordedUploadThatCompleted() async throws { try await onDedicatedThread { try Self().recordedUploadThatCompletedOnThread() } }

    func recordedUploadThatCompletedOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-s3-done")
        defer { work.remove() }
        let server = try RcloneS3Server()
        defer { server.stop() }
        let (source, local) = try Self.source(work, seed: 13, count: 2)
        try Data(local).write(to: URL(fileURLWithPath: server.objectPath(key: "done.cairn")))
        let state = try Self.statePath(server, "s3://cairn/done.cairn")
        // What a run killed between CompleteMultipartUpload and removing its state file leaves.
        // Its one part is the whole archive: the completion check reads it back by content.
        let digest = try SHA256.hash(local).hexString
        func record(lastEnd: UInt64) throws {
            unlink(state)
            let journal = try UploadJournal(path: state, creating: true)
            defer { journal.close() }
            try journal.begin(
                MultipartUploadState(endpoint: server.endpoint, bucket: "cairn", key: "done.cairn", uploadID: "gone", partSize: 8 << 20))
            try journal.record(.init(number: 1, etag: "\"e\"", size: lastEnd, end: lastEnd, chainDigest: nil, sha256: digest))
        }
        try record(lastEnd: UInt64(local.count))
        let resumed = try Self.cli(["create", "--resume", "-o", "s3://cairn/done.cairn", "data"], in: source, server)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.stdout.contains("already complete; nothing to resume"), "\(resumed.stdout)")
        #expect(!FileManager.default.fileExists(atPath: state), "the leftover state file is removed")

        try record(lastEnd: UInt64(local.count) + 1)
        let blocked = try Self.cli(["create", "--resume", "-o", "s3://cairn/done.cairn", "data"], in: source, server)
        #expect(blocked.status == 1)
        #expect(blocked.stderr.contains("not the interrupted upload's") && blocked.stderr.contains("--resume --force"), "\(blocked.stderr)")
        try FetchTests.expectSame(server.objectPath(key: "done.cairn"), local)
    }

    @Test(
        "issue 23: a state captured just before CompleteMultipartUpload, and an object of the archive's length that is not the archive: --resume refuses (exit 1), names what differs, keeps the state; --resume --force completes the upload over it"
    )
    func replacedObjectIsNotComplete() async throws { try await onDedicatedThread { try Self().replacedObjectIsNotCompleteOnThread() } }

    func replacedObjectIsNotCompleteOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-s3-replaced")
        defer { work.remove() }
        let server = try RcloneS3Server()
        defer { server.stop() }
        let (source, local) = try Self.source(work, seed: 15, count: 6)
        let location = try S3Location(parsing: "s3://cairn/same.cairn")
        let configuration = try Self.configuration(server)
        let state = try Self.statePath(server, "s3://cairn/same.cairn")
        let objectPath = server.objectPath(key: "same.cairn")
        var generator = SeededGenerator(seed: 16)
        let random = generator.bytes(local.count)
        try blockingAsync {
            var archiverConfiguration = Archiver.Configuration()
            archiverConfiguration.sourcePaths = [Array("data".utf8)]
            let sink = try ObjectStoreSink(location: location, configuration: configuration, statePath: state)
            let archiver = try Archiver(sink: sink, configuration: archiverConfiguration)
            try await archiver.appendItem(atPath: Array((source + "/data").utf8), pathInArchive: Array("data".utf8))
            // Random bytes of the archive's length appear at the key before the upload completes:
            // the sink sends its last part, finds the object and keeps the upload (Spec/0003
            // §3.3 item 4), so the state file records every part, as just before
            // CompleteMultipartUpload.
            try Data(random).write(to: URL(fileURLWithPath: objectPath))
            do {
                _ = try await archiver.finish()
                Issue.record("the upload completed over an object at the key")
            } catch let error as CairnError {
                #expect(error.code == .alreadyExists, "\(error)")
            }
            await sink.abandon()
        }
        let recorded = try #require(try MultipartUploadState.load(from: state))
        #expect(recorded.parts.last?.chainDigest == nil && recorded.parts.last?.end == UInt64(local.count), "the last part is recorded")
        #expect(recorded.parts.count >= 2)

        func refused(_ object: [UInt8], saying detail: String) throws {
            try Data(object).write(to: URL(fileURLWithPath: objectPath))
            let resumed = try Self.cli(["create", "--resume", "-o", "s3://cairn/same.cairn", "data"], in: source, server)
            #expect(resumed.status == 1, "\(resumed.stdout)\(resumed.stderr)")
            #expect(!resumed.stdout.contains("already complete"), "\(resumed.stdout)")
            #expect(resumed.stderr.contains("s3://cairn/same.cairn: the object at the key is not the interrupted upload's"), "\(resumed.stderr)")
            #expect(resumed.stderr.contains(detail) && resumed.stderr.contains("--resume --force"), "\(resumed.stderr)")
            #expect(FileManager.default.fileExists(atPath: state), "the state file is kept")
            #expect(try FetchTests.bytes(objectPath) == object, "the object is left as it is")
        }
        try refused(random, saying: "its first bytes")
        // The archive with one byte of its manifest changed: the first bytes and the footer are
        // right, the last part's SHA-256 is not.
        var manifestChanged = local
        manifestChanged[local.count - Footer.framedLength - 8] ^= 0x01
        try refused(manifestChanged, saying: "SHA-256")
        // The archive with one byte of its header record changed.
        var headerChanged = local
        headerChanged[Prelude.length + RecordFraming.headerLength + 2] ^= 0x01
        try refused(headerChanged, saying: "its first bytes")

        let forced = try Self.cli(["create", "-q", "--resume", "--force", "-o", "s3://cairn/same.cairn", "data"], in: source, server)
        #expect(forced.status == 0, "\(forced.stderr)")
        try FetchTests.expectSame(objectPath, local)
        #expect(!FileManager.default.fileExists(atPath: state))
    }

    @Test("a resume whose sources changed is refused, keeping the upload; --force starts over")
    func changedSourcesRefused() async throws { try await onDedicatedThread { try Self().changedSourcesRefusedOnThread() } }

    func changedSourcesRefusedOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-s3-changed")
        defer { work.remove() }
        let server = try RcloneS3Server()
        defer { server.stop() }
        let (source, _) = try Self.source(work, seed: 4, count: 16)
        let location = try S3Location(parsing: "s3://cairn/c.cairn")
        let configuration = try Self.configuration(server)
        let statePath = try Self.statePath(server, "s3://cairn/c.cairn")
        try blockingAsync {
            let sink = try ObjectStoreSink(location: location, configuration: configuration, statePath: statePath)
            let archiver = try Archiver(sink: sink)
            try await archiver.appendItem(atPath: Array((source + "/data").utf8), pathInArchive: Array("data".utf8))
            await archiver.abandon()
        }
        // The first file changes: the first part made again differs from the held one.
        var generator = SeededGenerator(seed: 99)
        try Data(generator.bytes(2 << 20)).write(to: URL(fileURLWithPath: source + "/data/f0.bin"))
        let resumed = try Self.cli(["create", "-q", "--resume", "-o", "s3://cairn/c.cairn", "data"], in: source, server)
        #expect(resumed.status == 1)
        #expect(resumed.stderr.contains("differs from the interrupted upload's from part 1"), "\(resumed.stderr)")
        #expect(FileManager.default.fileExists(atPath: statePath), "the upload is kept")
        #expect(!FileManager.default.fileExists(atPath: server.objectPath(key: "c.cairn")))
        let forced = try Self.cli(["create", "-q", "--force", "-o", "s3://cairn/c.cairn", "data"], in: source, server)
        #expect(forced.status == 0, "\(forced.stderr)")
        let local = work.appending("again.cairn")
        #expect(try FetchCLI.run(["create", "-q", "-o", local, "data"], in: source).status == 0)
        try FetchTests.expectSame(server.objectPath(key: "c.cairn"), FetchTests.bytes(local))
    }

    @Test("an answer a retry cannot cure (the upload gone: 404 NoSuchUpload) aborts the multipart upload, says so, and removes the state file")
    func unrecoverableErrorAborts() async throws { try await onDedicatedThread { try Self().unrecoverableErrorAbortsOnThread() } }

    func unrecoverableErrorAbortsOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-s3-abort")
        defer { work.remove() }
        let server = try RcloneS3Server()
        defer { server.stop() }
        let (source, _) = try Self.source(work, seed: 11, count: 8)
        let location = try S3Location(parsing: "s3://cairn/gone.cairn")
        let configuration = try Self.configuration(server)
        let statePath = work.appending("gone.state")
        let objectPath = server.objectPath(key: "gone.cairn")
        try blockingAsync {
            let sink = try ObjectStoreSink(location: location, configuration: configuration, statePath: statePath)
            let archiver = try Archiver(sink: sink)
            try await archiver.appendItem(atPath: Array((source + "/data").utf8), pathInArchive: Array("data".utf8))
            // Someone aborts the upload meanwhile: every later call answers 404 NoSuchUpload.
            try S3Client(configuration: configuration).abortMultipartUpload(location, uploadID: sink.uploadID)
            do {
                try await archiver.appendItem(atPath: Array((source + "/data").utf8), pathInArchive: Array("again".utf8))
                _ = try await archiver.finish()
                Issue.record("the upload of an aborted multipart upload completed")
            } catch let error as CairnError {
                #expect(error.description.contains("404"), "\(error)")
                #expect(error.description.hasSuffix("the multipart upload was aborted"), "\(error)")
            }
        }
        #expect(!FileManager.default.fileExists(atPath: statePath), "nothing left to resume")
        #expect(!FileManager.default.fileExists(atPath: objectPath))
    }

    @Test("--resume of an upload names each option that differs from the interrupted run's, and takes the options not given from it")
    func resumeOptions() async throws { try await onDedicatedThread { try Self().resumeOptionsOnThread() } }

    func resumeOptionsOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-s3-options")
        defer { work.remove() }
        let server = try RcloneS3Server()
        defer { server.stop() }
        let (source, _) = try Self.source(work, seed: 15, count: 16)
        let location = try S3Location(parsing: "s3://cairn/o.cairn")
        let configuration = try Self.configuration(server)
        let statePath = try Self.statePath(server, "s3://cairn/o.cairn")
        try blockingAsync {
            var options = Archiver.Configuration()
            options.sourcePaths = [Array("data".utf8)]
            options.compression = .zstd(level: 1)
            options.metadata = ["team": "a"]
            let sink = try ObjectStoreSink(location: location, configuration: configuration, statePath: statePath)
            let archiver = try Archiver(sink: sink, configuration: options)
            try await archiver.appendItem(atPath: Array((source + "/data").utf8), pathInArchive: Array("data".utf8))
            await archiver.abandon()
        }
        let differing = try Self.cli(["create", "-q", "--resume", "--compression", "lz4", "-o", "s3://cairn/o.cairn", "data"], in: source, server)
        #expect(differing.status == 1)
        #expect(differing.stderr.contains("compression lz4 differs from the archive's zstd:1"), "\(differing.stderr)")
        #expect(!differing.stderr.contains("continue it with --resume"), "\(differing.stderr)")
        let adopted = try Self.cli(["create", "-q", "--json", "--resume", "-o", "s3://cairn/o.cairn", "data"], in: source, server)
        #expect(adopted.status == 0, "\(adopted.stderr)")
        #expect(Self.number("keptBytes", in: adopted.stdout) > 0, "\(adopted.stdout)")
        let local = work.appending("zstd.cairn")
        #expect(try FetchCLI.run(["create", "-q", "--compression", "zstd:1", "--meta", "team=a", "-o", local, "data"], in: source).status == 0)
        try FetchTests.expectSame(server.objectPath(key: "o.cairn"), FetchTests.bytes(local))
    }

    @Test("wrong credentials: a clear error naming the endpoint and the status; nothing is created")
    func wrongCredentials() async throws { try await onDedicatedThread { try Self().wrongCredentialsOnThread() } }

    func wrongCredentialsOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-s3-creds")
        defer { work.remove() }
        let server = try RcloneS3Server()
        defer { server.stop() }
        let (source, _) = try Self.source(work, seed: 5, count: 2)
        let result = try Self.cli(["create", "-o", "s3://cairn/w.cairn", "data"], in: source, server, secret: "not-the-secret")
        #expect(result.status == 1)
        #expect(result.stderr.contains("127.0.0.1:\(server.port)"), "\(result.stderr)")
        #expect(result.stderr.contains("403"), "\(result.stderr)")
        #expect(result.stderr.contains("refused the credentials"), "\(result.stderr)")
        #expect(!result.stderr.contains("not-the-secret"), "the secret never appears")
        #expect(!FileManager.default.fileExists(atPath: try Self.statePath(server, "s3://cairn/w.cairn")))
        #expect(try FileManager.default.contentsOfDirectory(atPath: server.root + "/cairn").isEmpty)

        let listed = try Self.cli(["list", "s3://cairn/w.cairn"], in: work.path, server, secret: "not-the-secret")
        #expect(listed.status == 1)
        #expect(listed.stderr.contains("SignatureDoesNotMatch"), "\(listed.stderr)")
        #expect(listed.stderr.contains("refused the credentials"), "\(listed.stderr)")
    }

    @Test("a missing bucket: the error names it and NoSuchBucket; nothing is left")
    func missingBucket() async throws { try await onDedicatedThread { try Self().missingBucketOnThread() } }

    func missingBucketOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-s3-bucket")
        defer { work.remove() }
        let server = try RcloneS3Server()
        defer { server.stop() }
        let (source, _) = try Self.source(work, seed: 6, count: 2)
        let result = try Self.cli(["create", "-o", "s3://nobucket/m.cairn", "data"], in: source, server)
        #expect(result.status == 1)
        #expect(result.stderr.contains("/nobucket/m.cairn") && result.stderr.contains("NoSuchBucket"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: try Self.statePath(server, "s3://nobucket/m.cairn")))
        let read = try Self.cli(["info", "s3://nobucket/m.cairn"], in: work.path, server)
        #expect(read.status == 1)
        #expect(read.stderr.contains("404"), "\(read.stderr)")
    }

    @Test("a server that goes away mid-part: the upload is kept and --resume, once the server is back, completes a byte-identical object")
    func serverGoesAway() async throws { try await onDedicatedThread { try Self().serverGoesAwayOnThread() } }

    func serverGoesAwayOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-s3-away")
        defer { work.remove() }
        let server = try RcloneS3Server()
        defer { server.stop() }
        let (source, local) = try Self.source(work, seed: 7, count: 16)
        let state = try Self.statePath(server, "s3://cairn/g.cairn")
        let child = try ChildProcess.start(
            FetchCLI.executable, ["create", "-o", "s3://cairn/g.cairn", "data"], in: source, environment: Self.environment(server))
        try Await.until("the upload state records 1 part") {
            Self.recordedParts(state) >= 1 || !child.process.isRunning
        }
        server.halt()
        let failed = child.wait()
        #expect(failed.status == 1, "\(failed.stderr)")
        #expect(failed.stderr.contains("127.0.0.1:\(server.port)"), "\(failed.stderr)")
        #expect(failed.stderr.contains("continue it with --resume"), "\(failed.stderr)")
        #expect(FileManager.default.fileExists(atPath: state))

        // rclone keeps uploads in memory: after its restart the upload is gone, and the resume
        // starts a new one.
        try server.restart()
        let resumed = try Self.cli(["create", "-q", "--resume", "-o", "s3://cairn/g.cairn", "data"], in: source, server)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        try FetchTests.expectSame(server.objectPath(key: "g.cairn"), local)
    }

    @Test("ranges answered with the whole object (a 200 without Content-Range) still extract the one file asked for")
    func wholeObjectAnswers() async throws { try await onDedicatedThread { try Self().wholeObjectAnswersOnThread() } }

    func wholeObjectAnswersOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-s3-whole")
        defer { work.remove() }
        let server = try RcloneS3Server()
        defer { server.stop() }
        let (source, local) = try Self.source(work, seed: 8, count: 4)
        try Data(local).write(to: URL(fileURLWithPath: server.objectPath(key: "w.cairn")))
        let proxy = try FaultProxy(upstreamPort: server.port)
        defer { proxy.stop() }
        try proxy.set(.wholeObject)
        var environment = Self.environment(server)
        environment["AWS_ENDPOINT_URL"] = "http://127.0.0.1:\(proxy.port)"
        let one = try ChildProcess.run(
            FetchCLI.executable, ["extract", "s3://cairn/w.cairn", "-C", "one", "data/f2.bin"], in: work.path,
            environment: environment)
        #expect(one.status == 0, "\(one.stderr)")
        #expect(try FetchTests.bytes(work.appending("one/data/f2.bin")) == FetchTests.bytes(source + "/data/f2.bin"))
        #expect(proxy.requests.contains { $0.fault == "whole" }, "the proxy answered with whole objects")
    }

    @Test("a connection cut in the middle of a part is retried: the upload completes, byte-identical")
    func cutPartRetried() async throws { try await onDedicatedThread { try Self().cutPartRetriedOnThread() } }

    func cutPartRetriedOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-s3-cut")
        defer { work.remove() }
        let server = try RcloneS3Server()
        defer { server.stop() }
        let (source, local) = try Self.source(work, seed: 10, count: 8)
        let proxy = try FaultProxy(upstreamPort: server.port)
        defer { proxy.stop() }
        // The first four requests: HeadObject and CreateMultipartUpload (no body, nothing to cut),
        // then part 1 twice, cut after 3 MiB each time; the third try goes through.
        try proxy.set(.cutRequest(afterBodyBytes: 3 << 20, times: 4))
        var environment = Self.environment(server)
        environment["AWS_ENDPOINT_URL"] = "http://127.0.0.1:\(proxy.port)"
        let created = try ChildProcess.run(
            FetchCLI.executable, ["create", "-q", "-o", "s3://cairn/cut.cairn", "data"], in: source, environment: environment)
        #expect(created.status == 0, "\(created.stderr)")
        #expect(proxy.requests.filter { $0.fault == "cutrequest" }.count == 2, "\(proxy.requests)")
        try FetchTests.expectSame(server.objectPath(key: "cut.cairn"), local)
    }

    @Test("an existing archive copied into the store (ArchiveTransfer to an ObjectStoreSink, no commit points) is cut into parts of the part size, not sent whole")
    func copiedArchiveIsCutIntoParts() async throws { try await onDedicatedThread { try Self().copiedArchiveIsCutIntoPartsOnThread() } }

    func copiedArchiveIsCutIntoPartsOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-s3-copy")
        defer { work.remove() }
        let server = try RcloneS3Server()
        defer { server.stop() }
        let (_, local) = try Self.source(work, seed: 14, count: 12)
        let configuration = try Self.configuration(server)
        let location = try S3Location(parsing: "s3://cairn/copied.cairn")
        let archive = URL(fileURLWithPath: work.appending("local.cairn"))
        try blockingAsync {
            let sink = try ObjectStoreSink(location: location, configuration: configuration, statePath: work.appending("copy.state"))
            try await ArchiveTransfer.send(archiveAt: ArchiveLocation(archive), to: sink)
            #expect(sink.partCount == (local.count + (8 << 20) - 1) / (8 << 20), "parts of 8 MiB: \(sink.partCount) for \(local.count) bytes")
            #expect(sink.uploadedBytes == UInt64(local.count))
        }
        try FetchTests.expectSame(server.objectPath(key: "copied.cairn"), local)
    }

    @Test("virtual-hosted addressing reaches the same store (BUCKET.localhost)")
    func virtualHosted() async throws { try await onDedicatedThread { try Self().virtualHostedOnThread() } }

    func virtualHostedOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-s3-virtual")
        defer { work.remove() }
        let server = try RcloneS3Server(addressing: .virtualHosted)
        defer { server.stop() }
        let (source, local) = try Self.source(work, seed: 9, count: 2)
        let configuration = try Self.configuration(server)
        let location = try S3Location(parsing: "s3://cairn/v.cairn")
        try blockingAsync {
            let sink = try ObjectStoreSink(location: location, configuration: configuration, statePath: work.appending("v.state"))
            var archiverConfiguration = Archiver.Configuration()
            archiverConfiguration.sourcePaths = [Array("data".utf8)]
            let archiver = try Archiver(sink: sink, configuration: archiverConfiguration)
            try await archiver.appendItem(atPath: Array((source + "/data").utf8), pathInArchive: Array("data".utf8))
            _ = try await archiver.finish()
            let extractor = try await Extractor(at: .object(location, configuration: configuration))
            defer { extractor.close() }
            #expect(extractor.entries.contains { $0.path == "data/f1.bin" })
            let report = try await Extractor.verifyArchive(at: .object(location, configuration: configuration))
            #expect(report.archiveBytes == UInt64(local.count))
        }
        try FetchTests.expectSame(server.objectPath(key: "v.cairn"), local)
    }

    /// Parts an upload's state file records (its `{"part":…}` lines).
    static func recordedParts(_ state: String) -> Int {
        ((try? String(contentsOfFile: state, encoding: .utf8)) ?? "").split(separator: "\n").filter { $0.hasPrefix("{\"part\"") }.count
    }

    /// The number after `"name" :` in `--json` output.
    static func number(_ name: String, in text: String) -> UInt64 {
        guard let range = text.range(of: "\"\(name)\"") else { return 0 }
        let digits = text[range.upperBound...].drop { !$0.isNumber }.prefix { $0.isNumber }
        return UInt64(digits) ?? 0
    }

    /// A tree of seeded random files of 96–256 KiB (incompressible; a commit after each, so
    /// parts of 1 MiB end close to 1 MiB), `total` bytes or a little more.
    static func smallFiles(seed: UInt64, total: Int) -> TreeBuilder {
        var generator = SeededGenerator(seed: seed)
        var tree = TreeBuilder()
        tree.directory("data")
        var sum = 0
        var index = 0
        while sum < total {
            let size = Int.random(in: (96 << 10)...(256 << 10), using: &generator)
            tree.file("data/s\(index).bin", generator.bytes(size))
            sum += size
            index += 1
        }
        return tree
    }

    @Test(
        "issue 23: parts grow with the archive: with a limit of 8 parts and 1 MiB first parts, an archive of more than 10 MiB uploads in at most 8 parts, and a resume cuts the same parts"
    )
    func partsGrowBeforeTheLimit() async throws { try await onDedicatedThread { try Self().partsGrowBeforeTheLimitOnThread() } }

    func partsGrowBeforeTheLimitOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-s3-grow")
        defer { work.remove() }
        let server = try RcloneS3Server()
        defer { server.stop() }
        let source = work.appending("src")
        try Self.smallFiles(seed: 31, total: 10_500 << 10).materialize(at: source)
        let localPath = work.appending("local.cairn")
        let created = try FetchCLI.run(["create", "-q", "-o", localPath, "data"], in: source)
        try #require(created.status == 0, "\(created.stderr)")
        let local = try FetchTests.bytes(localPath)
        // More than 8 parts of the first size hold, with room to spare for the cuts at commits.
        #expect(local.count > 10 << 20)
        let rule = PartSizeRule(smallestPartSize: 1 << 20, largestPartSize: 5 << 30, partLimit: 8)
        let location = try S3Location(parsing: "s3://cairn/grown.cairn")
        let store = S3Client(configuration: try Self.configuration(server))
        let statePath = work.appending("grown.state")
        try blockingAsync {
            var archiverConfiguration = Archiver.Configuration()
            archiverConfiguration.sourcePaths = [Array("data".utf8)]
            // The first run is given up after the archive's entries (no manifest, no last part).
            let first = try ObjectStoreSink(location: location, store: store, overwrite: false, statePath: statePath, sizeEstimate: nil, rule: rule)
            let archiver = try Archiver(sink: first, configuration: archiverConfiguration)
            try await archiver.appendItem(atPath: Array((source + "/data").utf8), pathInArchive: Array("data".utf8))
            await archiver.abandon()
            #expect(first.partCount >= 7, "parts past the first six were cut: \(first.partCount)")
        }
        let recorded = try #require(try MultipartUploadState.load(from: statePath))
        #expect(recorded.partSizeRule == rule, "the state records the rule, so a resume cuts the same parts")
        #expect(recorded.parts.count >= 7)
        #expect(recorded.parts.count > 6 && recorded.parts[6].size >= 2 << 20, "part 7 is at least twice the first size")
        try blockingAsync {
            var archiverConfiguration = Archiver.Configuration()
            archiverConfiguration.sourcePaths = [Array("data".utf8)]
            let resumed = try ObjectStoreSink(resuming: location, configuration: store.configuration, statePath: statePath)
            let archiver = try Archiver(sink: resumed, configuration: archiverConfiguration)
            try await archiver.appendItem(atPath: Array((source + "/data").utf8), pathInArchive: Array("data".utf8))
            _ = try await archiver.finish()
            #expect(resumed.partCount <= 8, "\(resumed.partCount) parts")
            #expect(resumed.keptBytes == recorded.parts.reduce(0) { $0 + $1.size }, "every part of the first run was kept")
        }
        try FetchTests.expectSame(server.objectPath(key: "grown.cairn"), local)
    }

    @Test(
        "issue 23: create -o s3:// sizes its parts from the scan of its sources: a sparse file of 1 TiB gives first parts of ⌈1 TiB / 7,000⌉ rounded up to a MiB, not 8 MiB"
    )
    func partSizeFromTheScan() async throws { try await onDedicatedThread { try Self().partSizeFromTheScanOnThread() } }

    func partSizeFromTheScanOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-s3-scan")
        defer { work.remove() }
        let server = try RcloneS3Server()
        defer { server.stop() }
        let source = work.appending("src")
        try FileManager.default.createDirectory(atPath: source + "/data", withIntermediateDirectories: true)
        let sparse = source + "/data/huge.bin"
        #expect(FileManager.default.createFile(atPath: sparse, contents: nil))
        #expect(truncate(sparse, 1 << 40) == 0, "a sparse file of 1 TiB")
        let state = try Self.statePath(server, "s3://cairn/huge.cairn")
        let child = try ChildProcess.start(
            FetchCLI.executable, ["create", "-q", "-o", "s3://cairn/huge.cairn", "data"], in: source, environment: Self.environment(server))
        defer {
            kill(child.pid, SIGKILL)
            _ = child.wait()
        }
        // The upload's first line is written before any byte is archived.
        var recorded: MultipartUploadState?
        while recorded == nil, child.process.isRunning {
            recorded = try? MultipartUploadState.load(from: state)
            if recorded == nil { usleep(5000) }
        }
        let upload = try #require(recorded, "the upload was recorded")
        #expect(upload.partSize == ObjectStoreSink.basePartSize(estimate: 1 << 40))
        #expect(upload.partSize == 150 << 20)
    }
}

/// Units of the object-store code that need no server.
@Suite("Object storage units")
struct ObjectStoreUnitTests {
    @Test("s3:// locations: bucket and key rules, percent-encoded keys")
    func locations() throws {
        let location = try S3Location(parsing: "s3://my-bucket/exports/2026 12/a+b.cairn")
        #expect(location.bucket == "my-bucket")
        #expect(location.key == "exports/2026 12/a+b.cairn")
        #expect(location.encodedKey == "exports/2026%2012/a%2Bb.cairn")
        for bad in ["s3://", "s3://bucket", "s3://bucket/", "s3://Bucket/k", "s3://ab/k", "s3://bucket//k", "s3://-bucket/k", "http://b/k"] {
            #expect(throws: CairnError.self, "\(bad)") { try S3Location(parsing: bad) }
        }
        for dotted in ["s3://bucket/a/../b", "s3://bucket/./a", "s3://bucket/..", "s3://bucket/a//b"] {
            #expect(throws: CairnError.self, "\(dotted)") { try S3Location(parsing: dotted) }
        }
        #expect(try S3Location(parsing: "s3://bucket/dir/").key == "dir/")
        // A URL's escapes are decoded: the key is the raw one.
        let fromURL = try ArchiveLocation(
            try #require(URL(string: "s3://bucket/a%20b/%C3%BC.cairn")),
            environment: ["AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK", "AWS_ENDPOINT_URL": "http://127.0.0.1:1"])
        #expect(fromURL.name == "s3://bucket/a b/ü.cairn")
        #expect(S3Location.isLocation("S3://b/k"))
        #expect(!S3Location.isLocation("s3:/b/k"))
    }

    @Test("URLs for path-style and virtual-hosted addressing; the endpoint must be a bare http(s) URL")
    func addressing() throws {
        let credentials = S3Credentials(accessKeyID: "AK", secretAccessKey: "SK")
        let location = try S3Location(bucket: "cairn", key: "a/b.cairn")
        let path = try S3Configuration(endpoint: "http://127.0.0.1:9000/", credentials: credentials)
        #expect(path.url(for: location) == "http://127.0.0.1:9000/cairn/a/b.cairn")
        #expect(path.url(for: location, query: "uploads") == "http://127.0.0.1:9000/cairn/a/b.cairn?uploads")
        let virtual = try S3Configuration(endpoint: "https://s3.eu-west-1.amazonaws.com", region: "eu-west-1", credentials: credentials, addressing: .virtualHosted)
        #expect(virtual.url(for: location) == "https://cairn.s3.eu-west-1.amazonaws.com/a/b.cairn")
        for bad in ["ftp://host", "http://host/path", "http://user:pw@host", "not a url"] {
            #expect(throws: CairnError.self, "\(bad)") { try S3Configuration(endpoint: bad, credentials: credentials) }
        }
        let fromEnvironment = try S3Configuration.fromEnvironment(environment: [
            "AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK", "AWS_REGION": "eu-central-1",
        ])
        #expect(fromEnvironment.endpoint == "https://s3.eu-central-1.amazonaws.com")
        #expect(fromEnvironment.addressing == .virtualHosted)
        #expect(throws: CairnError.self) { try S3Configuration.fromEnvironment(environment: ["AWS_ACCESS_KEY_ID": "AK"]) }
    }

    @Test("the upload options with a local -o are usage errors (exit 2), and nothing is created")
    func uploadOptionsNeedAnObject() throws {
        let work = try TemporaryDirectory(prefix: "cairn-s3-usage")
        defer { work.remove() }
        try Data("x".utf8).write(to: URL(fileURLWithPath: work.appending("f.txt")))
        for option in [["--s3-endpoint", "http://127.0.0.1:1"], ["--upload-state", "s.state"]] {
            let result = try FetchCLI.run(["create", "-o", "local.cairn"] + option + ["f.txt"], in: work.path)
            #expect(result.status == 2, "\(option): \(result.stderr)")
            #expect(result.stderr.contains("\(option[0]) is for -o s3://BUCKET/KEY"), "\(result.stderr)")
            #expect(!FileManager.default.fileExists(atPath: work.appending("local.cairn")))
        }
    }

    @Test(
        "part sizes (Spec/0003 §3.3 item 2): 8 MiB at least, sized from the estimate to fit 7,000 parts, the base for 8,000 parts, then doubling every 100, at most 5 GiB; any archive S3 stores fits"
    )
    func partSizes() {
        #expect(ObjectStoreSink.basePartSize(estimate: nil) == 8 << 20)
        #expect(ObjectStoreSink.basePartSize(estimate: 1 << 30) == 8 << 20)
        let large = ObjectStoreSink.basePartSize(estimate: 1 << 40)
        #expect(large % (1 << 20) == 0)
        #expect(large * 7000 >= 1 << 40)
        #expect(large < (1 << 40) / 6900)
        #expect(PartSizeRule(smallestPartSize: 1, largestPartSize: 1 << 40, partLimit: 10_000).baseSize(estimate: 7000 << 20) == 1 << 20)
        #expect(PartSizeRule(smallestPartSize: 1, largestPartSize: 1 << 40, partLimit: 10_000).baseSize(estimate: (7000 << 20) + 1) == 2 << 20)
        #expect(ObjectStoreSink.basePartSize(estimate: .max) == ObjectStoreSink.maximumPartSize)
        #expect(ObjectStoreSink.partSize(number: 1, base: 8 << 20) == 8 << 20)
        #expect(ObjectStoreSink.partSize(number: 8000, base: 8 << 20) == 8 << 20)
        #expect(ObjectStoreSink.partSize(number: 8001, base: 8 << 20) == 16 << 20)
        #expect(ObjectStoreSink.partSize(number: 8100, base: 8 << 20) == 16 << 20)
        #expect(ObjectStoreSink.partSize(number: 8101, base: 8 << 20) == 32 << 20)
        #expect(ObjectStoreSink.partSize(number: 10_000, base: 8 << 20) == ObjectStoreSink.maximumPartSize)
        #expect(ObjectStoreSink.partSize(number: .max, base: 8 << 20) == ObjectStoreSink.maximumPartSize)
        #expect(ObjectStoreSink.partSize(number: 8001, base: 4 << 30) == ObjectStoreSink.maximumPartSize)
        // With the smallest parts, 10,000 of them hold more than S3's largest object (5 TiB).
        #expect(PartSizeRule.s3.capacity(base: 8 << 20) > 5 << 40)
        // A small limit scales the same way: 8 parts are 6 of the base, then 2×, 4×.
        let small = PartSizeRule(smallestPartSize: 1 << 20, largestPartSize: 5 << 30, partLimit: 8)
        #expect((1...8).map { small.size(ofPart: $0, base: 1 << 20) >> 20 } == [1, 1, 1, 1, 1, 1, 2, 4])
        #expect(small.baseSize(estimate: 10 << 20) == 2 << 20)
    }

    @Test("the upload journal: appended lines, a torn last line ignored, a part recorded again replaces that part only, parts acknowledged out of order kept in order, locked while open")
    func journal() throws {
        let work = try TemporaryDirectory(prefix: "cairn-journal")
        defer { work.remove() }
        let path = work.appending("j.partial.upload")
        let journal = try UploadJournal(path: path, creating: true)
        var state = MultipartUploadState(endpoint: "http://e", bucket: "cairn", key: "k", uploadID: "u-1", partSize: 8 << 20)
        try journal.begin(state)
        func part(_ number: Int, end: UInt64) -> MultipartUploadState.Part {
            .init(number: number, etag: "\"e\(number)\"", size: 10, end: end, chainDigest: "ab", sha256: "cd")
        }
        try journal.record(part(1, end: 10))
        try journal.record(part(3, end: 30))
        try journal.record(part(2, end: 20))
        try journal.record(part(5, end: 50))
        try journal.record(part(2, end: 21))
        #expect(throws: CairnError.self) { try UploadJournal(path: path, creating: false) }  // busy: locked
        journal.close()
        // A torn line (a crash mid-append) is not read.
        let handle = try #require(FileHandle(forWritingAtPath: path))
        handle.seekToEndOfFile()
        handle.write(Data("{\"part\":{\"number\":4,".utf8))
        try handle.close()
        let loaded = try #require(try MultipartUploadState.load(from: path))
        #expect(loaded.uploadID == "u-1")
        #expect(loaded.parts.map(\.number) == [1, 2, 3, 5], "Spec/0003 §3.3 item 3: parts in flight together are acknowledged in any order")
        #expect(loaded.parts[1].end == 21)
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int == 0o600)
        state.parts = []
        try Data("garbage\n".utf8).write(to: URL(fileURLWithPath: work.appending("bad")))
        #expect(throws: CairnError.self) { try MultipartUploadState.load(from: work.appending("bad")) }
        #expect(try MultipartUploadState.load(from: work.appending("none")) == nil)
    }

    @Test("range answers: a 200 with the Content-Range asked for is the range; a whole-object 200 is recognised only with the same length and ETag")
    func rangeAnswers() throws {
        let ranged = HTTPResponseHead(status: 200, url: "u", headers: ["content-range": "bytes 10-19/100", "content-length": "10", "etag": "\"a\""])
        #expect(ranged.isRangeAnswer)
        try RangeAnswer.check(ranged, url: "u", start: 10, end: 20, total: 100, validator: "\"a\"")
        let whole = HTTPResponseHead(status: 200, url: "u", headers: ["content-length": "100", "etag": "\"a\""])
        #expect(!whole.isRangeAnswer)
        #expect(RangeAnswer.isWholeObject(whole, total: 100, validator: "\"a\""))
        #expect(!RangeAnswer.isWholeObject(whole, total: 101, validator: "\"a\""))
        #expect(!RangeAnswer.isWholeObject(whole, total: 100, validator: "\"b\""))
        #expect(throws: CairnError.self) { try RangeAnswer.check(whole, url: "u", start: 10, end: 20, total: 100, validator: "\"a\"") }
    }

    @Test("S3 error bodies become the error's detail; the status stays readable after the call's name")
    func errorDetail() throws {
        let signer = S3RequestSigner(configuration: try S3Configuration(endpoint: "http://h", credentials: .init(accessKeyID: "a", secretAccessKey: "b")))
        let body = Array("<?xml version=\"1.0\"?><Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message></Error>".utf8)
        #expect(signer.errorDetail(status: 404, body: body) == "NoSuchBucket: The specified bucket does not exist")
        #expect(signer.errorDetail(status: 404, body: Array("<html>nope</html>".utf8)) == nil)
        // Codes S3 documents as worth repeating are retried (and keep the upload) whatever the status.
        #expect(RetryPolicy.isTransient(HTTPClient.statusError(status: 400, reason: "Bad Request", url: "u", detail: "RequestTimeout: slow")))
        #expect(RetryPolicy.isTransient(HTTPClient.statusError(status: 200, reason: "", url: "u", detail: "InternalError: retry")))
        #expect(!RetryPolicy.isTransient(HTTPClient.statusError(status: 400, reason: "Bad Request", url: "u", detail: "InvalidPart: no")))
        #expect(!RetryPolicy.isTransient(HTTPClient.statusError(status: 403, reason: "Forbidden", url: "u", detail: "SignatureDoesNotMatch: no")))
        var error = HTTPClient.statusError(status: 404, reason: "Not Found", url: "http://h/b/k", detail: "NoSuchBucket")
        error.message = "UploadPart 3: " + error.message
        #expect(error.httpStatusCode == 404)
    }
}

/// Runs `body` (async, on the cooperative pool) from a blocking thread and waits for it.
func blockingAsync(_ body: @escaping @Sendable () async throws -> Void) throws {
    let outcome = Mutex<Result<Void, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task {
        do { try await body(); outcome.withLock { $0 = .success(()) } } catch { outcome.withLock { $0 = .failure(error) } }
        done.signal()
    }
    done.wait()
    try outcome.withLock { $0 }?.get()
}

/// The same client against a second S3 implementation, moto's server mode, for what
/// `rclone serve s3` lacks: `If-None-Match: *` on `CompleteMultipartUpload` (rclone ignores it),
/// and AWS's answers (206 ranges, quoted ETags, `InitiateMultipartUploadResult`, an exclusive
/// part-number marker, 5 MiB minimum parts). Beside the rclone suite, not instead of it.
@Suite("Object storage on moto", .serialized)
struct ObjectStoreMotoTests {
    static func configuration(_ server: MotoS3Server) throws -> S3Configuration {
        try S3Configuration(
            endpoint: server.endpoint, region: server.region,
            credentials: S3Credentials(accessKeyID: server.accessKeyID, secretAccessKey: server.secretAccessKey))
    }

    @Test("CompleteMultipartUpload with If-None-Match: an object that appeared at the key is refused (412, alreadyExists) and left as it is")
    func conditionalComplete() async throws { try await onDedicatedThread { try Self().conditionalCompleteOnThread() } }

    func conditionalCompleteOnThread() throws {
        let server = try MotoS3Server()
        defer { server.stop() }
        let store = S3Client(configuration: try Self.configuration(server))
        let location = try S3Location(parsing: "s3://cairn/race.cairn")
        var generator = SeededGenerator(seed: 21)
        let first = generator.bytes(5 << 20)
        let last = generator.bytes(1000)
        let id = try store.createMultipartUpload(location)
        let parts = [
            S3Client.Part(number: 1, etag: try store.uploadPart(location, uploadID: id, number: 1, bytes: first), size: UInt64(first.count)),
            S3Client.Part(number: 2, etag: try store.uploadPart(location, uploadID: id, number: 2, bytes: last), size: UInt64(last.count)),
        ]
        #expect(try store.listParts(location, uploadID: id) == parts)
        // Another writer puts an object at the key while the upload runs.
        _ = try store.client.get(HTTPRequest(url: store.objectURL(location), method: .put, body: Array("theirs".utf8)), limit: 1 << 20)
        #expect(throws: CairnError.self) { try store.completeMultipartUpload(location, uploadID: id, parts: parts, ifNoneMatch: true) }
        do {
            try store.completeMultipartUpload(location, uploadID: id, parts: parts, ifNoneMatch: true)
        } catch {
            #expect(error.code == .alreadyExists, "\(error)")
            #expect(error.description.contains("127.0.0.1:\(server.port)"), "\(error)")
        }
        let theirs = try store.client.get(HTTPRequest(url: store.objectURL(location)), limit: 1 << 20)
        #expect(theirs.body == Array("theirs".utf8), "the other writer's object is untouched")
        // Without the condition (--force) the upload completes over it.
        try store.completeMultipartUpload(location, uploadID: id, parts: parts, ifNoneMatch: false)
        let ours = try store.client.get(HTTPRequest(url: store.objectURL(location)), limit: 8 << 20)
        #expect(ours.body == first + last)
    }

    @Test("create -o s3:// and reading back work on moto too: byte-identical object, one file by 206 ranges")
    func roundTrip() async throws { try await onDedicatedThread { try Self().roundTripOnThread() } }

    func roundTripOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-moto")
        defer { work.remove() }
        let server = try MotoS3Server()
        defer { server.stop() }
        let (source, local) = try ObjectStoreTests.source(work, seed: 22, count: 8)
        let created = try ChildProcess.run(
            FetchCLI.executable, ["create", "-q", "-o", "s3://cairn/m.cairn", "data"], in: source, environment: server.environment)
        #expect(created.status == 0, "\(created.stderr)")
        let store = S3Client(configuration: try Self.configuration(server))
        let object = try store.client.get(HTTPRequest(url: store.objectURL(try S3Location(parsing: "s3://cairn/m.cairn"))), limit: 64 << 20)
        #expect(object.body == local)
        let one = try ChildProcess.run(
            FetchCLI.executable, ["extract", "s3://cairn/m.cairn", "-C", "one", "data/f5.bin"], in: work.path,
            environment: server.environment)
        #expect(one.status == 0, "\(one.stderr)")
        #expect(try FetchTests.bytes(work.appending("one/data/f5.bin")) == FetchTests.bytes(source + "/data/f5.bin"))
    }
}
