import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import Cairn

/// Remote reads keep up to `connections` coalesced range requests in flight
/// (`Spec/0001-container-format.md §13.9`, `Spec/0003-command-line.md §1.3`), and the shaped
/// link the benchmarks use really shapes.
@Suite("Parallel remote reads")
struct ParallelRemoteReadTests {
    static func cairn(_ arguments: [String]) throws -> ChildProcess.Result {
        try ChildProcess.run(ChildProcess.cairnExecutable(besideBundle: Bundle.module.bundleURL), arguments)
    }

    /// `www/NAME` of `bytes`, served by nginx.
    static func serve(_ bytes: [UInt8], named name: String, in directory: TemporaryDirectory, slowRate: String = "512k") throws -> NginxServer {
        let www = directory.appending("www")
        try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: www + "/" + name))
        return try NginxServer(root: www, slowRate: slowRate)
    }

    /// Range requests nginx answered (206) after the opening one.
    static func rangeRequests(_ server: NginxServer, expecting count: Int) -> [NginxServer.AccessLogEntry] {
        Array(server.accessLog(waitingFor: count).filter { $0.status == 206 })
    }

    @Test("§13.9: one large read becomes one request per connection, each at least 1 MiB; with one connection, one request")
    func largeReadIsSpread() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var generator = SeededGenerator(seed: 2609)
        let bytes = generator.bytes(6 << 20)
        let server = try Self.serve(bytes, named: "blob", in: directory)
        defer { server.stop() }
        for (connections, expected) in [(4, 4), (1, 1), (16, 5)] {
            let before = server.accessLog().count
            let source = try HTTPArchiveSource(url: server.url("blob"), tailSlack: 0, connections: connections)
            defer { source.close() }
            // The footer-sized opening request, then the read (the tail's bytes come from memory).
            let wanted: Range<UInt64> = 0..<(5 << 20)
            #expect(source.requests(covering: [wanted], gap: 0).count == expected)
            let read = try source.read(ranges: [wanted])
            #expect(read == [Array(bytes[0..<(5 << 20)])])
            var buffer = [UInt8](repeating: 0, count: 5 << 20)
            let got = try buffer.withUnsafeMutableBytes { try source.read(fromAbsoluteOffset: 512 << 10, into: $0) }
            #expect(got == buffer.count && buffer == Array(bytes[(512 << 10)..<((512 << 10) + (5 << 20))]))
            let log = Array(server.accessLog(waitingFor: before + 1 + 2 * expected).dropFirst(before + 1))
            #expect(log.count == 2 * expected, "\(connections) connections: \(log)")
            #expect(log.allSatisfy { $0.status == 206 && $0.bodyBytesSent >= HTTPArchiveSource.minimumSplit }, "\(log)")
            #expect(source.peakRequestsInFlight <= connections)
        }
    }

    /// 40 files of 200 KiB (incompressible): every other one selected leaves gaps wider than
    /// the coalescing gap, so each selected file is a range of its own.
    static func spreadTree() -> TreeBuilder {
        var generator = SeededGenerator(seed: 26)
        var tree = TreeBuilder()
        tree.directory("t")
        for index in 0..<40 { tree.file("t/f\(index).bin", generator.bytes(200 << 10)) }
        return tree
    }

    @Test(
        "§13.9: a remote extract of many files hands the source batches: several requests in flight, never more than connections",
        arguments: [1, 3])
    func extractKeepsRequestsInFlight(connections: Int) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = try await RemoteArchiveTests.archive(Self.spreadTree(), in: directory)
        let server = try Self.serve(try RawFileSystem.contents(ofFile: Array(path.utf8)), named: "a.cairn", in: directory)
        defer { server.stop() }
        // 50 ms before each request and each answer: requests handed over together overlap.
        let proxy = try FaultProxy(upstreamPort: server.port, mode: .shape(delay: 0.05))
        defer { proxy.stop() }
        let selection = stride(from: 0, to: 40, by: 2).map { Array("t/f\($0).bin".utf8) }
        let extractor = try await Extractor(at: .http(url: try #require(URL(string: proxy.url("a.cairn")))), remote: RemoteReadOptions(connections: connections))
        defer { extractor.close() }
        let source = try #require(extractor.reader.source as? HTTPArchiveSource)
        #expect(source.connections == connections)
        let out = directory.appending("out")
        _ = try await extractor.extract(selection: selection, to: Array(out.utf8), options: ExtractionOptions())
        for index in stride(from: 0, to: 40, by: 2) {
            let name = "t/f\(index).bin"
            let written = try RawFileSystem.contents(ofFile: Array((out + "/" + name).utf8))
            #expect(written == (try RawFileSystem.contents(ofFile: Array(directory.appending("src-a.cairn/" + name).utf8))), "\(name)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: out + "/t").count == 20)
        if connections == 1 {
            #expect(source.peakRequestsInFlight == 1)
        } else {
            #expect(source.peakRequestsInFlight > 1 && source.peakRequestsInFlight <= connections, "peak \(source.peakRequestsInFlight)")
        }
    }

    @Test("§13.9: extract URL --resume fetches what is missing with several requests in flight, never more than connections")
    func resumeKeepsRequestsInFlight() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = try await RemoteArchiveTests.archive(Self.spreadTree(), in: directory)
        let bytes = try RawFileSystem.contents(ofFile: Array(path.utf8))
        let server = try Self.serve(bytes, named: "a.cairn", in: directory)
        defer { server.stop() }
        // An extraction of everything whose input ends at 30%: the journal holds the first files.
        try RawFileSystem.writeFile(Array((server.root + "/cut.cairn").utf8), Array(bytes[0..<(bytes.count * 3 / 10)]))
        let out = directory.appending("out")
        let cut = try Self.cairn(["extract", server.url("cut.cairn"), "-C", out])
        #expect(cut.status == 1 && cut.stderr.contains("--resume"), "\(cut.stderr)")
        let proxy = try FaultProxy(upstreamPort: server.port, mode: .shape(delay: 0.05))
        defer { proxy.stop() }
        let extractor = try await Extractor(
            at: .http(url: try #require(URL(string: proxy.url("a.cairn")))), remote: RemoteReadOptions(connections: 3))
        defer { extractor.close() }
        let source = try #require(extractor.reader.source as? HTTPArchiveSource)
        var options = ExtractionOptions()
        options.resume = true
        try await extractor.extractAll(to: URL(fileURLWithPath: out), options: options)
        for index in 0..<40 {
            let name = "t/f\(index).bin"
            let written = try RawFileSystem.contents(ofFile: Array((out + "/" + name).utf8))
            #expect(written == (try RawFileSystem.contents(ofFile: Array(directory.appending("src-a.cairn/" + name).utf8))), "\(name)")
        }
        #expect(source.peakRequestsInFlight > 1 && source.peakRequestsInFlight <= 3, "peak \(source.peakRequestsInFlight)")
    }

    @Test("§1.3: extract, list and cat take --connections and --timeout, and refuse values out of range with exit 2")
    func commandLineOptions() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var generator = SeededGenerator(seed: 7)
        let server = try Self.serve(generator.bytes(64 << 10), named: "blob", in: directory)
        defer { server.stop() }
        let url = server.url("blob")
        for command in ["extract", "list", "cat"] {
            let help = try Self.cairn([command, "--help"])
            #expect(help.stdout.contains("--connections N") && help.stdout.contains("--timeout S"), "\(command): \(help.stdout)")
            for bad in [["--connections", "0"], ["--connections", "65"], ["--timeout", "0"]] {
                let result = try Self.cairn([command, url] + bad)
                #expect(result.status == 2, "\(command) \(bad): \(result.stderr)")
                #expect(result.stderr.contains(bad[0]), "\(command) \(bad): \(result.stderr)")
            }
        }
        // A good value is taken: cat of a plain file (no footer is needed to send bytes).
        let cat = try Self.cairn(["cat", url, "--connections", "2", "--timeout", "5"])
        #expect(cat.status == 0, "\(cat.stderr)")
        #expect(cat.stdoutBytes.count == 64 << 10)
    }

    @Test(
        "the shaped link shapes: 4 MiB through an 8 MB/s token bucket take more than 0.3 s",
        .enabled(if: ShapedLink.unavailableReason == nil, "needs root, ip and tc: \(ShapedLink.unavailableReason ?? "")"),
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/curl"), "needs curl"))
    func shapedLinkShapes() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var generator = SeededGenerator(seed: 8)
        let server = try Self.serve(generator.bytes(4 << 20), named: "blob", in: directory)
        defer { server.stop() }
        let link = try ShapedLink(tag: "test26", bytesPerSecond: 8_000_000)
        defer { link.stop() }
        let proxy = try FaultProxy(upstreamPort: server.port, address: link.hostAddress)
        defer { proxy.stop() }
        let (executable, arguments) = link.command("/usr/bin/curl", ["-sS", "-o", "/dev/null", "-w", "%{size_download} %{time_total}", proxy.url("blob")])
        let result = try ChildProcess.run(executable, arguments)
        #expect(result.status == 0, "\(result.stderr)")
        let fields = result.stdout.split(separator: " ")
        #expect(fields.first.flatMap { Int($0) } == 4 << 20, "\(result.stdout)")
        // 4 MiB at 8 MB/s is 0.52 s; on loopback it is milliseconds.
        let seconds = fields.last.flatMap { Double($0) } ?? 0
        #expect(seconds > 0.3, "4 MiB in \(seconds) s: the cap is missing")
        link.stop()
        let leftover = try ChildProcess.run(URL(fileURLWithPath: ShapedLink.ip), ["netns", "list"])
        #expect(!leftover.stdout.contains(link.namespace))
    }
}
