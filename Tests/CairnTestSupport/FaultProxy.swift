import Foundation
import Glibc

/// A fault-injecting HTTP proxy in front of a test server (``NginxServer``, ``RcloneS3Server``),
/// on 127.0.0.1.
///
/// It is `fault-proxy.py` (Python 3's standard library) run as a child process. Every client
/// connection carries one request, forwarded to the upstream port with its head unchanged (the
/// `Host` field included, so a SigV4 signature made for the proxy's address verifies upstream)
/// but for `Connection: close`; the request body is relayed as it arrives, whatever its framing,
/// and an interim `100 Continue` is passed on. The request or response is changed as the mode
/// says, read afresh for each request, so a test can change it between requests.
///
/// - Important: Call ``stop()`` when done (also run by `deinit`, as a safety net).
public final class FaultProxy {
    /// What the proxy does to the responses.
    public enum Mode: Sendable, Equatable {
        /// Forwards everything as it is.
        case passThrough
        /// Sends the head and the first `afterBodyBytes` body bytes, then closes the connection;
        /// only for the first `times` requests after this mode was set when `times` is given.
        case cut(afterBodyBytes: Int, times: Int? = nil)
        /// Sends the head and the first `afterBodyBytes` body bytes, then nothing, keeping the
        /// connection open until the client closes it; only for the first `times` requests when
        /// given.
        case stall(afterBodyBytes: Int, times: Int? = nil)
        /// Moves a 206's `Content-Range` by `by` bytes (both ends; the total and the body are
        /// unchanged).
        case shiftContentRange(by: Int64)
        /// Forwards a request without its `Range` and `If-Range` fields, and the upstream's
        /// answer (a 200 with the whole object) unchanged: a store that answers a range with the
        /// whole object. A request whose SigV4 signature covers `Range` then fails upstream.
        case wholeObject
        /// Turns a 206's status line into `HTTP/1.1 200 OK`, keeping `Content-Range` and the
        /// body: a store that answers a range with 200 and the right bytes.
        case rangeAs200
        /// In a 206 whose `Content-Range` holds the archive offset `offset`, inverts the body
        /// byte at that offset (a proxy that alters bytes); only for the first `times` such
        /// answers when given.
        case flipByte(atOffset: UInt64, times: Int? = nil)
        /// Forwards the request head and the first `afterBodyBytes` bytes of the request body
        /// (as sent: chunk framing included when chunked), then closes both connections without
        /// an answer: a server that goes away mid-upload. Only for the first `times` requests
        /// when given.
        case cutRequest(afterBodyBytes: Int, times: Int? = nil)
        /// A link with latency and a per-connection cap: each request's head waits `delay`
        /// seconds before it goes upstream and the answer's head `delay` seconds before it
        /// goes back (`2 × delay` added to every request's round trip), and each connection's
        /// bodies, both ways, are paced to at most `bytesPerSecond` (nil: no cap).
        case shape(delay: Double, bytesPerSecond: Int? = nil)
    }

    /// One request as the proxy saw it.
    public struct Request: Sendable, Equatable {
        public var method: String
        public var target: String
        /// The upstream's final status; 0 when it gave none (a ``Mode/cutRequest``).
        public var status: Int
        /// "pass", "cut", "stall", "shift", "whole", "200range", "flip" or "cutrequest"; "pass" when the
        /// mode found nothing to change (no `Range` for ``Mode/wholeObject``, no 206 for
        /// ``Mode/rangeAs200``, a body shorter than the cut).
        public var fault: String

        public init(method: String, target: String, status: Int, fault: String) {
            self.method = method
            self.target = target
            self.status = status
            self.fault = fault
        }
    }

    /// The port the proxy listens on.
    public let port: UInt16
    /// The address the proxy listens on (127.0.0.1 unless given).
    public let address: String
    private let scratch: TemporaryDirectory
    private let process: Process
    private var generation = 0
    private var stopped = false

    /// The Python interpreter used.
    public static let python = "/usr/bin/python3"

    /// Starts the proxy in front of 127.0.0.1:`upstreamPort` and returns once it accepts
    /// connections.
    ///
    /// - Throws: ``TestServerError`` when Python 3 is missing or the proxy does not start.
    ///
    /// - Parameter address: the IPv4 address to listen on; another than 127.0.0.1 lets a client
    ///   in another network namespace reach it (``ShapedLink``'s host side).
    public init(upstreamPort: UInt16, mode: Mode = .passThrough, address: String = "127.0.0.1") throws {
        self.address = address
        guard FileManager.default.isExecutableFile(atPath: Self.python) else {
            throw TestServerError("the fault proxy needs Python 3 at \(Self.python)")
        }
        guard let script = Bundle.module.path(forResource: "fault-proxy", ofType: "py") else {
            throw TestServerError("fault-proxy.py is missing from CairnTestSupport's resources")
        }
        let scratch = try TemporaryDirectory(prefix: "cairn-proxy")
        self.scratch = scratch
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.python)
        process.arguments = [script, String(upstreamPort), scratch.path, address]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        let errorLog = scratch.appending("stderr")
        _ = FileManager.default.createFile(atPath: errorLog, contents: nil)
        let errorHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: errorLog))
        defer { try? errorHandle.close() }
        process.standardError = errorHandle
        self.process = process
        try Self.write(mode, generation: 0, into: scratch)
        try process.run()

        // Python starting on a loaded machine can take seconds: only its death ends the wait early.
        let deadline = Date().addingTimeInterval(Await.safetyBound)
        var found: UInt16? = nil
        while found == nil, Date() < deadline, process.isRunning {
            if let text = try? String(contentsOfFile: scratch.appending("port"), encoding: .utf8) {
                found = UInt16(text.trimmingCharacters(in: .whitespacesAndNewlines))
            } else {
                usleep(10_000)
            }
        }
        guard let found, Loopback.waitUntilAccepting(port: found, host: address, stillRunning: { process.isRunning }) else {
            process.stop(with: SIGKILL)
            let log = (try? String(contentsOfFile: errorLog, encoding: .utf8)) ?? ""
            scratch.remove()
            throw TestServerError("the fault proxy did not start; it said:\n\(log)")
        }
        port = found
    }

    deinit { stop() }

    /// `http://ADDRESS:PORT/` + `path` (without its leading slash, if any).
    public func url(_ path: String) -> String {
        "http://\(address):\(port)/" + (path.hasPrefix("/") ? String(path.dropFirst()) : path)
    }

    /// Changes the mode for the next requests (a `times` count starts again).
    public func set(_ mode: Mode) throws {
        generation += 1
        try Self.write(mode, generation: generation, into: scratch)
    }

    /// Changes the mode for the next requests whose `METHOD TARGET` the regular expression
    /// `pattern` matches (Python's `re.search`); the others pass and do not count in `times`.
    /// For ``Mode/cut``, ``Mode/stall`` and ``Mode/cutRequest``: a fault on one S3 call only,
    /// say `^POST .*uploadId=` (CompleteMultipartUpload).
    public func set(_ mode: Mode, onlyFor pattern: String) throws {
        generation += 1
        try Self.write(mode, generation: generation, into: scratch, match: pattern)
    }

    /// The requests the proxy has answered (at least begun to answer), oldest first.
    public var requests: [Request] {
        guard let text = try? String(contentsOfFile: scratch.appending("requests.log"), encoding: .utf8) else {
            return []
        }
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count == 4, let status = Int(fields[2]) else { return nil }
            return Request(method: String(fields[0]), target: String(fields[1]), status: status, fault: String(fields[3]))
        }
    }

    /// How many requests the proxy has answered.
    public var requestCount: Int { requests.count }

    /// How many answers have reached their stall (every byte before it sent) and now send
    /// nothing: the event a test waits for before it acts on a stalled transfer.
    public var stallCount: Int {
        let text = (try? String(contentsOfFile: scratch.appending("stalls.log"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").count
    }

    /// The body bytes of one finished request, as the proxy relayed them.
    public struct Transfer: Sendable, Equatable {
        public var method: String
        public var target: String
        /// The upstream's final status; 0 when it gave none.
        public var status: Int
        /// Request body bytes relayed upstream, as the client sent them (framing included).
        public var requestBodyBytes: UInt64
        /// Response body bytes relayed to the client.
        public var responseBodyBytes: UInt64
    }

    /// The requests that are over (answered, cut, or their client gone), in the order they
    /// ended, with the body bytes relayed each way. A request is listed a moment after its
    /// client has the whole answer: wait for the count to settle before summing.
    public var transfers: [Transfer] {
        guard let text = try? String(contentsOfFile: scratch.appending("bytes.log"), encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count == 5, let status = Int(fields[2]), let sent = UInt64(fields[3]), let received = UInt64(fields[4])
            else { return nil }
            return Transfer(
                method: String(fields[0]), target: String(fields[1]), status: status, requestBodyBytes: sent,
                responseBodyBytes: received)
        }
    }

    /// Stops the proxy (SIGKILL; see ``NginxServer/stop()`` for why not SIGTERM), waits for it,
    /// and removes its scratch directory. Calling it again does nothing.
    public func stop() {
        guard !stopped else { return }
        stopped = true
        process.stop(with: SIGKILL)
        scratch.remove()
    }

    private static func write(_ mode: Mode, generation: Int, into scratch: TemporaryDirectory, match: String? = nil) throws {
        var control: [String: Any] = ["generation": generation]
        if let match { control["match"] = match }
        switch mode {
        case .passThrough:
            control["mode"] = "pass"
        case .cut(let after, let times):
            control["mode"] = "cut"
            control["after"] = after
            control["times"] = times.map { $0 as Any } ?? NSNull()
        case .stall(let after, let times):
            control["mode"] = "stall"
            control["after"] = after
            control["times"] = times.map { $0 as Any } ?? NSNull()
        case .shiftContentRange(let by):
            control["mode"] = "shift"
            control["by"] = by
        case .wholeObject:
            control["mode"] = "whole"
        case .rangeAs200:
            control["mode"] = "200range"
        case .flipByte(let offset, let times):
            control["mode"] = "flip"
            control["at"] = offset
            control["times"] = times.map { $0 as Any } ?? NSNull()
        case .cutRequest(let after, let times):
            control["mode"] = "cutrequest"
            control["after"] = after
            control["times"] = times.map { $0 as Any } ?? NSNull()
        case .shape(let delay, let rate):
            control["mode"] = "shape"
            control["delay"] = delay
            control["rate"] = rate.map { $0 as Any } ?? NSNull()
        }
        let data = try JSONSerialization.data(withJSONObject: control)
        // Atomically, so the proxy never reads half a file.
        try data.write(to: URL(fileURLWithPath: scratch.appending("control.json")), options: .atomic)
    }
}
