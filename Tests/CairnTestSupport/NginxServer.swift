import Foundation
import Glibc

/// A real nginx (Debian `nginx-light`) serving a directory on 127.0.0.1, for HTTP tests.
///
/// The configuration, pid file, logs and temporary directories all live in a fresh scratch
/// directory; nginx runs in the foreground as one process (`daemon off; master_process off;`) on
/// a free port. Locations:
/// - `/`: the root directory, with ranges and ETags;
/// - `/noranges/`: the same files with `max_ranges 0` (a 200 with the whole body for a range);
/// - `/gzip/`: the same files with `gzip on` for every type (compressed only for a client that
///   sends `Accept-Encoding: gzip`);
/// - `/gzip-always/`: `gzip_static always`: for `X` it sends the file `X.gz` as it is, with
///   `Content-Encoding: gzip`, whatever the client asked;
/// - `/slow/`: the same files at ``slowRate`` (nginx `limit_rate`);
/// - `/redirect/X`: a 302 to `/X`;
/// - `/status/404`, `/status/500`: those statuses.
///
/// - Important: Call ``stop()`` when done (also run by `deinit`, as a safety net).
public final class NginxServer {
    /// One line of the access log: `$request $status $bytes_sent $body_bytes_sent`.
    public struct AccessLogEntry: Sendable, Equatable {
        /// The request line, `GET /path HTTP/1.1`.
        public var request: String
        public var status: Int
        /// Bytes sent to the client, head included.
        public var bytesSent: UInt64
        /// Body bytes sent to the client.
        public var bodyBytesSent: UInt64
        /// The request target of ``request`` (`/path`).
        public var path: String {
            let parts = request.split(separator: " ")
            return parts.count >= 2 ? String(parts[1]) : request
        }
    }

    /// The port nginx listens on (127.0.0.1).
    public let port: UInt16
    /// The TLS port (a self-signed certificate for 127.0.0.1, which no client trusts), when
    /// started with `tls: true`.
    public let tlsPort: UInt16?
    /// The directory `/` serves.
    public let root: String
    /// The `limit_rate` of `/slow/`, nginx syntax (`512k`).
    public let slowRate: String
    private let scratch: TemporaryDirectory
    private let process: Process
    private var stopped = false

    /// The nginx executable.
    public static let executable = "/usr/sbin/nginx"

    /// Starts nginx serving `root` and returns once it accepts connections.
    ///
    /// - Parameters:
    ///   - slowRate: the `limit_rate` of `/slow/` (bytes per second, nginx syntax).
    ///   - tls: also listen with TLS on ``tlsPort``, with a self-signed certificate made by the
    ///     `openssl` command line tool.
    /// - Throws: ``TestServerError`` when nginx is not installed (naming the Debian package) or does
    ///   not start (with its error log).
    public init(root: String, slowRate: String = "512k", tls: Bool = false) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.executable) else {
            throw TestServerError(
                "nginx is not installed at \(Self.executable): install Debian's nginx-light (`make deps` or `make test` does)"
            )
        }
        self.root = root
        self.slowRate = slowRate
        let scratch = try TemporaryDirectory(prefix: "cairn-nginx")
        self.scratch = scratch
        if tls {
            do {
                try Self.makeCertificate(in: scratch)
            } catch {
                scratch.remove()
                throw error
            }
        }
        var lastError = ""
        for _ in 0..<5 {
            let port = try Loopback.freePort()
            let tlsPort = tls ? try Loopback.freePort() : nil
            let config = scratch.appending("nginx.conf")
            try Self.configuration(port: port, tlsPort: tlsPort, root: root, rate: slowRate, scratch: scratch)
                .write(toFile: config, atomically: true, encoding: .utf8)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: Self.executable)
            process.arguments = ["-p", scratch.path, "-c", config, "-e", scratch.appending("error.log")]
            process.standardInput = FileHandle.nullDevice
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            if Loopback.waitUntilAccepting(port: port, stillRunning: { process.isRunning }),
                tlsPort.map({ Loopback.waitUntilAccepting(port: $0, stillRunning: { process.isRunning }) }) ?? true
            {
                self.port = port
                self.tlsPort = tlsPort
                self.process = process
                return
            }
            process.stop(with: SIGKILL)
            lastError = (try? String(contentsOfFile: scratch.appending("error.log"), encoding: .utf8)) ?? ""
        }
        scratch.remove()
        throw TestServerError("nginx did not start on 127.0.0.1; its error log:\n\(lastError)")
    }

    deinit { stop() }

    /// `http://127.0.0.1:PORT/` + `path` (without its leading slash, if any).
    public func url(_ path: String) -> String {
        "http://127.0.0.1:\(port)/" + (path.hasPrefix("/") ? String(path.dropFirst()) : path)
    }

    /// Stops nginx (SIGKILL), waits for it, and removes its scratch directory. Calling it again
    /// does nothing.
    public func stop() {
        guard !stopped else { return }
        stopped = true
        // SIGKILL: a child of the test process inherits its blocked signals (SIGTERM among them
        // under the test runner), and nginx in single-process mode does not unblock them. It
        // writes each access log line when the request ends, so nothing is lost.
        process.stop(with: SIGKILL)
        scratch.remove()
    }

    /// The access log so far, one entry per finished request, oldest first.
    public func accessLog() -> [AccessLogEntry] {
        guard let text = try? String(contentsOfFile: scratch.appending("access.log"), encoding: .utf8) else {
            return []
        }
        return text.split(separator: "\n").compactMap { line in
            // The request line has spaces: the three numbers are the last three fields.
            let fields = line.split(separator: " ")
            guard fields.count >= 4, let status = Int(fields[fields.count - 3]),
                let sent = UInt64(fields[fields.count - 2]), let body = UInt64(fields[fields.count - 1])
            else { return nil }
            return AccessLogEntry(
                request: fields.dropLast(3).joined(separator: " "), status: status, bytesSent: sent,
                bodyBytesSent: body)
        }
    }

    /// Request fields as nginx received them, one entry per finished request, oldest first
    /// (empty for a field that was not sent).
    public struct RequestFields: Sendable, Equatable {
        public var range: String
        public var ifRange: String
        public var acceptEncoding: String
        /// nginx's serial number of the connection the request came on (`$connection`).
        public var connection: Int
    }

    /// The `Range`, `If-Range` and `Accept-Encoding` fields and the connection of every finished
    /// request (a second access log), oldest first.
    public func requestFields() -> [RequestFields] {
        guard let text = try? String(contentsOfFile: scratch.appending("fields.log"), encoding: .utf8) else {
            return []
        }
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 4, let connection = Int(fields[3]) else { return nil }
            return RequestFields(range: fields[0], ifRange: fields[1], acceptEncoding: fields[2], connection: connection)
        }
    }

    /// The access log once it has at least `count` entries (nginx writes a line when it has
    /// finished a request, which can be a moment after the client saw the last byte), or what it
    /// has after `timeout` seconds (a bound against a hang).
    public func accessLog(waitingFor count: Int, timeout: Double = Await.safetyBound) -> [AccessLogEntry] {
        let deadline = Date().addingTimeInterval(timeout)
        var entries = accessLog()
        while entries.count < count, Date() < deadline {
            usleep(10_000)
            entries = accessLog()
        }
        return entries
    }

    /// `https://127.0.0.1:TLSPORT/` + `path`; nil without TLS.
    /// The self-signed certificate (PEM) of a server started with `tls: true`: a CA file that
    /// trusts it.
    public var certificatePath: String { scratch.appending("cert.pem") }

    public func tlsURL(_ path: String) -> String? {
        tlsPort.map { "https://127.0.0.1:\($0)/" + (path.hasPrefix("/") ? String(path.dropFirst()) : path) }
    }

    /// `cert.pem` and `key.pem` in `scratch`: a self-signed P-256 certificate for 127.0.0.1.
    private static func makeCertificate(in scratch: TemporaryDirectory) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", scratch.appending("key.pem"), "-out", scratch.appending("cert.pem"), "-days", "2",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
        ]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw TestServerError("cannot run /usr/bin/openssl to make a test certificate: \(error)")
        }
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw TestServerError("openssl req failed with status \(process.terminationStatus)")
        }
    }

    private static func configuration(
        port: UInt16, tlsPort: UInt16?, root: String, rate: String, scratch: TemporaryDirectory
    ) -> String {
        let tls = tlsPort.map { tlsPort in
            """
                    listen 127.0.0.1:\(tlsPort) ssl;
                    ssl_certificate \(quoted(scratch.appending("cert.pem")));
                    ssl_certificate_key \(quoted(scratch.appending("key.pem")));
            """
        } ?? ""
        let quotedRoot = quoted(root.hasSuffix("/") ? root : root + "/")
        let temporary = ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map {
            "    \($0)_temp_path \(quoted(scratch.appending("\($0)_temp")));"
        }.joined(separator: "\n")
        return """
            daemon off;
            master_process off;
            worker_processes 1;
            \(getuid() == 0 ? "user root;" : "")
            pid \(quoted(scratch.appending("nginx.pid")));
            error_log \(quoted(scratch.appending("error.log"))) info;
            events { worker_connections 256; }
            http {
                default_type application/octet-stream;
                log_format cairn '$request $status $bytes_sent $body_bytes_sent';
                access_log \(quoted(scratch.appending("access.log"))) cairn;
                log_format fields escape=none '$http_range\t$http_if_range\t$http_accept_encoding\t$connection';
                access_log \(quoted(scratch.appending("fields.log"))) fields;
            \(temporary)
                sendfile on;
                keepalive_timeout 30s;
                server {
                    listen 127.0.0.1:\(port);
            \(tls)
                    server_name localhost;
                    root \(quotedRoot);
                    etag on;
                    location / { }
                    location /noranges/ { alias \(quotedRoot); max_ranges 0; }
                    location /gzip/ { alias \(quotedRoot); gzip on; gzip_types *; gzip_min_length 0; }
                    location /gzip-always/ { alias \(quotedRoot); gzip_static always; }
                    location /slow/ { alias \(quotedRoot); limit_rate \(rate); }
                    location /redirect/ { rewrite ^/redirect(/.*)$ $1 redirect; }
                    location = /status/404 { return 404; }
                    location = /status/500 { return 500; }
                }
            }

            """
    }

    private static func quoted(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }
}
