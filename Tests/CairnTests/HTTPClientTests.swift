import CairnTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

import Cairn

/// A directory of seeded files served by a real nginx, for one test.
struct HTTPFixture {
    let directory: TemporaryDirectory
    let server: NginxServer
    /// `data.bin`: 1 MiB + 123 seeded bytes.
    let data: [UInt8]
    /// `text.txt`: 64 KiB of repetitive text (gzip would shrink it a lot); `text.txt.gz` beside it.
    let text: [UInt8]

    init(slowRate: String = "512k") throws {
        directory = try TemporaryDirectory(prefix: "cairn-http")
        var generator = SeededGenerator(seed: 0x4854_5450)
        data = generator.bytes(1 << 20 + 123)
        var text: [UInt8] = []
        var line = 0
        while text.count < 64 << 10 {
            text += Array("line \(line): the quick brown fox jumps over the lazy dog\n".utf8)
            line += 1
        }
        self.text = text
        let root = directory.appending("www")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try Data(data).write(to: URL(fileURLWithPath: root + "/data.bin"))
        try Data(text).write(to: URL(fileURLWithPath: root + "/text.txt"))
        // Any bytes do: the client must refuse them before reading a body byte.
        try Data(generator.bytes(4096)).write(to: URL(fileURLWithPath: root + "/text.txt.gz"))
        do {
            server = try NginxServer(root: root, slowRate: slowRate)
        } catch {
            directory.remove()
            throw error
        }
    }

    /// Replaces a served file (new content and a later mtime, so the ETag changes).
    func replace(_ name: String, with bytes: [UInt8]) throws {
        let path = directory.appending("www/" + name)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        var times = [timespec(tv_sec: 2_000_000_000, tv_nsec: 0), timespec(tv_sec: 2_000_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
    }

    func tearDown() {
        server.stop()
        directory.remove()
    }
}

/// Runs `body` with a fresh fixture and tears it down afterwards.
func withHTTPFixture<R>(slowRate: String = "512k", _ body: (HTTPFixture) throws -> R) throws -> R {
    let fixture = try HTTPFixture(slowRate: slowRate)
    defer { fixture.tearDown() }
    return try body(fixture)
}

/// Performs `request` and collects its body.
func fetch(_ client: HTTPClient, _ request: HTTPRequest) throws(CairnError) -> (head: HTTPResponseHead, body: [UInt8]) {
    var body: [UInt8] = []
    var heads = 0
    let head = try client.perform(request, onHead: { _ in heads += 1 }, onBody: { body.append(contentsOf: $0) })
    #expect(heads == 1, "onHead is called exactly once")
    return (head, body)
}

/// Runs `body`, expecting it to throw a ``CairnError``, and returns that error.
func expectCairnError(_ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> CairnError? {
    do {
        try body()
        Issue.record("expected an error", sourceLocation: sourceLocation)
        return nil
    } catch let error as CairnError {
        return error
    } catch {
        Issue.record("expected a CairnError, got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

@Suite("HTTP client (libcurl, against nginx)")
struct HTTPClientTests {
    @Test("a full GET returns the file's bytes, its length and a strong ETag")
    func fullGet() throws {
        try withHTTPFixture { fixture in
            let client = HTTPClient()
            let (head, body) = try fetch(client, HTTPRequest(url: fixture.server.url("data.bin")))
            #expect(head.status == 200)
            #expect(body == fixture.data)
            #expect(head.contentLength == UInt64(fixture.data.count))
            #expect(head.resourceLength == UInt64(fixture.data.count))
            #expect(head.contentRange == nil)
            let etag = try #require(head.etag)
            #expect(!etag.hasPrefix("W/"))
            #expect(head.strongValidator == etag)
            #expect(head.lastModified != nil)
            #expect(head.url == fixture.server.url("data.bin"))
            #expect(client.bytesReceived == UInt64(fixture.data.count))
            #expect(client.requestCount == 1)
        }
    }

    @Test(
        "a range request returns exactly those bytes with a parsed Content-Range",
        arguments: [
            HTTPByteRange.from(1000), .bounded(0, 0), .bounded(4096, 70_000), .suffix(123), .from(1 << 20 + 122),
        ])
    func ranges(range: HTTPByteRange) throws {
        try withHTTPFixture { fixture in
            let client = HTTPClient()
            let total = UInt64(fixture.data.count)
            let (head, body) = try fetch(client, HTTPRequest(url: fixture.server.url("data.bin"), range: range))
            let (first, last): (UInt64, UInt64)
            switch range {
            case .from(let start): (first, last) = (start, total - 1)
            case .bounded(let start, let end): (first, last) = (start, end)
            case .suffix(let count): (first, last) = (total - count, total - 1)
            }
            #expect(head.status == 206)
            #expect(head.contentRange == HTTPContentRange(first: first, last: last, total: total))
            #expect(head.resourceLength == total)
            #expect(body == Array(fixture.data[Int(first)...Int(last)]))
            #expect(client.bytesReceived == last - first + 1)
            // nginx sent that many body bytes, not the whole file.
            let log = fixture.server.accessLog(waitingFor: 1)
            #expect(log.map(\.bodyBytesSent) == [last - first + 1])
            #expect(log.map(\.status) == [206])
        }
    }

    @Test("If-Range with the current ETag gives 206; after the file changed it gives 200 and the new bytes")
    func ifRange() throws {
        try withHTTPFixture { fixture in
            let client = HTTPClient()
            let url = fixture.server.url("data.bin")
            let first = try fetch(client, HTTPRequest(url: url, method: .head))
            #expect(first.body.isEmpty)
            let validator = try #require(first.head.strongValidator)

            let ranged = try fetch(client, HTTPRequest(url: url, range: .from(500_000), ifRange: validator))
            #expect(ranged.head.status == 206)
            #expect(ranged.body == Array(fixture.data[500_000...]))

            var replacement = fixture.data
            replacement[0] ^= 0xFF
            replacement.append(7)
            try fixture.replace("data.bin", with: replacement)
            let stale = try fetch(client, HTTPRequest(url: url, range: .from(500_000), ifRange: validator))
            #expect(stale.head.status == 200)
            #expect(stale.head.contentRange == nil)
            #expect(stale.body == replacement)
            #expect(stale.head.resourceLength == UInt64(replacement.count))
            #expect(stale.head.strongValidator != validator)
        }
    }

    @Test("a server without range support (max_ranges 0) answers a range request with 200 and the whole body")
    func noRanges() throws {
        try withHTTPFixture { fixture in
            let (head, body) = try fetch(
                HTTPClient(), HTTPRequest(url: fixture.server.url("noranges/data.bin"), range: .from(1000)))
            #expect(head.status == 200)
            #expect(head.contentRange == nil)
            #expect(body == fixture.data)
        }
    }

    @Test("a gzip-enabled location sends identity bytes, since the client asks for identity")
    func gzipLocation() throws {
        try withHTTPFixture { fixture in
            let (head, body) = try fetch(HTTPClient(), HTTPRequest(url: fixture.server.url("gzip/text.txt")))
            #expect(head.status == 200)
            #expect(head.headers["content-encoding"] == nil)
            #expect(body == fixture.text)
            // nginx did not compress (it would send far fewer body bytes).
            #expect(fixture.server.accessLog(waitingFor: 1).map(\.bodyBytesSent) == [UInt64(fixture.text.count)])
        }
    }

    @Test("gzip bytes sent despite identity are refused with .corrupted before any body byte")
    func gzipForced() throws {
        try withHTTPFixture { fixture in
            let client = HTTPClient()
            var pieces = 0
            var heads = 0
            let url = fixture.server.url("gzip-always/text.txt")
            let error = expectCairnError {
                _ = try client.perform(HTTPRequest(url: url), onHead: { _ in heads += 1 }, onBody: { _ in pieces += 1 })
            }
            #expect(error?.code == .corrupted)
            #expect(error?.message == "the server sent gzip-encoded bytes although identity was asked")
            #expect(error?.path == url)
            #expect(pieces == 0)
            #expect(heads == 0)
            #expect(client.bytesReceived == 0)
        }
    }

    @Test("404 and 500 throw .httpStatus naming the URL and the status; the body is not delivered")
    func errorStatuses() throws {
        try withHTTPFixture { fixture in
            let client = HTTPClient()
            for (status, reason) in [(404, "Not Found"), (500, "Internal Server Error")] {
                let url = fixture.server.url("status/\(status)")
                for method in [HTTPRequest.Method.get, .head] {
                    var pieces = 0
                    let error = expectCairnError {
                        _ = try client.perform(
                            HTTPRequest(url: url, method: method), onHead: { _ in }, onBody: { _ in pieces += 1 })
                    }
                    #expect(error?.code == .httpStatus)
                    #expect(error?.message == "the server answered \(status) \(reason)")
                    #expect(error?.path == url)
                    #expect(error?.httpStatusCode == status)
                    #expect(error.map { "\($0)" } == "\(url): the server answered \(status) \(reason)")
                    #expect(pieces == 0)
                }
            }
            let missing = expectCairnError { _ = try fetch(client, HTTPRequest(url: fixture.server.url("absent.bin"))) }
            #expect(missing?.httpStatusCode == 404)
            #expect(client.bytesReceived == 0)
        }
    }

    @Test("a redirect is followed; head.url is the final URL and the body is the target's")
    func redirect() throws {
        try withHTTPFixture { fixture in
            let client = HTTPClient()
            let (head, body) = try fetch(
                client, HTTPRequest(url: fixture.server.url("redirect/data.bin"), range: .bounded(10, 19)))
            #expect(head.status == 206)
            #expect(head.url == fixture.server.url("data.bin"))
            #expect(body == Array(fixture.data[10...19]))
            #expect(client.bytesReceived == 10)
            let log = fixture.server.accessLog(waitingFor: 2)
            #expect(log.map(\.status) == [302, 206])

            var configuration = HTTPClient.Configuration()
            configuration.maximumRedirects = 0
            let limited = expectCairnError {
                _ = try fetch(HTTPClient(configuration: configuration), HTTPRequest(url: fixture.server.url("redirect/data.bin")))
            }
            #expect(limited?.code == .limitExceeded)
        }
    }

    @Test("a refused connection is .network naming the URL")
    func connectionRefused() throws {
        let port = try Loopback.freePort()
        let url = "http://127.0.0.1:\(port)/x"
        let error = expectCairnError { _ = try fetch(HTTPClient(), HTTPRequest(url: url)) }
        #expect(error?.code == .network)
        #expect(error?.path == url)
        #expect(error?.cause != nil)
        #expect(error?.offset == nil)
    }

    @Test("a URL that is not http or https is .invalidArgument")
    func unsupportedScheme() throws {
        let error = expectCairnError { _ = try fetch(HTTPClient(), HTTPRequest(url: "file:///etc/passwd")) }
        #expect(error?.code == .invalidArgument)
    }

    @Test("an error thrown by onBody stops the transfer and is rethrown as it was")
    func onBodyError() throws {
        try withHTTPFixture { fixture in
            let client = HTTPClient()
            var received = 0
            let thrown = CairnError(.io, "disk full", path: "/tmp/x", offset: 7)
            let error = expectCairnError {
                _ = try client.perform(
                    HTTPRequest(url: fixture.server.url("data.bin")), onHead: { _ in },
                    onBody: { (piece) throws(CairnError) in
                        received += piece.count
                        if received > 100_000 { throw thrown }
                    })
            }
            #expect(error?.code == .io)
            #expect(error?.message == "disk full")
            #expect(error?.path == "/tmp/x")
            #expect(received < fixture.data.count)
            // The handle is still good for the next request.
            let again = try fetch(client, HTTPRequest(url: fixture.server.url("data.bin")))
            #expect(again.body == fixture.data)
        }
    }

    @Test("an error thrown by onHead stops the transfer before any body byte")
    func onHeadError() throws {
        try withHTTPFixture { fixture in
            var pieces = 0
            let error = expectCairnError {
                _ = try HTTPClient().perform(
                    HTTPRequest(url: fixture.server.url("data.bin")),
                    onHead: { (head) throws(CairnError) in throw CairnError(.sourceChanged, "status \(head.status)") },
                    onBody: { _ in pieces += 1 })
            }
            #expect(error?.code == .sourceChanged)
            #expect(error?.message == "status 200")
            #expect(pieces == 0)
        }
    }

    @Test("get(limit:) returns the body up to the limit and throws .limitExceeded past it")
    func getWithLimit() throws {
        try withHTTPFixture { fixture in
            let client = HTTPClient()
            let url = fixture.server.url("data.bin")
            let whole = try client.get(HTTPRequest(url: url), limit: fixture.data.count)
            #expect(whole.body == fixture.data)
            let error = expectCairnError { _ = try client.get(HTTPRequest(url: url), limit: fixture.data.count - 1) }
            #expect(error?.code == .limitExceeded)
            #expect(error?.path == url)
            let tail = try client.get(HTTPRequest(url: url, range: .suffix(5)), limit: 5)
            #expect(tail.body == Array(fixture.data.suffix(5)))
        }
    }

    @Test("4 concurrent range requests on one client each return their own bytes, over reused connections")
    func concurrentRanges() throws {
        try withHTTPFixture { fixture in
            let client = HTTPClient()
            let url = fixture.server.url("data.bin")
            let size = fixture.data.count / 4
            let results = Mutex<[Int: [UInt8]]>([:])
            let failures = Mutex<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 4) { index in
                for _ in 0..<3 {
                    let range = HTTPByteRange.bounded(UInt64(index * size), UInt64((index + 1) * size - 1))
                    do {
                        let (head, body) = try fetch(client, HTTPRequest(url: url, range: range))
                        if head.status != 206 { failures.withLock { $0.append("status \(head.status)") } }
                        results.withLock { $0[index] = body }
                    } catch {
                        failures.withLock { $0.append("\(error)") }
                    }
                }
            }
            #expect(failures.withLock { $0 } == [])
            for index in 0..<4 {
                #expect(results.withLock { $0[index] } == Array(fixture.data[index * size..<(index + 1) * size]))
            }
            #expect(client.requestCount == 12)
            #expect(client.bytesReceived == UInt64(12 * size))
            #expect(fixture.server.accessLog(waitingFor: 12).count == 12)
        }
    }
}

@Suite("HTTP messages")
struct HTTPMessageTests {
    @Test(
        "Content-Range is parsed strictly",
        arguments: [
            ("bytes 0-99/100", HTTPContentRange(first: 0, last: 99, total: 100)),
            ("bytes 5-5/*", HTTPContentRange(first: 5, last: 5, total: nil)),
            ("  bytes 1-2/3 ", HTTPContentRange(first: 1, last: 2, total: 3)),
            ("bytes 0-100/100", nil), ("bytes 9-8/100", nil), ("bytes */100", nil), ("bytes -1-5/10", nil),
            ("bytes +1-5/10", nil), ("bytes 1-5/10x", nil), ("bytes 1 -5/10", nil), ("items 1-5/10", nil),
            ("bytes 1-5", nil), ("bytes 0-1/99999999999999999999", nil), ("", nil),
        ] as [(String, HTTPContentRange?)])
    func contentRange(text: String, expected: HTTPContentRange?) {
        #expect(HTTPContentRange(parsing: text) == expected)
    }

    @Test("the validator kept for If-Range is a strong ETag, else Last-Modified")
    func strongValidator() {
        let date = "Tue, 01 Dec 2026 10:00:00 GMT"
        #expect(HTTPResponseHead(status: 200, url: "u", headers: ["etag": "\"a\"", "last-modified": date]).strongValidator == "\"a\"")
        #expect(HTTPResponseHead(status: 200, url: "u", headers: ["etag": "W/\"a\"", "last-modified": date]).strongValidator == date)
        #expect(HTTPResponseHead(status: 200, url: "u", headers: ["etag": "W/\"a\""]).strongValidator == nil)
    }

    @Test("resourceLength is Content-Range's total for a 206 and Content-Length for a 200")
    func resourceLength() {
        let headers = ["content-length": "10", "content-range": "bytes 90-99/100"]
        #expect(HTTPResponseHead(status: 206, url: "u", headers: headers).resourceLength == 100)
        #expect(HTTPResponseHead(status: 200, url: "u", headers: headers).resourceLength == 10)
        #expect(HTTPResponseHead(status: 200, url: "u", headers: ["content-length": "1e3"]).contentLength == nil)
        #expect(HTTPResponseHead(status: 304, url: "u", headers: headers).resourceLength == nil)
    }
}

@Suite("Retry policy")
struct RetryPolicyTests {
    static func policy() -> RetryPolicy {
        var policy = RetryPolicy(attempts: 4)
        policy.initialDelay = 0.001
        policy.maximumDelay = 0.004
        return policy
    }

    @Test("a 500 and .network are retried until the attempts are used up; onRetry sees each retry")
    func retriesTransient() {
        for failure in [
            HTTPClient.statusError(status: 500, reason: "Internal Server Error", url: "http://h/x"),
            HTTPClient.statusError(status: 503, reason: "", url: "http://h/x"),
            CairnError(.network, "the connection was cut", path: "http://h/x"),
        ] {
            var calls = 0
            var retries: [Int] = []
            let error = expectCairnError {
                _ = try Self.policy().run({ () throws(CairnError) -> Int in
                    calls += 1
                    throw failure
                }, onRetry: { _, retry in retries.append(retry) })
            }
            #expect(calls == 4)
            #expect(retries == [1, 2, 3])
            #expect(error?.code == failure.code)
        }
    }

    @Test("a transient failure followed by success returns the result")
    func succeedsAfterRetry() throws {
        var calls = 0
        let value = try Self.policy().run { () throws(CairnError) -> Int in
            calls += 1
            if calls < 3 { throw CairnError(.network, "timed out") }
            return 42
        }
        #expect(value == 42)
        #expect(calls == 3)
    }

    @Test("a 404 and other errors are not retried")
    func doesNotRetryPermanent() {
        for failure in [
            HTTPClient.statusError(status: 404, reason: "Not Found", url: "http://h/x"),
            CairnError(.corrupted, "gzip"), CairnError(.io, "disk full"),
        ] {
            var calls = 0
            _ = expectCairnError {
                _ = try Self.policy().run { () throws(CairnError) -> Int in
                    calls += 1
                    throw failure
                }
            }
            #expect(calls == 1)
            #expect(!RetryPolicy.isTransient(failure))
        }
    }

    @Test("a 500 from nginx is retried through the client; a 404 is not")
    func retriesRealStatuses() throws {
        try withHTTPFixture { fixture in
            let client = HTTPClient()
            for (path, expectedCalls) in [("status/500", 4), ("status/404", 1)] {
                var calls = 0
                _ = expectCairnError {
                    _ = try Self.policy().run { () throws(CairnError) in
                        calls += 1
                        return try fetch(client, HTTPRequest(url: fixture.server.url(path)))
                    }
                }
                #expect(calls == expectedCalls, "\(path)")
            }
        }
    }

    @Test("delays double from initialDelay and stop at maximumDelay")
    func delays() {
        var policy = RetryPolicy()
        #expect(policy.attempts == 4)
        #expect((1...6).map { policy.delay(beforeRetry: $0) } == [0.2, 0.4, 0.8, 1.6, 3.2, 5])
        policy.maximumDelay = 1
        #expect(policy.delay(beforeRetry: 10) == 1)
    }
}
