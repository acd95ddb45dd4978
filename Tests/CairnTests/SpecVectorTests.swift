import CairnTestSupport
import Foundation
import Glibc
import Testing

import Cairn

/// `Spec/0001-container-format.md §15.2` is the writer's output: the format 2.0 test vector,
/// whose bytes `Spec/vectors/verify_v2.py` rechecks from the Spec's rules alone, is written
/// again here by the reference writer from the inputs §15.2 names, so Code and Spec cannot drift.
@Suite("Spec test vector 2.0")
struct SpecVectorTests {
    static var vectorURL: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Spec/vectors/v2.hex")
    }

    /// The vector's bytes: hex, whitespace and `#` lines ignored.
    static func vector() throws -> [UInt8] {
        let text = try String(contentsOf: vectorURL, encoding: .utf8)
        let hex = text.split(separator: "\n").filter { !$0.hasPrefix("#") }.joined().filter { !$0.isWhitespace }
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            guard let byte = UInt8(hex[index..<next], radix: 16) else { throw CairnError(.corrupted, "bad hex in v2.hex") }
            bytes.append(byte)
            index = next
        }
        return bytes
    }

    @Test(
        "writing §15.2's inputs gives exactly Spec/vectors/v2.hex",
        .enabled(if: getuid() == 0 && getgid() == 0, "the vector records uid and gid 0"))
    func writerWritesTheVector() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-vector")
        defer { work.remove() }
        let d = work.appending("d")
        try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: false)
        func file(_ name: String, _ text: String, _ mode: mode_t) throws -> String {
            let path = d + "/" + name
            try RawFileSystem.writeFile(Array(path.utf8), Array(text.utf8))
            #expect(chmod(path, mode) == 0)
            return path
        }
        let a = try file("a.txt", "hello\n", 0o644)
        try Xattr.set(a, "user.k", Array("v".utf8))
        #expect(link(a, d + "/h") == 0)
        _ = try file("b.txt", "hello\n", 0o600)
        _ = try file("e", "", 0o644)
        #expect(symlink("a.txt", d + "/l") == 0)
        let directory = open(d, O_RDONLY | O_DIRECTORY)
        defer { close(directory) }
        try RawFileSystem.setModificationTime(Array("a.txt".utf8), in: directory, nanoseconds: 1_700_000_000_123_456_789)
        var later = [timespec(tv_sec: 0, tv_nsec: 0), timespec(tv_sec: 13_569_465_600, tv_nsec: 1)]  // 2400: past Int64 ns
        #expect(utimensat(directory, "b.txt", &later, AT_SYMLINK_NOFOLLOW) == 0)
        try RawFileSystem.setModificationTime(Array("e".utf8), in: directory, nanoseconds: -999_999_999)
        try RawFileSystem.setModificationTime(Array("l".utf8), in: directory, nanoseconds: 1_700_000_000_000_000_000)
        #expect(chmod(d, 0o755) == 0)
        try RawFileSystem.setModificationTime(Array(d.utf8), in: AT_FDCWD, nanoseconds: 1_700_000_000_500_000_000)

        var configuration = Archiver.Configuration()
        configuration.compression = .none
        configuration.isCompressible = false
        configuration.sourcePlatform = ""
        let output = work.appending("v2.cairn")
        let archiver = try Archiver(writingTo: output, configuration: configuration)
        try await archiver.appendItem(at: URL(fileURLWithPath: d))
        let content = AsyncStream<[UInt8]> { continuation in
            continuation.yield(Array("hello\n".utf8))
            continuation.finish()
        }
        try await archiver.append(
            contentsOf: content, pathInArchive: "s.txt", permissions: 0o644,
            modificationTime: Timestamp(seconds: 1_700_000_000, nanoseconds: 0))
        _ = try await archiver.finish()
        let written = try RawFileSystem.contents(ofFile: Array(output.utf8))
        let vector = try Self.vector()
        #expect(written.count == vector.count, "\(written.count) bytes written, the vector has \(vector.count)")
        if let first = zip(written, vector).enumerated().first(where: { $0.element.0 != $0.element.1 }) {
            Issue.record("the writer differs from Spec/vectors/v2.hex first at offset \(first.offset): Spec and code disagree")
        }
    }
}
