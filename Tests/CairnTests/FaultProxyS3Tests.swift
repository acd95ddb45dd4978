import CairnTestSupport
import Foundation
import Glibc
import Testing

/// The fault proxy in front of the S3 test server (``RcloneS3Server``), with requests signed by
/// curl for the proxy's address: signatures verify upstream, request bodies (`Expect:
/// 100-continue` included) go through, and the S3 modes do what they say: `whole` (a range
/// answered with the whole object), `200range` (a 206 turned into 200), `cutrequest` (the server
/// gone mid-part).
@Suite("FaultProxy in front of S3", .serialized)
struct FaultProxyS3Tests {
    /// The server, the proxy in front of it, and seeded bytes.
    final class Setup {
        let server: RcloneS3Server
        let proxy: FaultProxy
        var generator = SeededGenerator(seed: 0x5350_524F)

        init() throws {
            server = try RcloneS3Server()
            do {
                proxy = try FaultProxy(upstreamPort: server.port)
            } catch {
                server.stop()
                throw error
            }
        }

        /// `key` in bucket `cairn` through the proxy.
        func viaProxy(_ key: String) -> String { proxy.url("cairn/" + key) }

        deinit {
            proxy.stop()
            server.stop()
        }
    }

    @Test("pass-through: a signed 2 MiB PUT (Expect: 100-continue) and a GET verify upstream; the bytes arrive whole")
    func passThrough() async throws {
        try await onDedicatedThread {
            let setup = try Setup()
            let bytes = setup.generator.bytes(2 << 20 + 17)
            let put = try setup.server.request("PUT", setup.viaProxy("big.bin"), body: bytes)
            #expect(put.status == 200, "\(put.text) \(put.curlError)")
            #expect(FileManager.default.contents(atPath: setup.server.objectPath(key: "big.bin")) == Data(bytes))
            let got = try setup.server.request("GET", setup.viaProxy("big.bin"))
            #expect(got.status == 200)
            #expect(Data(got.body) == Data(bytes))
            #expect(setup.proxy.requests.map(\.fault) == ["pass", "pass"])
            #expect(setup.proxy.requests.map(\.status) == [200, 200])
        }
    }

    @Test("whole: a range is forwarded without Range and If-Range, and the whole object comes back (no Content-Range)")
    func wholeObject() async throws {
        try await onDedicatedThread {
            let setup = try Setup()
            let bytes = setup.generator.bytes(50_000)
            #expect(try setup.server.request("PUT", setup.server.url(bucket: "cairn", key: "o"), body: bytes).status == 200)
            let ranged = try setup.server.request("GET", setup.viaProxy("o"), range: "100-199")
            #expect(Data(ranged.body) == Data(bytes[100..<200]), "without the mode the range is honoured")
            #expect(ranged.header("content-range") == "bytes 100-199/50000")

            try setup.proxy.set(.wholeObject)
            let whole = try setup.server.request("GET", setup.viaProxy("o"), range: "100-199")
            #expect(whole.status == 200, "\(whole.text)")
            #expect(Data(whole.body) == Data(bytes))
            #expect(whole.header("content-range") == nil)
            let plain = try setup.server.request("GET", setup.viaProxy("o"))
            #expect(Data(plain.body) == Data(bytes))
            #expect(setup.proxy.requests.map(\.fault) == ["pass", "whole", "pass"])

            // If-Range goes too: nginx logs what it received.
            let work = try TemporaryDirectory(prefix: "cairn-whole")
            defer { work.remove() }
            try Data(bytes).write(to: work.url(appending: "o"))
            let nginx = try NginxServer(root: work.path)
            defer { nginx.stop() }
            let proxy = try FaultProxy(upstreamPort: nginx.port, mode: .wholeObject)
            defer { proxy.stop() }
            let answer = try setup.server.request("GET", proxy.url("o"), range: "10-19", headers: ["If-Range": "\"x\""])
            #expect(answer.status == 200)
            #expect(Data(answer.body) == Data(bytes))
            let fields = nginx.requestFields()
            #expect(fields.map(\.range) == [""], "\(fields)")
            #expect(fields.map(\.ifRange) == [""], "\(fields)")
        }
    }

    @Test("200range: nginx's 206 becomes 200 with its Content-Range and the right bytes; rclone answers 200 already")
    func rangeAs200() async throws {
        try await onDedicatedThread {
            let work = try TemporaryDirectory(prefix: "cairn-200range")
            defer { work.remove() }
            var generator = SeededGenerator(seed: 0x3230_3052)
            let bytes = generator.bytes(40_000)
            try Data(bytes).write(to: work.url(appending: "o"))
            let nginx = try NginxServer(root: work.path)
            defer { nginx.stop() }
            let proxy = try FaultProxy(upstreamPort: nginx.port, mode: .rangeAs200)
            defer { proxy.stop() }
            let setup = try Setup()
            // Any signer will do for nginx; the server's curl wrapper reads the answer's head.
            let answer = try setup.server.request("GET", proxy.url("o"), range: "10-19")
            #expect(answer.status == 200)
            #expect(answer.header("content-range") == "bytes 10-19/40000")
            #expect(Data(answer.body) == Data(bytes[10..<20]))
            #expect(proxy.requests.map(\.status) == [206], "the proxy saw nginx's 206")
            #expect(proxy.requests.map(\.fault) == ["200range"])

            // rclone serve s3 answers a range with 200 and Content-Range by itself.
            #expect(try setup.server.request("PUT", setup.server.url(bucket: "cairn", key: "o"), body: bytes).status == 200)
            try setup.proxy.set(.rangeAs200)
            let s3 = try setup.server.request("GET", setup.viaProxy("o"), range: "10-19")
            #expect(s3.status == 200)
            #expect(s3.header("content-range") == "bytes 10-19/40000")
            #expect(Data(s3.body) == Data(bytes[10..<20]))
            #expect(setup.proxy.requests.map(\.fault) == ["pass"])
        }
    }

    @Test("cutrequest: a part cut after 100,000 of 300,000 bytes gets no answer and is not stored; sent again, the upload completes")
    func cutRequest() async throws {
        try await onDedicatedThread {
            let setup = try Setup()
            let part = setup.generator.bytes(300_000)
            let created = try setup.server.request("POST", setup.viaProxy("mp.bin") + "?uploads")
            let upload = try #require(created.xmlValue("UploadId"), "\(created.text)")

            try setup.proxy.set(.cutRequest(afterBodyBytes: 100_000, times: 1))
            let partURL = setup.viaProxy("mp.bin") + "?partNumber=1&uploadId=\(upload)"
            let cut = try setup.server.request("PUT", partURL, body: part)
            #expect(cut.status == 0)
            #expect(cut.curlStatus != 0, "curl saw the connection close")
            #expect(setup.proxy.requests.last?.fault == "cutrequest")
            #expect(setup.proxy.requests.last?.status == 0)
            let direct = setup.server.url(bucket: "cairn", key: "mp.bin")
            let listed = try setup.server.request("GET", direct + "?uploadId=\(upload)")
            #expect(listed.status == 200, "\(listed.text)")
            #expect(listed.xmlValue("PartNumber") == nil, "the cut part is not listed: \(listed.text)")
            #expect(try setup.server.request("HEAD", direct).status == 404)

            let again = try setup.server.request("PUT", partURL, body: part)
            #expect(again.status == 200, "\(again.text) \(again.curlError)")
            let etag = try #require(again.header("etag"))
            let complete = Array(
                "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>\(etag)</ETag></Part></CompleteMultipartUpload>".utf8)
            let completed = try setup.server.request("POST", setup.viaProxy("mp.bin") + "?uploadId=\(upload)", body: complete)
            #expect(completed.status == 200, "\(completed.text)")
            #expect(Data(try setup.server.request("GET", direct).body) == Data(part))
            #expect(setup.proxy.requests.map(\.fault) == ["pass", "cutrequest", "pass", "pass"])
        }
    }

    @Test("cutrequest on a plain PUT: no object appears at the key; a body shorter than the cut goes through (logged pass)")
    func cutPlainPut() async throws {
        try await onDedicatedThread {
            let setup = try Setup()
            let bytes = setup.generator.bytes(2 << 20)
            try setup.proxy.set(.cutRequest(afterBodyBytes: 1 << 20))
            let cut = try setup.server.request("PUT", setup.viaProxy("p.bin"), body: bytes)
            #expect(cut.status == 0)
            #expect(cut.curlStatus != 0)
            #expect(try setup.server.request("HEAD", setup.server.url(bucket: "cairn", key: "p.bin")).status == 404)
            let small = try setup.server.request("PUT", setup.viaProxy("s.bin"), body: Array(bytes[0..<1000]))
            #expect(small.status == 200, "\(small.text) \(small.curlError)")
            #expect(setup.proxy.requests.map(\.fault) == ["cutrequest", "pass"])
        }
    }
}
