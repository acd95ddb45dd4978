import CairnTestSupport
import Foundation
import Glibc
import Testing

import Cairn

/// Resuming through the `cairn` executable (issue 4): `create --resume` after SIGKILLs,
/// `verify --partial` + `cat --from-offset`, and `extract --resume` after a kill or a stream that
/// ended early. Serialized: the kill tests depend on timing and share two cores.
@Suite("Resume (command line)", .serialized)
struct ResumeCommandLineTests {
    static let chunking = "cdc:2048:8192:32768"

    // MARK: create --resume

    @Test("create --resume after 30 SIGKILLs at seeded moments ends byte-identical to an uninterrupted create")
    func createSurvivesKills() throws {
        let work = try TemporaryDirectory(prefix: "cairn-resume-kill")
        defer { work.remove() }
        try ResumeCommandLineTests.largeTree(seed: 11).materialize(at: work.appending("tree"))
        let reference = work.appending("reference.cairn")
        let started = Date()
        let create = try ResumeCLI.run(["create", "-q", "--chunking", Self.chunking, "-o", reference, "tree"], in: work.path)
        let duration = Date().timeIntervalSince(started)
        try #require(create.status == 0, "\(create.stderr)")
        let expected = try RawFileSystem.contents(ofFile: Array(reference.utf8))
        let layout = try ResumeFixture.Layout(archiveAt: reference)

        let archive = work.appending("killed.cairn")
        let partial = Array((archive + ".partial").utf8)
        let arguments = ["create", "-q", "--resume", "--chunking", Self.chunking, "-o", archive, "tree"]
        // Kill moments from 5 ms to a little past a full run, so some runs finish (and a new
        // cycle starts from nothing) and the others are cut anywhere in the stream.
        let longest = max(0.2, duration * 1.2)
        var generator = SeededGenerator(seed: 0x4B11_0030)
        var regions: [String: Int] = [:]
        var finished = 0
        for round in 0..<30 {
            let delay = Double.random(in: 0.005...longest, using: &generator)
            let child = try ResumeCLI.start(arguments, in: work.path)
            usleep(useconds_t(delay * 1_000_000))
            kill(child.pid, SIGKILL)
            let outcome = child.wait()
            if outcome.status == 0 {
                // It finished before the signal: the archive must be the reference; start over.
                finished += 1
                let bytes = try RawFileSystem.contents(ofFile: Array(archive.utf8))
                #expect(ResumeFixture.same(bytes, expected), "round \(round) finished: \(ResumeFixture.difference(bytes, expected))")
                unlink(archive)
                continue
            }
            #expect(outcome.killed, "round \(round): \(outcome.status) \(outcome.stderr)")
            let left = (try? RawFileSystem.contents(ofFile: partial)) ?? []
            #expect(
                left.count <= expected.count && ResumeFixture.same(left, Array(expected[0..<left.count])),
                "round \(round): a killed run leaves a prefix of the archive (\(left.count) bytes)")
            regions[layout.region(ofPrefix: left.count), default: 0] += 1
        }
        let last = try ResumeCLI.run(arguments, in: work.path)
        #expect(last.status == 0, "\(last.stderr)")
        let bytes = try RawFileSystem.contents(ofFile: Array(archive.utf8))
        #expect(ResumeFixture.same(bytes, expected), "\(ResumeFixture.difference(bytes, expected)); kills by region: \(regions)")
        #expect(!RawFileSystem.exists(partial))
        #expect(finished + regions.values.reduce(0, +) == 30)

        let verify = try ResumeCLI.run(["verify", archive])
        #expect(verify.status == 0, "\(verify.stderr)")
        let extract = try ResumeCLI.run(["extract", "-q", archive, "-C", work.appending("out")])
        #expect(extract.status == 0, "\(extract.stderr)")
        let extracted = try TreeSnapshot(at: work.appending("out/tree"))
        let source = try TreeSnapshot(at: work.appending("tree"))
        #expect(extracted == source, "\(extracted.diff(source))")
    }

    // MARK: verify --partial, cat --from-offset

    @Test("verify --partial --json, cat --from-offset --expect-token and append rebuild the archive")
    func transferThroughTheCommandLine() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-resume-cat")
        defer { work.remove() }
        try ResumeFixture.transferTree(seed: 1).materialize(at: work.appending("tree"))
        let archive = work.appending("archive.cairn")
        let bytes = try await RoundTrip.archive(
            path: work.appending("tree"), to: archive, configuration: ResumeFixture.configuration
        ).bytes
        let layout = try ResumeFixture.Layout(archiveAt: archive)
        var cuts = [0, 12, Int(layout.manifestOffset) + 100, bytes.count - 1, bytes.count]
        var generator = SeededGenerator(seed: 0xCA7)
        for _ in 0..<4 { cuts.append(Int.random(in: 0...bytes.count, using: &generator)) }

        let copy = work.appending("copy.cairn")
        for cut in cuts {
            try RawFileSystem.writeFile(Array(copy.utf8), Array(bytes[0..<cut]))
            let verify = try ResumeCLI.run(["verify", "--partial", "--json", copy])
            #expect(verify.status == 0, "cut at \(cut): \(verify.stderr)")
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(verify.stdout.utf8)) as? [String: Any], "\(verify.stdout)")
            let length = try #require((object["verifiedLength"] as? NSNumber)?.intValue, "\(object)")
            let token = try #require(object["resumeToken"] as? String, "\(object)")
            #expect(length == layout.verifiedLength(ofPrefix: cut), "cut at \(cut)")
            #expect(token.hasPrefix("cairn1-\(length)-"), "\(token)")

            let cat = try ResumeCLI.run(["cat", archive, "--from-offset", "\(length)", "--expect-token", token])
            #expect(cat.status == 0, "cut at \(cut): \(cat.stderr)")
            let rebuilt = Array(bytes[0..<length]) + cat.stdoutBytes
            #expect(ResumeFixture.same(rebuilt, bytes), "cut at \(cut): \(ResumeFixture.difference(rebuilt, bytes))")
        }

        // The plain text form names the same length and token.
        try RawFileSystem.writeFile(Array(copy.utf8), Array(bytes[0..<(bytes.count / 2)]))
        let text = try ResumeCLI.run(["verify", "--partial", copy])
        #expect(text.status == 0)
        #expect(text.stdout.contains("verified length: \(layout.verifiedLength(ofPrefix: bytes.count / 2))"), "\(text.stdout)")
        #expect(text.stdout.contains("resume token: cairn1-"), "\(text.stdout)")
    }

    @Test("cat --expect-token refuses a prefix of a different archive: exit 1, nothing written")
    func catRefusesForeignPrefix() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-resume-cat-foreign")
        defer { work.remove() }
        let (archive, other) = try await ResumeFixture.twoArchives(in: work)
        let copy = work.appending("copy.cairn")
        try RawFileSystem.writeFile(Array(copy.utf8), Array(other[0..<(other.count / 2)]))
        let verify = try ResumeCLI.run(["verify", "--partial", "--json", copy])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(verify.stdout.utf8)) as? [String: Any])
        let length = try #require((object["verifiedLength"] as? NSNumber)?.intValue)
        let token = try #require(object["resumeToken"] as? String)
        #expect(length > 0)
        let cat = try ResumeCLI.run(["cat", archive, "--from-offset", "\(length)", "--expect-token", token])
        #expect(cat.status == 1, "\(cat.stderr)")
        #expect(cat.stdoutBytes.isEmpty)
        #expect(cat.stderr.contains("not a prefix"), "\(cat.stderr)")
    }

    // MARK: extract --resume

    @Test("extract killed a few times, then extract --resume: same tree, and DEST never shows a partial tree")
    func extractSurvivesKills() throws {
        let work = try TemporaryDirectory(prefix: "cairn-resume-extract-kill")
        defer { work.remove() }
        try ResumeCommandLineTests.largeTree(seed: 12, scale: 2).materialize(at: work.appending("tree"))
        let archive = work.appending("archive.cairn")
        #expect(try ResumeCLI.run(["create", "-q", "-o", archive, "tree"], in: work.path).status == 0)
        let full = try ResumeCLI.run(["extract", "-q", archive, "-C", work.appending("reference")])
        try #require(full.status == 0, "\(full.stderr)")

        let destination = work.appending("dest")
        let staging = Array(work.appending(".dest.cairn-staging").utf8)
        let journal = work.appending(".dest.cairn-staging/.cairn-journal")
        // Each run is killed once it has journaled a seeded number of further commits (of about
        // a dozen): at a point of its progress, not of the clock, so a loaded machine moves no kill.
        var generator = SeededGenerator(seed: 0xE47)
        var killed = 0
        for round in 0..<4 {
            let resume = round == 0 ? [] : ["--resume"]
            let before = Self.journaledCommits(journal)
            let further = Int.random(in: 1...3, using: &generator)
            let child = try ResumeCLI.start(["extract", "-q"] + resume + [archive, "-C", destination])
            try Await.until("extract journals \(further) more commits") {
                Self.journaledCommits(journal) >= before + further || !child.process.isRunning
            }
            kill(child.pid, SIGKILL)
            let outcome = child.wait()
            if outcome.status == 0 { break }  // finished before the signal
            #expect(outcome.killed, "round \(round): \(outcome.status) \(outcome.stderr)")
            killed += 1
            #expect(!RawFileSystem.exists(Array(destination.utf8)), "round \(round): no partial tree at DEST")
        }
        #expect(killed > 0)
        if !RawFileSystem.exists(Array(destination.utf8)) {
            #expect(RawFileSystem.exists(staging), "a killed extraction leaves its staging directory")
            let resumed = try ResumeCLI.run(["extract", "-q", "--resume", archive, "-C", destination])
            #expect(resumed.status == 0, "\(resumed.stderr)")
        }
        #expect(!RawFileSystem.exists(staging))
        let extracted = try TreeSnapshot(at: destination + "/tree")
        let reference = try TreeSnapshot(at: work.appending("reference/tree"))
        #expect(extracted == reference, "\(extracted.diff(reference))")
    }

    @Test("extract - from a stream cut in half stops cleanly; a second run needs --resume; --resume finishes it")
    func extractStreamCutInHalf() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-resume-extract-stream")
        defer { work.remove() }
        let source = work.appending("tree")
        try ResumeFixture.libraryTree().materialize(at: source)
        let archive = work.appending("archive.cairn")
        let bytes = try await RoundTrip.archive(path: source, to: archive, configuration: ResumeFixture.configuration).bytes
        let layout = try ResumeFixture.Layout(archiveAt: archive)
        let half = work.appending("half.cairn")
        try RawFileSystem.writeFile(Array(half.utf8), Array(bytes[0..<(bytes.count / 2)]))
        let destination = work.appending("dest")
        let staging = Array(work.appending(".dest.cairn-staging").utf8)

        let cut = try ResumeCLI.run(["extract", "-q", "-", "-C", destination], standardInput: half)
        #expect(cut.status == 1, "\(cut.stderr)")
        #expect(cut.stderr.contains("--resume"), "\(cut.stderr)")
        // "Stops cleanly at a torn end, says how far it got": only a stream that ends between two
        // records names the verified length; one that ends inside a record names the offset it read to.
        #expect(cut.stderr.contains("\(layout.verifiedLength(ofPrefix: bytes.count / 2)) bytes verified"), "\(cut.stderr)")
        #expect(!RawFileSystem.exists(Array(destination.utf8)))
        #expect(RawFileSystem.exists(staging), "what verified is kept")
        let journal = try RawFileSystem.contents(ofFile: staging + Array("/.cairn-journal".utf8))

        // A stream that ends exactly at a commit says how much verified.
        let boundary = Int(layout.commits[layout.commits.count / 2])
        let atCommit = work.appending("at-commit.cairn")
        try RawFileSystem.writeFile(Array(atCommit.utf8), Array(bytes[0..<boundary]))
        let clean = try ResumeCLI.run(["extract", "-q", "-", "-C", work.appending("other")], standardInput: atCommit)
        #expect(clean.status == 1)
        #expect(clean.stderr.contains("\(boundary) bytes verified"), "\(clean.stderr)")
        #expect(clean.stderr.contains("--resume"), "\(clean.stderr)")
        #expect(!RawFileSystem.exists(Array(work.appending("other").utf8)))

        // Without --resume, neither a stream nor a file extraction touches the staged work.
        for attempt in [
            try ResumeCLI.run(["extract", "-q", "-", "-C", destination], standardInput: archive),
            try ResumeCLI.run(["extract", "-q", archive, "-C", destination]),
        ] {
            #expect(attempt.status == 1, "\(attempt.stderr)")
            #expect(attempt.stderr.contains("--resume"), "\(attempt.stderr)")
            #expect(!RawFileSystem.exists(Array(destination.utf8)))
            #expect(try RawFileSystem.contents(ofFile: staging + Array("/.cairn-journal".utf8)) == journal)
        }

        let resumed = try ResumeCLI.run(["extract", "-q", "--resume", "-", "-C", destination], standardInput: archive)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(!RawFileSystem.exists(staging))
        let extracted = try TreeSnapshot(at: destination + "/tree")
        let expected = try TreeSnapshot(at: source)
        #expect(extracted == expected, "\(extracted.diff(expected))")
    }

    @Test("extract --resume - refuses a stream of a different archive")
    func extractStreamResumeRefusesOtherArchive() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-resume-extract-other")
        defer { work.remove() }
        try ResumeFixture.transferTree(seed: 1).materialize(at: work.appending("one/tree"))
        try ResumeFixture.transferTree(seed: 2).materialize(at: work.appending("two/tree"))
        let archive = work.appending("one.cairn")
        let bytes = try await RoundTrip.archive(
            path: work.appending("one/tree"), to: archive, configuration: ResumeFixture.configuration
        ).bytes
        let other = work.appending("two.cairn")
        _ = try await RoundTrip.archive(path: work.appending("two/tree"), to: other, configuration: ResumeFixture.configuration)
        let half = work.appending("half.cairn")
        try RawFileSystem.writeFile(Array(half.utf8), Array(bytes[0..<(bytes.count / 2)]))
        let destination = work.appending("dest")
        let staging = Array(work.appending(".dest.cairn-staging").utf8)
        #expect(try ResumeCLI.run(["extract", "-q", "-", "-C", destination], standardInput: half).status == 1)

        let refused = try ResumeCLI.run(["extract", "-q", "--resume", "-", "-C", destination], standardInput: other)
        #expect(refused.status == 1, "\(refused.stderr)")
        #expect(refused.stderr.contains("is not the one whose extraction was interrupted"), "\(refused.stderr)")
        #expect(!RawFileSystem.exists(Array(destination.utf8)))
        // The refusal should leave the interrupted extraction's staged work for the right stream,
        // as the seekable path does ("it is never deleted silently", `ExtractionOptions.resume`).
        #expect(RawFileSystem.exists(staging), "the staged work of the interrupted extraction is kept")
    }

    @Test("extract --resume - refuses a different archive with fewer entries than were already extracted")
    func extractStreamResumeRefusesShorterArchive() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-resume-extract-short")
        defer { work.remove() }
        try ResumeFixture.transferTree(seed: 1).materialize(at: work.appending("one/tree"))
        var small = TreeBuilder()
        small.file("only.txt", Array("a different, shorter archive\n".utf8))
        try small.materialize(at: work.appending("two/tree"))
        let archive = work.appending("one.cairn")
        let bytes = try await RoundTrip.archive(
            path: work.appending("one/tree"), to: archive, configuration: ResumeFixture.configuration
        ).bytes
        let other = work.appending("two.cairn")
        _ = try await RoundTrip.archive(path: work.appending("two/tree"), to: other, configuration: ResumeFixture.configuration)
        let most = work.appending("most.cairn")
        try RawFileSystem.writeFile(Array(most.utf8), Array(bytes[0..<(bytes.count * 9 / 10)]))
        let destination = work.appending("dest")
        #expect(try ResumeCLI.run(["extract", "-q", "-", "-C", destination], standardInput: most).status == 1)

        // The journal says 50-odd entries are done; the other archive has 2, so the chain digest
        // at the journaled entry count is never compared and the old staged files are committed.
        let refused = try ResumeCLI.run(["extract", "-q", "--resume", "-", "-C", destination], standardInput: other)
        #expect(refused.status == 1, "\(refused.stderr)")
        #expect(!RawFileSystem.exists(Array(destination.utf8)), "DEST must not appear with another archive's files")
    }

    // MARK: - Fixtures

    /// About 36 MiB × `scale`⁻¹ of seeded data: two large files (commits inside them), eight
    /// middle-sized ones and 150 small ones.
    /// The `commit` lines of an extraction's journal (Spec/0003 §4.1: an extraction of
    /// everything journals as a stream); 0 when there is none.
    static func journaledCommits(_ journal: String) -> Int {
        let text = (try? String(contentsOfFile: journal, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").count { $0.hasPrefix("commit ") }
    }

    static func largeTree(seed: UInt64, scale: Int = 1) -> TreeBuilder {
        var tree = TreeBuilder()
        let base = TreeBuilder.defaultTime
        tree.file("big1.bin", ResumeFixture.bytes(12 * 1024 * 1024 / scale, seed: seed, compressible: true), mtime: base + 1)
        for index in 0..<8 {
            tree.file(
                "mid/m\(index).bin", ResumeFixture.bytes(1_500_000 / scale, seed: seed * 100 + UInt64(index), compressible: index % 2 == 0),
                mtime: base + 2 + Int64(index))
        }
        for index in 0..<150 {
            tree.file(
                "small/s\(index)", ResumeFixture.bytes(200 + index * 37, seed: seed * 1000 + UInt64(index), compressible: true),
                mtime: base + 20 + Int64(index))
        }
        tree.file("zbig2.bin", ResumeFixture.bytes(11 * 1024 * 1024 / scale, seed: seed + 7), mtime: base + 3)
        return tree
    }
}

extension ResumeFixture.Layout {
    /// Which part of the archive a prefix of `count` bytes ends in, for messages.
    func region(ofPrefix count: Int) -> String {
        guard let first = commits.first, UInt64(count) >= first else { return "before the first commit" }
        if UInt64(count) >= manifestOffset { return count >= footerOffset ? "footer" : "manifest" }
        let last = commits.last { $0 <= UInt64(count) }!
        return inFileCommits.contains(last) ? "inside a file, after an in-file commit" : "after an entry's commit"
    }
}

// MARK: - Running the executable

private enum ResumeCLI {
    typealias Result = ChildProcess.Result
    typealias Child = ChildProcess.Child

    static var executable: URL {
        get throws { try ChildProcess.cairnExecutable(besideBundle: Bundle.module.bundleURL) }
    }

    /// Starts `cairn arguments` (see ``ChildProcess``).
    static func start(_ arguments: [String], in directory: String? = nil, standardInput: String? = nil) throws -> Child {
        try ChildProcess.start(executable, arguments, in: directory, standardInput: standardInput)
    }

    /// Runs `cairn arguments` to completion (killed after `timeout` seconds).
    static func run(_ arguments: [String], in directory: String? = nil, standardInput: String? = nil, timeout: Double = Await.safetyBound)
        throws -> Result
    {
        try ChildProcess.run(executable, arguments, in: directory, standardInput: standardInput, timeout: timeout)
    }
}
