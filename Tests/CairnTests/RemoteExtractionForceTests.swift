import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import Cairn

/// An interrupted `extract URL` from a server without range support (issue 23, fault 6): one way
/// out, named by both refusals, that discards only Cairn's own staging directory.
extension RemoteHTTPTests {
    @Test("after an interrupted extract URL from a server without ranges, --resume and a plain rerun both name --force, which starts over and keeps DEST's files")
    func noRangesInterruptedExtractionHasOneWayOut() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (server, local) = try await Self.served(directory)
        defer { server.stop() }
        let bytes = try RawFileSystem.contents(ofFile: Array(local.utf8))
        try RawFileSystem.writeFile(Array((server.root + "/cut.cairn").utf8), Array(bytes[0..<(bytes.count * 3 / 4)]))
        // DEST exists and holds a file of the user's: the staging directory is DEST/.cairn-staging.
        let out = directory.appending("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        try RawFileSystem.writeFile(Array((out + "/mine.txt").utf8), Array("the user's\n".utf8))
        let staging = out + "/.cairn-staging"
        let cut = try Self.cairn(["extract", server.url("noranges/cut.cairn"), "-C", out])
        #expect(cut.status == 1, "\(cut.stderr)")
        #expect(FileManager.default.fileExists(atPath: staging + "/.cairn-journal"))
        let url = server.url("noranges/a.cairn")
        let resumed = try Self.cairn(["extract", url, "-C", out, "--resume"])
        #expect(resumed.status == 1 && resumed.stderr.contains("does not support range requests"), "\(resumed.stderr)")
        #expect(resumed.stderr.contains("--force") && resumed.stderr.contains(".cairn-staging"), "\(resumed.stderr)")
        // Not the advice to run without --resume, which the staging directory then refuses.
        #expect(!resumed.stderr.contains("(without PATHs)"), "\(resumed.stderr)")
        let plain = try Self.cairn(["extract", url, "-C", out])
        #expect(plain.status == 1 && plain.stderr.contains("--force"), "\(plain.stderr)")
        #expect(FileManager.default.fileExists(atPath: staging + "/.cairn-journal"), "a refusal kept the staging directory")
        let both = try Self.cairn(["extract", url, "-C", out, "--resume", "--force"])
        #expect(both.status == 2, "\(both.stderr)")
        let forced = try Self.cairn(["extract", url, "-C", out, "--force"])
        #expect(forced.status == 0, "\(forced.stderr)")
        #expect(!FileManager.default.fileExists(atPath: staging))
        #expect(try RawFileSystem.contents(ofFile: Array((out + "/mine.txt").utf8)) == Array("the user's\n".utf8))
        let expected = try Self.cairn(["extract", local, "-C", directory.appending("expected")])
        #expect(expected.status == 0)
        let a = try TreeSnapshot(at: out + "/t")
        let b = try TreeSnapshot(at: directory.appending("expected/t"))
        #expect(a == b, "\(a.diff(b))")
    }
}
