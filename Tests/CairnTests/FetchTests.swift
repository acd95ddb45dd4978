import CairnTestSupport
import Foundation
import Glibc
import Testing

import Cairn

/// `cairn fetch` against a real nginx on 127.0.0.1 (issue 10): full fetches, resumes after a
/// kill, a server without ranges, an archive replaced between runs, seeded deltas, HTTP errors
/// and a full disk. Serialized: the kill tests depend on timing and share two cores.
@Suite("Fetch over HTTP", .serialized)
struct FetchTests {
    /// A tree of `count` files of 24–200 KiB of seeded random bytes (incompressible, no
    /// dedup), so a cut can land anywhere.
    static func tree(seed: UInt64, count: Int = 40, contentSeed: UInt64? = nil) -> TreeBuilder {
        var generator = SeededGenerator(seed: seed)
        var content = SeededGenerator(seed: contentSeed ?? seed &+ 0x5EED)
        var tree = TreeBuilder()
        tree.directory("data")
        for index in 0..<count {
            let size = Int.random(in: (24 << 10)...(200 << 10), using: &generator)
            tree.file("data/f\(index).bin", content.bytes(size))
        }
        tree.file("data/notes.txt", Array(String(repeating: "a line of notes\n", count: 400).utf8))
        return tree
    }

    /// Creates an archive of `tree` at `path` with the `cairn` executable.
    static func archive(_ tree: TreeBuilder, at path: String, work: TemporaryDirectory, name: String = "tree") throws {
        let source = work.appending("src-" + name)
        try tree.materialize(at: source)
        let created = try FetchCLI.run(["create", "-q", "--compression", "none", "-o", path, "."], in: source)
        try #require(created.status == 0, "\(created.stderr)")
    }

    static func bytes(_ path: String) throws -> [UInt8] { try RawFileSystem.contents(ofFile: Array(path.utf8)) }

    /// Expects the file at `path` to hold exactly `expected`, saying where it differs if not.
    static func expectSame(_ path: String, _ expected: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) throws {
        let got = try bytes(path)
        guard got != expected else { return }
        let first = (0..<min(got.count, expected.count)).first { got[$0] != expected[$0] } ?? min(got.count, expected.count)
        Issue.record("\(path): \(got.count) bytes, expected \(expected.count); first difference at offset \(first)", sourceLocation: sourceLocation)
    }

    @Test("fetch downloads a verified, byte-identical archive; nothing is left beside it")
    func fullFetch() async throws { try await onDedicatedThread { try Self().fullFetchOnThread() } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func fullFetchOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-fetch")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        try Self.archive(Self.tree(seed: 1), at: served + "/a.cairn", work: work)
        let server = try NginxServer(root: served)
        defer { server.stop() }

        let out = work.appending("copy.cairn")
        let result = try FetchCLI.run(["fetch", server.url("a.cairn"), "-o", out, "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try Self.bytes(out) == Self.bytes(served + "/a.cairn"))
        #expect(!RawFileSystem.exists(Array((out + ".partial").utf8)))
        #expect(!RawFileSystem.exists(Array((out + ".partial.fetch").utf8)))
        #expect(result.stdout.contains("\"fetchedBytes\""), "\(result.stdout)")

        // An existing FILE is never replaced without --force.
        let again = try FetchCLI.run(["fetch", server.url("a.cairn"), "-o", out])
        #expect(again.status == 1)
        #expect(again.stderr.contains(out), "\(again.stderr)")
        let forced = try FetchCLI.run(["fetch", server.url("a.cairn"), "-o", out, "--force", "-q"])
        #expect(forced.status == 0, "\(forced.stderr)")
    }

    @Test("a fetch killed mid-body and rerun continues from the last verified commit with a range request, byte-identical")
    func resumeAfterKill() async throws { try await onDedicatedThread { try Self().resumeAfterKillOnThread() } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func resumeAfterKillOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-fetch-kill")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        try Self.archive(Self.tree(seed: 2, count: 30), at: served + "/a.cairn", work: work)
        let expected = try Self.bytes(served + "/a.cairn")
        let server = try NginxServer(root: served, slowRate: "1m")
        defer { server.stop() }
        let url = server.url("slow/a.cairn")
        let out = work.appending("copy.cairn")

        var generator = SeededGenerator(seed: 0xFE7C)
        var resumedAt: [UInt64] = []
        for round in 0..<3 {
            // One connection: what a kill leaves is one prefix (`ParallelFetchTests` kills a
            // fetch over several).
            let child = try FetchCLI.start(["fetch", url, "-o", out, "-q", "--connections", "1"])
            usleep(useconds_t(Double.random(in: 0.3...0.8, using: &generator) * 1_000_000))
            kill(child.pid, SIGKILL)
            let killed = child.wait()
            if killed.status == 0 { break }  // finished first: nothing to resume
            let partial = out + ".partial"
            let size = UInt64((try? RawFileSystem.status(Array(partial.utf8)).st_size) ?? 0)
            let prefix = try awaitPrefix(partial)
            resumedAt.append(prefix)
            // What the next run sends again: the unverified tail, at most one commit interval.
            #expect(size - prefix <= 1 << 20 + 256 << 10, "round \(round): \(size - prefix) bytes after the last commit")
        }
        let finished = try FetchCLI.run(["fetch", url, "-o", out, "--json"])
        #expect(finished.status == 0, "\(finished.stderr)")
        try FetchTests.expectSame(out, expected)
        let ranged = server.accessLog().filter { $0.status == 206 }
        #expect(!ranged.isEmpty || resumedAt.allSatisfy { $0 == 0 }, "the reruns asked for ranges: \(server.accessLog())")
        for entry in ranged { #expect(entry.bodyBytesSent < UInt64(expected.count)) }
    }

    @Test("a rerun continues from the last verified commit without hashing again the chunks an earlier run checked; a partial changed on disk is cut before the change")
    func recordedProgress() async throws { try await onDedicatedThread { try Self().recordedProgressOnThread() } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func recordedProgressOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-fetch-progress")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        try Self.archive(Self.tree(seed: 21, count: 64), at: served + "/a.cairn", work: work)
        let expected = try Self.bytes(served + "/a.cairn")
        let server = try NginxServer(root: served, slowRate: "1m")
        defer { server.stop() }
        let url = server.url("slow/a.cairn")
        let out = work.appending("copy.cairn")
        let partial = out + ".partial"

        // Kill the fetch once its state records checked contents (a few MiB at 1 MiB/s).
        let child = try FetchCLI.start(["fetch", url, "-o", out, "-q"])
        var recorded: FetchState?
        try Await.until("the fetch's state records checked contents") {
            if let state = FetchState.load(for: out), (state.contentChecked ?? 0) > 0 { recorded = state }
            return recorded != nil || !child.process.isRunning
        }
        kill(child.pid, SIGKILL)
        _ = child.wait()
        let state = try #require(recorded, "the state file never recorded checked contents")
        let checked = try #require(state.contentChecked)
        // Contents are recorded as checked only inside the verified prefix.
        let prefix = try awaitPrefix(partial)
        #expect(checked <= prefix && prefix < UInt64(expected.count))
        let kept = try Self.bytes(partial)
        let keptState = try #require(FetchState.load(for: out))

        // 1. The rerun starts at the last verified commit and trusts what was checked.
        let rerun = try FetchCLI.run(["fetch", url, "-o", out, "--json"])
        #expect(rerun.status == 0, "\(rerun.stderr)")
        try FetchTests.expectSame(out, expected)
        let report = try JSONSerialization.jsonObject(with: Data(rerun.stdout.utf8)) as? [String: Any]
        let trusted = (report?["contentTrustedBytes"] as? NSNumber)?.uint64Value ?? 0
        let resumed = (report?["resumedFrom"] as? NSNumber)?.uint64Value ?? 0
        #expect(trusted > 0 && trusted <= resumed, "\(rerun.stdout)")
        #expect(resumed == prefix, "\(rerun.stdout)")

        // 2. The same partial, changed on disk inside the checked contents (one byte of a chunk's
        //    payload): its CRC-32 fails, so the verified prefix ends before it, and the fetch
        //    continues from there without starting over, trusting only what is before it.
        unlink(out)
        var damaged = kept
        let at = Int(keptState.contentChecked ?? 0) / 2
        damaged[at] ^= 0x55
        try RawFileSystem.writeFile(Array(partial.utf8), damaged)
        try keptState.save(for: out)
        let repaired = try FetchCLI.run(["fetch", url, "-o", out, "--json"])
        #expect(repaired.status == 0, "\(repaired.stderr)")
        try FetchTests.expectSame(out, expected)
        let second = try JSONSerialization.jsonObject(with: Data(repaired.stdout.utf8)) as? [String: Any]
        #expect((second?["restarts"] as? NSNumber)?.intValue == 0, "\(repaired.stdout)")
        let secondResumed = (second?["resumedFrom"] as? NSNumber)?.uint64Value ?? .max
        #expect(secondResumed <= UInt64(at), "\(repaired.stdout)")
        #expect(((second?["contentTrustedBytes"] as? NSNumber)?.uint64Value ?? .max) <= secondResumed, "\(repaired.stdout)")
    }

    @Test("a remote archive damaged in a chunk: exit 1 naming the URL and the offset, no FILE; the rerun fails alike without downloading it again")
    func damagedRemote() async throws { try await onDedicatedThread { try Self().damagedRemoteOnThread() } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func damagedRemoteOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-fetch-damaged")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        try Self.archive(Self.tree(seed: 26, count: 24), at: served + "/a.cairn", work: work)
        var bytes = try Self.bytes(served + "/a.cairn")
        // Uncompressed random content: two thirds in is inside some chunk record's stored bytes.
        bytes[bytes.count * 2 / 3] ^= 0x10
        try RawFileSystem.writeFile(Array((served + "/a.cairn").utf8), bytes)
        let server = try NginxServer(root: served)
        defer { server.stop() }
        let url = server.url("a.cairn")
        let out = work.appending("copy.cairn")
        let first = try FetchCLI.run(["fetch", url, "-o", out])
        #expect(first.status == 1)
        #expect(first.stderr.contains(url) && first.stderr.contains("offset"), "\(first.stderr)")
        #expect(!RawFileSystem.exists(Array(out.utf8)))
        let before = server.accessLog().count
        // One connection: the rerun's requests are counted below.
        let rerun = try FetchCLI.run(["fetch", url, "-o", out, "--connections", "1"])
        #expect(rerun.status == 1)
        #expect(rerun.stderr.contains(url) && rerun.stderr.contains("offset"), "\(rerun.stderr)")
        #expect(!rerun.stderr.contains("starting over"), "\(rerun.stderr)")
        #expect(!RawFileSystem.exists(Array(out.utf8)))
        // One range request for the rest, not a download from zero as well.
        let requests = server.accessLog().dropFirst(before)
        #expect(requests.count == 1 && requests.allSatisfy { $0.status == 206 }, "\(requests)")
    }

    @Test("a fetch killed after its last byte but before the rename: the rerun puts the verified partial in place without a request")
    func completePartial() async throws { try await onDedicatedThread { try Self().completePartialOnThread() } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func completePartialOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-fetch-complete")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        try Self.archive(Self.tree(seed: 13, count: 6), at: served + "/a.cairn", work: work)
        let expected = try Self.bytes(served + "/a.cairn")
        let server = try NginxServer(root: served)
        defer { server.stop() }
        let url = server.url("a.cairn")
        let out = work.appending("copy.cairn")
        // What a kill between the last byte and the rename leaves.
        try RawFileSystem.writeFile(Array((out + ".partial").utf8), expected)
        try FetchState(url: url, validator: nil, length: UInt64(expected.count)).save(for: out)
        let result = try FetchCLI.run(["fetch", url, "-o", out, "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        try FetchTests.expectSame(out, expected)
        #expect(result.stdout.contains("\"requestCount\":0"), "\(result.stdout)")
        #expect(!RawFileSystem.exists(Array((out + ".partial").utf8)))
        // And the partial itself given as a seed is resumed, not copied from.
        unlink(out)
        try RawFileSystem.writeFile(Array((out + ".partial").utf8), Array(expected.prefix(expected.count / 2)))
        try FetchState(url: url, validator: nil, length: UInt64(expected.count)).save(for: out)
        let seeded = try FetchCLI.run(["fetch", url, "-o", out, "--seed", out + ".partial", "-q"])
        #expect(seeded.status == 0, "\(seeded.stderr)")
        try FetchTests.expectSame(out, expected)
        let dash = try FetchCLI.run(["fetch", url, "-o", "-"])
        #expect(dash.status == 2, "\(dash.stderr)")
    }

    @Test("a server without range support: the rerun downloads the archive again from zero, never splices")
    func serverWithoutRanges() async throws { try await onDedicatedThread { try Self().serverWithoutRangesOnThread() } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func serverWithoutRangesOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-fetch-noranges")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        try Self.archive(Self.tree(seed: 3, count: 12), at: served + "/a.cairn", work: work)
        let expected = try Self.bytes(served + "/a.cairn")
        let server = try NginxServer(root: served)
        defer { server.stop() }
        let url = server.url("noranges/a.cairn")
        let out = work.appending("copy.cairn")
        // A cut copy left by an earlier run of this fetch.
        let first = try FetchCLI.run(["fetch", url, "-o", out, "-q"])
        try #require(first.status == 0, "\(first.stderr)")
        let cut = Array(expected.prefix(expected.count / 2))
        try RawFileSystem.writeFile(Array((out + ".partial").utf8), cut)
        try FetchState(url: url, validator: nil, length: UInt64(expected.count)).save(for: out)
        unlink(out)

        let rerun = try FetchCLI.run(["fetch", url, "-o", out, "--json"])
        #expect(rerun.status == 0, "\(rerun.stderr)")
        try FetchTests.expectSame(out, expected)
        #expect(rerun.stdout.contains("\"restarts\":1"), "\(rerun.stdout)")
    }

    @Test("an archive replaced on the server between two runs ends as the new archive exactly, even when the validator does not change")
    func archiveReplacedBetweenRuns() async throws { try await onDedicatedThread { try Self().archiveReplacedBetweenRunsOnThread() } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func archiveReplacedBetweenRunsOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-fetch-replaced")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        let old = work.appending("old.cairn")
        let new = work.appending("new.cairn")
        try Self.archive(Self.tree(seed: 4, count: 12), at: old, work: work, name: "old")
        try Self.archive(Self.tree(seed: 4, count: 12, contentSeed: 5), at: new, work: work, name: "new")
        let oldBytes = try Self.bytes(old)
        let newBytes = try Self.bytes(new)
        let server = try NginxServer(root: served)
        defer { server.stop() }
        let url = server.url("a.cairn")
        let target = served + "/a.cairn"
        let out = work.appending("copy.cairn")
        var times = [timespec(tv_sec: 1_600_000_000, tv_nsec: 0), timespec(tv_sec: 1_600_000_000, tv_nsec: 0)]

        for validatorStays in [false, true] {
            unlink(out)
            // An earlier run left half of the old archive, with what it learned beside it.
            try RawFileSystem.writeFile(Array((out + ".partial").utf8), Array(oldBytes.prefix(oldBytes.count / 2)))
            let state: FetchState
            if validatorStays {
                // A validator that still matches (Last-Modified, the new file gets the same mtime)
                // and no recorded length: the server answers 206, and only the chain digests
                // can tell that the bytes after the prefix belong to another archive.
                state = FetchState(url: url, validator: "Sun, 13 Sep 2020 12:26:40 GMT", length: nil)
            } else {
                // nginx's ETag of the old file (hex mtime and size); the new file has another.
                state = FetchState(url: url, validator: "\"5f5e1000-\(String(oldBytes.count, radix: 16))\"", length: UInt64(oldBytes.count))
            }
            try state.save(for: out)
            try RawFileSystem.writeFile(Array(target.utf8), newBytes)
            if validatorStays { utimensat(AT_FDCWD, target, &times, 0) }
            let rerun = try FetchCLI.run(["fetch", url, "-o", out, "--json"])
            #expect(rerun.status == 0, "\(rerun.stderr)")
            #expect(try Self.bytes(out) == newBytes, "validatorStays \(validatorStays)")
            #expect(rerun.stdout.contains("\"restarts\":1"), "\(rerun.stdout)")
            if validatorStays {
                #expect(server.accessLog().contains { $0.status == 206 }, "the server did answer the resumed range")
            }
        }
    }

    @Test("a seeded fetch downloads the manifest and the changed records only, and rebuilds the archive byte-identical")
    func seededDelta() async throws { try await onDedicatedThread { try Self().seededDeltaOnThread() } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func seededDeltaOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-fetch-delta")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        var tree = Self.tree(seed: 6, count: 40)
        let old = work.appending("old.cairn")
        try Self.archive(tree, at: old, work: work, name: "old")
        // The benchmark's small change: 64 KiB appended to a text file, three 16-byte overwrites
        // inside the largest file, one new 1 MiB file.
        var generator = SeededGenerator(seed: 66)
        var items = tree.items
        for index in items.indices {
            guard case .file(contents: var contents, mode: let mode, mtime: let mtime) = items[index].node else { continue }
            if items[index].path == Array("data/notes.txt".utf8) { contents += generator.bytes(64 << 10) }
            if items[index].path == Array("data/f0.bin".utf8) {
                for at in [contents.count / 4, contents.count / 2, contents.count * 3 / 4] {
                    contents.replaceSubrange(at..<(at + 16), with: generator.bytes(16))
                }
            }
            items[index].node = .file(contents: contents, mode: mode, mtime: mtime)
        }
        tree = TreeBuilder()
        for item in items { tree.add(item.path, item.node) }
        tree.file("data/new.bin", generator.bytes(1 << 20))
        try Self.archive(tree, at: served + "/a.cairn", work: work, name: "new")
        let expected = try Self.bytes(served + "/a.cairn")
        let server = try NginxServer(root: served)
        defer { server.stop() }

        let out = work.appending("copy.cairn")
        let result = try FetchCLI.run(["fetch", server.url("a.cairn"), "-o", out, "--seed", old, "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        try FetchTests.expectSame(out, expected)
        let fetched = server.accessLog().reduce(UInt64(0)) { $0 + $1.bodyBytesSent }
        // What must cross: the manifest, the footer and the records no seed has.
        let needed = try FetchFixture.changedBytes(archive: served + "/a.cairn", seed: old)
        #expect(Double(fetched) <= 1.25 * Double(needed) + 16384, "fetched \(fetched) bytes, needed \(needed), of \(expected.count)")
    }

    @Test("a remote seed (an archive at a URL): its chunk records are copied with range requests, the archive's own bytes mostly not downloaded; result identical")
    func remoteSeed() async throws { try await onDedicatedThread { try Self().remoteSeedOnThread() } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func remoteSeedOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-fetch-remote-seed")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        // Large files only (chunk records, not packs), the second archive with one file changed.
        var generator = SeededGenerator(seed: 77)
        let contents = (0..<8).map { _ in generator.bytes(600 << 10) }
        let changed = generator.bytes(600 << 10)
        var old = TreeBuilder()
        var new = TreeBuilder()
        old.directory("data")
        new.directory("data")
        for index in 0..<8 {
            old.file("data/big\(index).bin", contents[index])
            new.file("data/big\(index).bin", index == 3 ? changed : contents[index])
        }
        try Self.archive(old, at: served + "/old.cairn", work: work, name: "old")
        try Self.archive(new, at: served + "/new.cairn", work: work, name: "new")
        let expected = try Self.bytes(served + "/new.cairn")
        let server = try NginxServer(root: served)
        defer { server.stop() }

        let out = work.appending("copy.cairn")
        let result = try FetchCLI.run(["fetch", server.url("new.cairn"), "-o", out, "--seed", server.url("old.cairn"), "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        try FetchTests.expectSame(out, expected)
        let log = server.accessLog()
        let fromNew = log.filter { $0.path.hasSuffix("/new.cairn") }.reduce(UInt64(0)) { $0 + $1.bodyBytesSent }
        let fromOld = log.filter { $0.path.hasSuffix("/old.cairn") }.reduce(UInt64(0)) { $0 + $1.bodyBytesSent }
        #expect(fromOld > UInt64(5 * (600 << 10)), "the unchanged files came from the seed: \(fromOld) bytes")
        #expect(fromNew < UInt64(expected.count / 3), "\(fromNew) of \(expected.count) bytes of the archive itself were downloaded")
        #expect(result.stdout.contains("\"seedBytes\""), "\(result.stdout)")
    }

    @Test("a seed whose record has the right id and length but other bytes: the bytes are downloaded instead, result identical")
    func lyingSeed() async throws { try await onDedicatedThread { try Self().lyingSeedOnThread() } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func lyingSeedOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-fetch-badseed")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        try Self.archive(Self.tree(seed: 7, count: 8), at: served + "/a.cairn", work: work)
        let expected = try Self.bytes(served + "/a.cairn")
        // The seed is the archive with one stored byte flipped inside a chunk record (its CRC
        // then fails, and its chunk id no longer matches its bytes).
        var seed = expected
        seed[seed.count / 3] ^= 0x40
        let seedPath = work.appending("seed.cairn")
        try RawFileSystem.writeFile(Array(seedPath.utf8), seed)
        let server = try NginxServer(root: served)
        defer { server.stop() }
        let out = work.appending("copy.cairn")
        let result = try FetchCLI.run(["fetch", server.url("a.cairn"), "-o", out, "--seed", seedPath, "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        try FetchTests.expectSame(out, expected)
    }

    @Test("404 and 500 end with exit 1 naming the URL and the status; nothing is left at FILE")
    func httpErrors() async throws { try await onDedicatedThread { try Self().httpErrorsOnThread() } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func httpErrorsOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-fetch-status")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        let server = try NginxServer(root: served)
        defer { server.stop() }
        let out = work.appending("copy.cairn")
        let missing = try FetchCLI.run(["fetch", server.url("missing.cairn"), "-o", out])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains(server.url("missing.cairn")) && missing.stderr.contains("404"), "\(missing.stderr)")
        let failing = try FetchCLI.run(["fetch", server.url("status/500"), "-o", out, "--retries", "2"])
        #expect(failing.status == 1)
        #expect(failing.stderr.contains("500") && failing.stderr.contains("retrying (2 of 2)"), "\(failing.stderr)")
        #expect(!RawFileSystem.exists(Array(out.utf8)))
        #expect(!RawFileSystem.exists(Array((out + ".partial").utf8)), "nothing verified, nothing kept")
        // A password in the URL is never printed.
        let secret = try FetchCLI.run(["fetch", server.url("missing.cairn").replacingOccurrences(of: "http://", with: "http://me:s3cret@"), "-o", out])
        #expect(secret.status == 1)
        #expect(!secret.stderr.contains("s3cret") && secret.stderr.contains("me:***@"), "\(secret.stderr)")
        #expect(CairnError.hidingPassword(in: "https://u:p@h/x?a=b@c") == "https://u:***@h/x?a=b@c")
        #expect(CairnError.hidingPassword(in: "https://h/x@y:z") == "https://h/x@y:z")
        // A name that does not resolve is a network failure each time it is tried (a handle left
        // by a failed lookup once answered "bad argument" on the retry).
        let unresolved = try FetchCLI.run(["fetch", "http://cairn-test.invalid/a.cairn", "-o", out, "--retries", "1"])
        #expect(unresolved.status == 1)
        #expect(unresolved.stderr.components(separatedBy: "resolve").count - 1 >= 2, "\(unresolved.stderr)")
        #expect(!unresolved.stderr.contains("bad argument"), "\(unresolved.stderr)")
        #expect(!RawFileSystem.exists(Array((out + ".partial.fetch").utf8)))
    }

    @Test("a URL that is not a Cairn archive: exit 1 naming it, nothing left behind, and a rerun says the same")
    func notAnArchive() async throws { try await onDedicatedThread { try Self().notAnArchiveOnThread() } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func notAnArchiveOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-fetch-notarchive")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        var generator = SeededGenerator(seed: 12)
        try RawFileSystem.writeFile(Array((served + "/page.html").utf8), generator.bytes(600_000))
        let server = try NginxServer(root: served)
        defer { server.stop() }
        let out = work.appending("z.cairn")
        for run in 0..<2 {
            let result = try FetchCLI.run(["fetch", server.url("page.html"), "-o", out])
            #expect(result.status == 1, "run \(run)")
            #expect(result.stderr.contains(server.url("page.html")), "run \(run): \(result.stderr)")
            #expect(!RawFileSystem.exists(Array(out.utf8)))
            #expect(!RawFileSystem.exists(Array((out + ".partial").utf8)), "run \(run): unverified bytes were kept")
        }
        #expect(server.accessLog().count == 2, "the rerun asked the server again")
    }

    @Test("a redirect is followed; gzip offered by the server is never applied (Accept-Encoding: identity)")
    func redirectAndGzip() async throws { try await onDedicatedThread { try Self().redirectAndGzipOnThread() } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func redirectAndGzipOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-fetch-redirect")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        try Self.archive(Self.tree(seed: 8, count: 6), at: served + "/a.cairn", work: work)
        let expected = try Self.bytes(served + "/a.cairn")
        let server = try NginxServer(root: served)
        defer { server.stop() }
        for path in ["redirect/a.cairn", "gzip/a.cairn"] {
            let out = work.appending(path.replacingOccurrences(of: "/", with: "-"))
            let result = try FetchCLI.run(["fetch", server.url(path), "-o", out, "-q"])
            #expect(result.status == 0, "\(path): \(result.stderr)")
            #expect(try Self.bytes(out) == expected, "\(path)")
        }
    }

    @Test("a full disk: exit 1 naming the partial file, no FILE; the rerun completes byte-identical")
    func fullDisk() async throws { try await onDedicatedThread { try Self().fullDiskOnThread() } }

    /// Blocks (child processes, servers): runs on its own thread, not the cooperative pool.
    func fullDiskOnThread() throws {
        let work = try TemporaryDirectory(prefix: "cairn-fetch-full")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        try Self.archive(Self.tree(seed: 9, count: 30), at: served + "/a.cairn", work: work)
        let expected = try Self.bytes(served + "/a.cairn")
        let server = try NginxServer(root: served)
        defer { server.stop() }
        // The disk fills after 1 MiB, and then within the archive's last KiB (the writer's
        // last gathered write, which must fail the fetch as loudly as any other).
        #expect(expected.count > 1 << 20 && expected.count % 1024 != 0)
        for (index, limitKiB) in [1024, expected.count / 1024].enumerated() {
            let out = work.appending("copy\(index).cairn")
            let failed = try FetchCLI.run(["fetch", server.url("a.cairn"), "-o", out], fileSizeLimitKiB: limitKiB)
            #expect(failed.status == 1, "limit \(limitKiB) KiB")
            #expect(failed.stderr.contains(out + ".partial"), "limit \(limitKiB) KiB: \(failed.stderr)")
            #expect(!RawFileSystem.exists(Array(out.utf8)))
            let rerun = try FetchCLI.run(["fetch", server.url("a.cairn"), "-o", out, "--json"])
            #expect(rerun.status == 0, "\(rerun.stderr)")
            try FetchTests.expectSame(out, expected)
            #expect(!rerun.stdout.contains("\"resumedFrom\":0"), "the rerun resumed: \(rerun.stdout)")
        }
    }

    @Test("library: cancelling a fetch leaves a resumable partial file; fetching again completes it")
    func cancellation() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-fetch-cancel")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        try Self.archive(Self.tree(seed: 10, count: 20), at: served + "/a.cairn", work: work)
        let expected = try Self.bytes(served + "/a.cairn")
        let server = try NginxServer(root: served, slowRate: "1m")
        defer { server.stop() }
        let url = server.url("slow/a.cairn")
        let out = work.appending("copy.cairn")
        // One connection: what cancelling leaves is one prefix, not yet complete.
        var one = FetchOptions()
        one.connections = 1
        let task = Task { [one] in try await ArchiveFetcher(from: ArchiveLocation(parsing: url), options: one).fetch(to: .file(path: out)) }
        // Cancelled once a commit has reached the partial file (the rest takes seconds at 1 MiB/s).
        try await Await.suspendingUntil("a commit reaches \(out).partial", interval: 0.02) {
            guard RawFileSystem.exists(Array((out + ".partial").utf8)) else { return false }
            return ((try? await Extractor.verifyPrefix(at: .file(path: out + ".partial")))?.verifiedLength ?? 0) > 0
        }
        task.cancel()
        let outcome = await task.result
        #expect(throws: CancellationError.self) { try outcome.get() }
        let prefix = try await Extractor.verifyPrefix(at: .file(path: out + ".partial"))
        #expect(prefix.verifiedLength > 0 && !prefix.isComplete)
        let report = try await ArchiveFetcher(from: ArchiveLocation(parsing: url)).fetch(to: .file(path: out))
        #expect(report.resumedFrom == prefix.verifiedLength)
        try FetchTests.expectSame(out, expected)
    }

    @Test("the archive at the URL became shorter than the partial's verified prefix: nginx answers 416, and the rerun starts over and gives the new archive")
    func shorterArchiveStartsOver() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-fetch-416")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        // What the URL served when the killed run began, and what it serves now: a smaller one.
        try Self.archive(Self.tree(seed: 11, count: 30), at: work.appending("old.cairn"), work: work, name: "old")
        try Self.archive(Self.tree(seed: 12, count: 2), at: served + "/a.cairn", work: work, name: "new")
        let old = try Self.bytes(work.appending("old.cairn"))
        let expected = try Self.bytes(served + "/a.cairn")
        let server = try NginxServer(root: served)
        defer { server.stop() }
        let url = server.url("a.cairn")
        let out = work.appending("copy.cairn")
        // A run killed at 70% of the old archive, from a server that sent no validator.
        try RawFileSystem.writeFile(Array((out + ".partial").utf8), Array(old[0..<(old.count * 7 / 10)]))
        try FetchState(url: url, validator: nil, length: UInt64(old.count)).save(for: out)
        let prefix = try await Extractor.verifyPrefix(at: .file(path: out + ".partial")).verifiedLength
        #expect(prefix > UInt64(expected.count), "the test needs a prefix past the new archive's end")

        let report = try await ArchiveFetcher(from: ArchiveLocation(parsing: url)).fetch(to: .file(path: out))
        try FetchTests.expectSame(out, expected)
        #expect(report.restarts == 1 && report.resumedFrom == 0, "\(report)")
        let log = server.accessLog()
        #expect(log.first?.status == 416 && log.dropFirst().allSatisfy { $0.status == 200 || $0.status == 206 }, "\(log)")
    }

    @Test("library: a rerun reads the partial file once (its size, not its prefix again) and asks for the rest from its last commit")
    func rerunReadsThePartialOnce() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-fetch-once")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        try Self.archive(Self.tree(seed: 11, count: 30), at: served + "/a.cairn", work: work)
        let expected = try Self.bytes(served + "/a.cairn")
        let server = try NginxServer(root: served)
        defer { server.stop() }
        let url = server.url("a.cairn")
        let out = work.appending("copy.cairn")
        // What a run killed at 70% leaves: a partial cut inside a commit interval, and its state.
        let cut = expected.count * 7 / 10
        try RawFileSystem.writeFile(Array((out + ".partial").utf8), Array(expected[0..<cut]))
        try FetchState(url: url, validator: nil, length: UInt64(expected.count)).save(for: out)
        let prefix = try await Extractor.verifyPrefix(at: .file(path: out + ".partial")).verifiedLength
        #expect(prefix > 0 && prefix < UInt64(cut))

        let fetcher = try ArchiveFetcher(from: ArchiveLocation(parsing: url))
        let report = try await fetcher.fetch(to: .file(path: out))
        try FetchTests.expectSame(out, expected)
        #expect(report.resumedFrom == prefix)
        // Once: the verifier that found the last commit went on with the server's bytes (before,
        // the prefix was read a second time to feed the verifier: cut + prefix bytes).
        #expect(fetcher.partialBytesRead == UInt64(cut), "\(fetcher.partialBytesRead) bytes read from a \(cut)-byte partial")
        let log = server.accessLog()
        #expect(log.count == 1 && log.first?.status == 206, "\(log)")
        #expect(log.first?.bodyBytesSent == UInt64(expected.count) - prefix, "\(log)")
    }

    @Test("library: after a fetch restarts (the archive was replaced), every range request of the new attempt carries If-Range with the new validator (Spec/0003 §1.1)")
    func rangeRequestsAfterARestartCarryIfRange() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-fetch-ifrange")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        let old = work.appending("old.cairn")
        try Self.archive(Self.tree(seed: 4, count: 12), at: old, work: work, name: "old")
        // The new archive shares most files with the old one: the restart rebuilds from the old
        // partial (a seed) and downloads the rest with range requests.
        try Self.archive(Self.tree(seed: 4, count: 14), at: served + "/a.cairn", work: work, name: "new")
        let oldBytes = try Self.bytes(old)
        let expected = try Self.bytes(served + "/a.cairn")
        let server = try NginxServer(root: served)
        defer { server.stop() }
        let url = server.url("a.cairn")
        let out = work.appending("copy.cairn")
        // A run of the old archive stopped halfway, with the old archive's ETag beside it.
        try RawFileSystem.writeFile(Array((out + ".partial").utf8), Array(oldBytes.prefix(oldBytes.count / 2)))
        try FetchState(url: url, validator: "\"5f5e1000-\(String(oldBytes.count, radix: 16))\"", length: UInt64(oldBytes.count))
            .save(for: out)

        // One connection: the requests of the attempt before the restart are told apart below.
        var one = FetchOptions()
        one.connections = 1
        let report = try await ArchiveFetcher(from: ArchiveLocation(parsing: url), options: one).fetch(to: .file(path: out))
        try FetchTests.expectSame(out, expected)
        #expect(report.restarts == 1, "\(report)")
        // nginx's ETag: the file's mtime and size in hex.
        var status = stat()
        try #require(stat(served + "/a.cairn", &status) == 0)
        let etag = "\"\(String(status.st_mtim.tv_sec, radix: 16))-\(String(status.st_size, radix: 16))\""
        let fields = server.requestFields()
        // The first request continues the old partial (its If-Range names the old archive: a 200,
        // and the restart); the opening suffix request of the new attempt learns the validator.
        let restarted = fields.dropFirst().filter { !$0.range.isEmpty && !$0.range.hasPrefix("bytes=-") }
        #expect(restarted.count >= 2, "the restart sent no range requests after its manifest: \(fields)")
        for request in restarted {
            #expect(request.ifRange == etag, "\(request.range) was sent with If-Range '\(request.ifRange)', not \(etag)")
        }
    }

    private func awaitPrefix(_ path: String) throws -> UInt64 {
        let semaphore = DispatchSemaphore(value: 0)
        let box = ResultBox()
        Task {
            box.value = try? await Extractor.verifyPrefix(at: .file(path: path)).verifiedLength
            semaphore.signal()
        }
        semaphore.wait()
        return box.value ?? 0
    }
}

private final class ResultBox: @unchecked Sendable { var value: UInt64? }

/// Figures about archives for the delta tests.
enum FetchFixture {
    /// Bytes a seeded fetch of `archive` must download when `seed` is at hand: the manifest and
    /// footer, and every chunk record whose id the seed's chunk records lack.
    static func changedBytes(archive: String, seed: String) throws -> UInt64 {
        let remote = try Extractor(reader: ArchiveReader(path: archive))
        defer { remote.close() }
        let local = try Extractor(reader: ArchiveReader(path: seed))
        defer { local.close() }
        let known = Set(local.reader.manifest.chunks.filter { $0.pack == nil }.map(\.id))
        var total = remote.reader.footer.manifestLength + UInt64(140)
        for chunk in remote.reader.manifest.chunks where chunk.pack == nil && !known.contains(chunk.id) {
            total += UInt64(RecordFraming.overhead + ChunkRecordPrefix.length) + UInt64(chunk.storedLength)
        }
        return total
    }
}

enum FetchCLI {
    static var executable: URL {
        get throws { try ChildProcess.cairnExecutable(besideBundle: Bundle.module.bundleURL) }
    }

    static func start(_ arguments: [String], in directory: String? = nil) throws -> ChildProcess.Child {
        try ChildProcess.start(executable, arguments, in: directory)
    }

    static func run(_ arguments: [String], in directory: String? = nil, fileSizeLimitKiB: Int? = nil, timeout: Double = Await.safetyBound) throws
        -> ChildProcess.Result
    {
        try ChildProcess.run(executable, arguments, in: directory, fileSizeLimitKiB: fileSizeLimitKiB, timeout: timeout)
    }
}
