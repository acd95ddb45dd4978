import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import Cairn

/// `cairn create --resume`, `verify --partial` and `extract --resume` of an encrypted archive
/// (`Spec/0004-trusted-archives.md §6.9`), through the executable, with an `age-keygen` identity
/// and a `minisign -G` signing key; extraction over a real nginx.
@Suite("Encrypted archives: resume (command line)", .serialized)
struct SealedResumeCommandLineTests {
    static func source(_ work: TemporaryDirectory) throws -> String {
        let source = work.appending("src")
        try ArchiveSignatureTests.tree(largeBytes: 6 * 1024 * 1024).materialize(at: source + "/data")
        return source
    }

    @Test(
        "§6.9: create --recipient --sign cut by a file size limit and by SIGKILL, then create --resume --identity --sign: verifies with --identity and --trusted-key, extracts the tree; refused without the identity, with --recipient, or with a tampered block, the .partial untouched"
    )
    func createResumes() throws {
        let work = try TemporaryDirectory(prefix: "cairn-sealed-resume-cli")
        defer { work.remove() }
        let source = try Self.source(work)
        let (identity, recipient) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "me")
        let (otherIdentity, _) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "other")
        let (pub, sec) = try SignedCreateCommandLineTests.minisignKeys(in: work.path, name: "maker")
        let archive = work.appending("e.cairn")
        let partial = archive + ".partial"
        // An injected failure: the write fails once the file reaches 2 MiB.
        let cut = try FetchCLI.run(
            ["create", "-q", "--recipient", recipient, "--sign", sec, "-o", archive, "data"], in: source, fileSizeLimitKiB: 2048)
        #expect(cut.status != 0 && cut.stderr.contains("--resume"), "\(cut.stderr)")
        let left = try RawFileSystem.contents(ofFile: Array(partial.utf8))
        #expect(left.count > 1_000_000 && left.count <= 2048 * 1024)

        // Refusals: nothing continued, the partial file as it was.
        let blind = try FetchCLI.run(["create", "-q", "--resume", "--sign", sec, "-o", archive, "data"], in: source)
        #expect(blind.status == 1 && blind.stderr.contains("encrypted") && blind.stderr.contains("--identity"), "\(blind.stderr)")
        let wrong = try FetchCLI.run(["create", "-q", "--resume", "--identity", otherIdentity, "--sign", sec, "-o", archive, "data"], in: source)
        #expect(wrong.status == 1 && wrong.stderr.contains("no identity"), "\(wrong.stderr)")
        let recipients = try FetchCLI.run(
            ["create", "-q", "--resume", "--recipient", recipient, "--sign", sec, "-o", archive, "data"], in: source)
        #expect(recipients.status == 2 && recipients.stderr.contains("own key block"), "\(recipients.stderr)")
        var tampered = left
        tampered[left.count / 2] ^= 0x20
        try RawFileSystem.writeFile(Array(partial.utf8), tampered)
        let altered = try FetchCLI.run(["create", "-q", "--resume", "--identity", identity, "--sign", sec, "-o", archive, "data"], in: source)
        #expect(altered.status == 1 && altered.stderr.contains("sealed block"), "\(altered.stderr)")
        #expect(try RawFileSystem.contents(ofFile: Array(partial.utf8)) == tampered, "untouched")
        try RawFileSystem.writeFile(Array(partial.utf8), left)
        #expect(try RawFileSystem.contents(ofFile: Array(partial.utf8)) == left)

        // A resumed run killed once it has written more, then resumed again to the end.
        let child = try FetchCLI.start(["create", "-q", "--resume", "--identity", identity, "--sign", sec, "-o", archive, "data"], in: source)
        try Await.until("the resumed create writes past the cut") {
            ((try? FileStatus.of(Array(partial.utf8)))?.size ?? 0) > UInt64(left.count) + 1_000_000 || !child.process.isRunning
        }
        kill(child.pid, SIGKILL)
        _ = child.wait()
        let resumed = try FetchCLI.run(["create", "-q", "--resume", "--identity", identity, "--sign", sec, "-o", archive, "data"], in: source)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(!RawFileSystem.exists(Array(partial.utf8)))

        let verified = try FetchCLI.run(["verify", "--identity", identity, "--trusted-key", pub, archive], in: work.path)
        #expect(verified.status == 0 && verified.stdout.hasPrefix("OK"), "\(verified.stderr)")
        let extracted = try FetchCLI.run(
            ["extract", "-q", "--identity", identity, "--trusted-key", pub, archive, "-C", work.appending("out")], in: work.path)
        #expect(extracted.status == 0, "\(extracted.stderr)")
        let a = try TreeSnapshot(at: work.appending("out/data"))
        let b = try TreeSnapshot(at: source + "/data")
        #expect(a == b, "\(a.diff(b))")
        // Nothing to resume once complete; the complete archive is opened with the identity.
        let again = try FetchCLI.run(["create", "--resume", "--identity", identity, "--sign", sec, "-o", archive, "data"], in: source)
        #expect(again.status == 0 && again.stdout.contains("already complete"), "\(again.stderr)")
    }

    @Test("§6.9: verify --partial --identity of an encrypted copy cut anywhere: the inner verified length grows with the copy; complete at the end; a tampered block ends the prefix, named")
    func verifyPartial() throws {
        let work = try TemporaryDirectory(prefix: "cairn-sealed-partial-cli")
        defer { work.remove() }
        let source = try Self.source(work)
        let (identity, recipient) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "me")
        let archive = work.appending("e.cairn")
        let created = try FetchCLI.run(["create", "-q", "--recipient", recipient, "-o", archive, "data"], in: source)
        try #require(created.status == 0, "\(created.stderr)")
        let bytes = try RawFileSystem.contents(ofFile: Array(archive.utf8))
        let copy = work.appending("copy.cairn")
        var lengths: [Int] = []
        for fraction in [1, 3] {
            try RawFileSystem.writeFile(Array(copy.utf8), Array(bytes[0..<(bytes.count * fraction / 4 + 77)]))
            let result = try FetchCLI.run(["verify", "--partial", "--json", "--identity", identity, copy], in: work.path)
            #expect(result.status == 0, "\(result.stderr)")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
            let length = try #require((object["verifiedLength"] as? NSNumber)?.intValue)
            #expect(object["complete"] as? Bool == false)
            lengths.append(length)
        }
        #expect(lengths[0] > 0 && lengths[0] < lengths[1], "\(lengths)")
        try RawFileSystem.writeFile(Array(copy.utf8), bytes)
        let whole = try FetchCLI.run(["verify", "--partial", "--identity", identity, copy], in: work.path)
        #expect(whole.status == 0 && whole.stdout.contains("complete: the archive inside the sealed blocks verifies"), "\(whole.stdout) \(whole.stderr)")
        var tampered = Array(bytes[0..<(bytes.count * 3 / 4)])
        tampered[bytes.count / 4] ^= 0x01
        try RawFileSystem.writeFile(Array(copy.utf8), tampered)
        let damaged = try FetchCLI.run(["verify", "--partial", "--json", "--identity", identity, copy], in: work.path)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(damaged.stdout.utf8)) as? [String: Any])
        let length = try #require((object["verifiedLength"] as? NSNumber)?.intValue)
        #expect(damaged.status == 0 && length > 0 && length < bytes.count / 4, "\(length) \(damaged.stderr)")
        #expect((object["stopReason"] as? String)?.contains("sealed block") == true, "\(object)")
        let blind = try FetchCLI.run(["verify", "--partial", copy], in: work.path)
        #expect(blind.status == 1 && blind.stderr.contains("--identity"), "\(blind.stderr)")
    }

    @Test("§6.9: extract --resume --identity of an encrypted archive, from a file after a kill and from nginx after a cut transfer, ends with the same tree")
    func extractResumes() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-sealed-extract-resume")
        defer { work.remove() }
        let source = try Self.source(work)
        let (identity, recipient) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "me")
        let www = work.appending("www")
        try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
        let archive = www + "/e.cairn"
        let created = try FetchCLI.run(["create", "-q", "--recipient", recipient, "-o", archive, "data"], in: source)
        try #require(created.status == 0, "\(created.stderr)")
        let expected = try TreeSnapshot(at: source + "/data")

        // A local file: killed once a commit is journaled, then resumed.
        let out = work.appending("out")
        let journal = work.appending(".out.cairn-staging/.cairn-journal")
        let child = try FetchCLI.start(["extract", "-q", "--identity", identity, archive, "-C", out])
        try Await.until("the extraction journals a commit") {
            ((try? String(contentsOfFile: journal, encoding: .utf8)) ?? "").contains("\ncommit ") || !child.process.isRunning
        }
        kill(child.pid, SIGKILL)
        _ = child.wait()
        let resumed = try FetchCLI.run(["extract", "-q", "--resume", "--identity", identity, archive, "-C", out])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        let local = try TreeSnapshot(at: out + "/data")
        #expect(local == expected, "\(local.diff(expected))")

        // A URL: the stream cut after 3/4 of the archive, then extract URL --resume.
        let server = try NginxServer(root: www)
        defer { server.stop() }
        let bytes = try RawFileSystem.contents(ofFile: Array(archive.utf8))
        try RawFileSystem.writeFile(Array((www + "/cut.cairn").utf8), Array(bytes[0..<(bytes.count * 3 / 4)]))
        let remote = work.appending("remote")
        let cut = try FetchCLI.run(["extract", "-q", "--identity", identity, server.url("cut.cairn"), "-C", remote])
        #expect(cut.status == 1 && cut.stderr.contains("--resume"), "\(cut.stderr)")
        #expect(!FileManager.default.fileExists(atPath: remote))
        let continued = try FetchCLI.run(["extract", "-q", "--resume", "--identity", identity, server.url("e.cairn"), "-C", remote])
        #expect(continued.status == 0, "\(continued.stderr)")
        let fetched = try TreeSnapshot(at: remote + "/data")
        #expect(fetched == expected, "\(fetched.diff(expected))")
    }

    @Test(
        "Spec/0003 §3.3, Spec/0004 §6.9: create --recipient --sign -o s3:// uploads an archive that verifies and extracts with --identity; a killed encrypted upload is continued by --resume --identity (held parts skipped by their plaintext digest), refused without the identity (state kept), and refused as notResumable when the sources changed"
    )
    func objectStore() async throws { try await onDedicatedThread { try Self().objectStoreOnThread() } }

    func objectStoreOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-sealed-s3")
        defer { work.remove() }
        let server = try RcloneS3Server()
        defer { server.stop() }
        let (source, _) = try ObjectStoreTests.source(work, seed: 25, count: 20)
        let (identity, recipient) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "me")
        let uploaded = try ObjectStoreTests.cli(["create", "-q", "--recipient", recipient, "-o", "s3://cairn/e.cairn", "data"], in: source, server)
        try #require(uploaded.status == 0, "\(uploaded.stderr)")
        let object = try RawFileSystem.contents(ofFile: Array(server.objectPath(key: "e.cairn").utf8))
        #expect(Array(object[8..<12]) == [3, 0, 0, 0])
        let verified = try ObjectStoreTests.cli(["verify", "--identity", identity, "s3://cairn/e.cairn"], in: work.path, server)
        #expect(verified.status == 0 && verified.stdout.hasPrefix("OK"), "\(verified.stderr)")
        let extracted = try ObjectStoreTests.cli(
            ["extract", "-q", "--identity", identity, "s3://cairn/e.cairn", "-C", work.appending("out")], in: work.path, server)
        #expect(extracted.status == 0, "\(extracted.stderr)")
        let a = try TreeSnapshot(at: work.appending("out/data"))
        let b = try TreeSnapshot(at: source + "/data")
        #expect(a == b, "\(a.diff(b))")

        // Completion by content of an encrypted object (Spec/0004 §6.9 item 5): the state a run
        // killed after Complete leaves is recognised; another envelope or last part is not.
        let doneState = work.appending("done.upload")
        let envelopeLength = try object.withBytes { (raw) throws(CairnError) in
            try RecordCodec.parseHeader(UnsafeRawBufferPointer(rebasing: raw[Prelude.length...]), offset: UInt64(Prelude.length))
        }.length
        func record(envelope: [UInt8], lastSHA256: String) throws {
            unlink(doneState)
            let journal = try UploadJournal(path: doneState, creating: true)
            defer { journal.close() }
            var upload = MultipartUploadState(endpoint: server.endpoint, bucket: "cairn", key: "e.cairn", uploadID: "gone", partSize: 8 << 20)
            upload.envelope = envelope
            try journal.begin(upload)
            var last = MultipartUploadState.Part(
                number: 1, etag: "\"e\"", size: UInt64(object.count), end: UInt64(object.count), chainDigest: nil, sha256: lastSHA256)
            last.plainSHA256 = String(repeating: "0", count: 64)
            last.last = true
            try journal.record(last)
        }
        let payloadStart = Prelude.length + RecordFraming.headerLength
        let payload = Array(object[payloadStart..<(payloadStart + envelopeLength)])
        let configuration = try ObjectStoreTests.configuration(server)
        let location = try S3Location(parsing: "s3://cairn/e.cairn")
        try record(envelope: payload, lastSHA256: try SHA256.hash(object).hexString)
        #expect(try ObjectStoreSink.recordedUpload(at: doneState, location: location, configuration: configuration) == .complete)
        var otherID = payload
        otherID[4] ^= 1
        try record(envelope: otherID, lastSHA256: try SHA256.hash(object).hexString)
        let inTheWay = try ObjectStoreSink.recordedUpload(at: doneState, location: location, configuration: configuration)
        #expect(inTheWay == .objectInTheWay("its first bytes: the prelude and envelope record are not the ones the upload sent"), "\(inTheWay)")
        try record(envelope: payload, lastSHA256: String(repeating: "a", count: 64))
        if case .objectInTheWay(let text) = try ObjectStoreSink.recordedUpload(at: doneState, location: location, configuration: configuration) {
            #expect(text.contains("have SHA-256"), "\(text)")
        } else {
            Issue.record("a last part of other bytes is not this upload's")
        }

        // Killed once two parts are recorded: each ends at a sealed-block boundary and records the
        // SHA-256 of the plaintext before it.
        let (pub, sec) = try SignedCreateCommandLineTests.minisignKeys(in: work.path, name: "maker")
        let state = try ObjectStoreTests.statePath(server, "s3://cairn/k.cairn")
        let child = try ChildProcess.start(
            FetchCLI.executable, ["create", "-q", "--recipient", recipient, "--sign", sec, "-o", "s3://cairn/k.cairn", "data"], in: source,
            environment: ObjectStoreTests.environment(server))
        try Await.until("the upload state records 2 parts") { ObjectStoreTests.recordedParts(state) >= 2 || !child.process.isRunning }
        kill(child.pid, SIGKILL)
        _ = child.wait()
        let recorded = try #require(try MultipartUploadState.load(from: state))
        let envelope = try #require(recorded.envelope, "the state records the envelope")
        let blockSize = UInt64(try EnvelopeRecord.decode(payload: envelope, offset: 12).blockSize)
        let dataStart = UInt64(Prelude.length + RecordFraming.headerLength + envelope.count + RecordFraming.trailerLength)
        #expect(recorded.parts.count >= 2 && recorded.parts.allSatisfy { $0.plainSHA256 != nil && $0.chainDigest == nil && $0.last == nil })
        for part in recorded.parts {
            #expect((part.end - dataStart) % (blockSize + 40) == 0, "part \(part.number) ends at a sealed-block boundary")
        }
        let stateBefore = try RawFileSystem.contents(ofFile: Array(state.utf8))

        // Refusals keep the state file: no identity, another identity.
        let plain = try ObjectStoreTests.cli(["create", "-q", "--resume", "--sign", sec, "-o", "s3://cairn/k.cairn", "data"], in: source, server)
        #expect(plain.status == 1 && plain.stderr.contains("encrypted") && plain.stderr.contains("--identity"), "\(plain.stderr)")
        let (otherIdentity, _) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "other")
        let wrong = try ObjectStoreTests.cli(
            ["create", "-q", "--resume", "--identity", otherIdentity, "--sign", sec, "-o", "s3://cairn/k.cairn", "data"], in: source, server)
        #expect(wrong.status == 1, "\(wrong.stderr)")
        #expect(try RawFileSystem.contents(ofFile: Array(state.utf8)) == stateBefore, "the state file is kept as it was")

        // Other sources: the first held part's plaintext differs.
        let differs = try ObjectStoreTests.cli(
            ["create", "-q", "--resume", "--identity", identity, "--sign", sec, "-o", "s3://cairn/k.cairn", "data/f1.bin", "data/f0.bin"],
            in: source, server)
        #expect(differs.status == 1 && differs.stderr.contains("differs from the interrupted upload"), "\(differs.stderr)")
        #expect(!FileManager.default.fileExists(atPath: server.objectPath(key: "k.cairn")), "nothing completed at the key")

        let resumed = try ObjectStoreTests.cli(
            ["create", "--json", "--resume", "--identity", identity, "--sign", sec, "-o", "s3://cairn/k.cairn", "data"], in: source, server)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        let kept = ObjectStoreTests.number("keptBytes", in: resumed.stdout)
        #expect(kept >= 16 << 20, "the held parts are kept: \(resumed.stdout)")
        #expect(!FileManager.default.fileExists(atPath: state))
        let resumedObject = try RawFileSystem.contents(ofFile: Array(server.objectPath(key: "k.cairn").utf8))
        #expect(Array(resumedObject[0..<Int(dataStart)]) == EnvelopeRecord.prelude + (try EnvelopeRecord.decode(payload: envelope, offset: 12)).framed())
        let checked = try ObjectStoreTests.cli(
            ["verify", "--identity", identity, "--trusted-key", pub, "s3://cairn/k.cairn"], in: work.path, server)
        #expect(checked.status == 0 && checked.stdout.hasPrefix("OK"), "\(checked.stdout)\(checked.stderr)")
        let out = work.appending("resumed")
        let unpacked = try ObjectStoreTests.cli(
            ["extract", "-q", "--identity", identity, "--trusted-key", pub, "s3://cairn/k.cairn", "-C", out], in: work.path, server)
        #expect(unpacked.status == 0, "\(unpacked.stderr)")
        let c = try TreeSnapshot(at: out + "/data")
        #expect(c == b, "\(c.diff(b))")
        let nothing = try ObjectStoreTests.cli(
            ["create", "--resume", "--identity", identity, "--sign", sec, "-o", "s3://cairn/k.cairn", "data"], in: source, server)
        #expect(nothing.status == 0 && nothing.stdout.contains("already complete"), "\(nothing.stdout)\(nothing.stderr)")
    }
}
