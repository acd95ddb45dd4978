import Cairn
import Foundation
import Glibc

/// A real, file-backed S3 server for the tests: `rclone serve s3` on 127.0.0.1, with fixed test
/// credentials, serving a fresh temporary directory in which each bucket is a subdirectory.
///
/// What this server does and does not do (measured; see the S3 probe note): SigV4 with the
/// `x-amz-content-sha256` header required; multipart uploads kept **in memory only** (a
/// ``restart()`` loses every upload in progress: `404 NoSuchUpload`); parts of any size, sent in
/// order; `If-None-Match` and `If-Range` ignored; a ranged GET answered `200` with the right
/// bytes and a `Content-Range`; no object at the key until `CompleteMultipartUpload`.
///
/// The server runs under a small Python supervisor (the test process's child) that starts rclone
/// with `PR_SET_PDEATHSIG` and ends it when the test process is gone, so a crashed or killed test
/// run leaves no server behind.
///
/// - Important: Call ``stop()`` when done (also run by `deinit`, as a safety net).
package final class RcloneS3Server: S3TestServer {
    /// How requests name the bucket.
    package enum Addressing: Sendable, Equatable {
        /// `http://127.0.0.1:PORT/BUCKET/KEY` (rclone's default, `--force-path-style`).
        case pathStyle
        /// `http://BUCKET.localhost:PORT/KEY` (`--force-path-style=false`; path-style requests are
        /// then refused). libcurl resolves `*.localhost` to the loopback address itself.
        case virtualHosted
    }

    /// The access key id the server accepts.
    package let accessKeyID = RcloneS3Server.testAccessKeyID
    /// The secret access key of ``accessKeyID``.
    package let secretAccessKey = RcloneS3Server.testSecretAccessKey
    private static let testAccessKeyID = "CAIRNTESTKEY"
    private static let testSecretAccessKey = "cairn-test-secret"
    /// The region to sign for (rclone accepts any; this is the one the tests use).
    package let region = "us-east-1"
    /// The buckets created at start (directories under ``root``).
    package let buckets: [String]
    /// How the server expects the bucket to be named.
    package let addressing: Addressing
    /// The port the server listens on (127.0.0.1); the same after ``restart()``.
    package let port: UInt16
    /// The directory served: bucket `B`'s object `K` is the file `root/B/K`.
    package var root: String { scratch.appending("root") }
    /// The rclone executable in use.
    package let executable: String

    private let scratch: TemporaryDirectory
    private var process: Process?
    private var stopped = false

    /// `http://127.0.0.1:PORT` for path-style, `http://localhost:PORT` for virtual-hosted
    /// addressing (no trailing slash): what `--s3-endpoint` and `AWS_ENDPOINT_URL` take.
    package var endpoint: String {
        switch addressing {
        case .pathStyle: "http://127.0.0.1:\(port)"
        case .virtualHosted: "http://localhost:\(port)"
        }
    }

    /// Whether the server process is running now (false after ``halt()`` or ``stop()``).
    package var isRunning: Bool { process?.isRunning ?? false }

    /// The process id of the supervisor that runs rclone (nil when not running): a test that
    /// kills it (SIGKILL) sees rclone end with it.
    package var supervisorProcessIdentifier: pid_t? { process.map(\.processIdentifier) }

    /// Starts the server with `buckets` created (empty) and returns once it accepts connections.
    ///
    /// The executable is `$CAIRN_RCLONE` when set, else `.build/tools/venv/bin/rclone` in the
    /// package (what `make s3-tools` installs), else `rclone` on `PATH`.
    ///
    /// - Parameters:
    ///   - buckets: bucket names (each a single path component).
    ///   - addressing: path-style (default) or virtual-hosted bucket names.
    /// - Throws: ``TestServerError`` when rclone is not found (saying to run `make s3-tools`), or
    ///   when it does not start (with what it logged).
    package init(buckets: [String] = ["cairn"], addressing: Addressing = .pathStyle) throws {
        executable = try Self.findExecutable(
            environment: ProcessInfo.processInfo.environment, packageRoot: SupervisedServer.packageRoot)
        self.buckets = buckets
        self.addressing = addressing
        let scratch = try TemporaryDirectory(prefix: "cairn-s3")
        self.scratch = scratch
        do {
            for bucket in buckets {
                guard !bucket.isEmpty, !bucket.contains("/"), bucket != ".", bucket != ".." else {
                    throw TestServerError("not a bucket name: '\(bucket)'")
                }
                try FileManager.default.createDirectory(
                    atPath: scratch.appending("root/" + bucket), withIntermediateDirectories: true)
            }
            try FileManager.default.createDirectory(atPath: scratch.appending("root"), withIntermediateDirectories: true)
            // An empty configuration of its own: rclone neither reads nor writes ~/.config/rclone.
            _ = FileManager.default.createFile(atPath: scratch.appending("rclone.conf"), contents: Data())
        } catch {
            scratch.remove()
            throw error
        }
        var lastLog = ""
        for _ in 0..<5 {
            let port: UInt16
            do {
                port = try Loopback.freePort()
            } catch {
                scratch.remove()
                throw error
            }
            if let process = try? Self.launch(
                port: port, executable: executable, scratch: scratch, addressing: addressing,
                authKey: "\(Self.testAccessKeyID),\(Self.testSecretAccessKey)")
            {
                self.port = port
                self.process = process
                return
            }
            lastLog = (try? String(contentsOfFile: scratch.appending("rclone.log"), encoding: .utf8)) ?? ""
        }
        scratch.remove()
        throw TestServerError("rclone serve s3 (\(executable)) did not start on 127.0.0.1; it said:\n\(lastLog)")
    }

    deinit { stop() }

    /// The URL of `key` in `bucket` (percent-encoding is the caller's: keys in tests are plain),
    /// in the server's addressing style.
    package func url(bucket: String, key: String) -> String {
        switch addressing {
        case .pathStyle: "http://127.0.0.1:\(port)/\(bucket)/\(key)"
        case .virtualHosted: "http://\(bucket).localhost:\(port)/\(key)"
        }
    }

    /// The file that holds `key` of `bucket` once it exists (`root/bucket/key`).
    package func objectPath(bucket: String = "cairn", key: String) -> String {
        root + "/" + bucket + "/" + key
    }

    /// What rclone has logged so far (its standard error, all runs).
    package var log: String {
        (try? String(contentsOfFile: scratch.appending("rclone.log"), encoding: .utf8)) ?? ""
    }

    /// Ends the server process (SIGKILL) and waits until its port refuses connections, keeping
    /// ``root``: a server that went away. ``restart()`` brings it back. Does nothing when it is
    /// not running.
    package func halt() {
        guard let process else { return }
        self.process = nil
        // SIGTERM reaches the supervisor's handler (it unblocks it), which SIGKILLs rclone and
        // waits for it; a supervisor that does not end in time is killed, and rclone with it
        // (PR_SET_PDEATHSIG).
        process.stop(with: SIGTERM, timeout: 5)
        try? Await.until("127.0.0.1:\(port) refuses connections once rclone was killed") { !Loopback.accepts(port: port) }
    }

    /// Starts the server again on the same port and root (after ``halt()``; a running server is
    /// halted first). Multipart uploads in progress before are gone (rclone keeps them in memory);
    /// objects stay.
    ///
    /// - Throws: ``TestServerError`` when it does not start again (the port was taken meanwhile,
    ///   say), with what it logged; or after ``stop()``.
    package func restart() throws {
        guard !stopped else { throw TestServerError("the S3 server was stopped; it cannot restart") }
        halt()
        let deadline = Date().addingTimeInterval(Await.safetyBound)
        while true {
            if let process = try? Self.launch(
                port: port, executable: executable, scratch: scratch, addressing: addressing,
                authKey: "\(accessKeyID),\(secretAccessKey)")
            {
                self.process = process
                return
            }
            // The port may still be in use for a moment after the old server ended.
            guard Date() < deadline else {
                throw TestServerError("rclone serve s3 did not restart on 127.0.0.1:\(port); it said:\n\(log)")
            }
            usleep(100_000)
        }
    }

    /// Stops the server, waits until its port is closed, and removes ``root`` and the rest of its
    /// scratch directory. Calling it again does nothing.
    package func stop() {
        guard !stopped else { return }
        stopped = true
        halt()
        scratch.remove()
    }

    // MARK: - Starting

    /// Starts rclone on `port` under its supervisor; returns once the port accepts connections.
    /// - Throws: ``TestServerError`` when it does not (the process is ended).
    private static func launch(
        port: UInt16, executable: String, scratch: TemporaryDirectory, addressing: Addressing, authKey: String
    ) throws -> Process {
        try SupervisedServer.launch(
            [
                executable, "serve", "s3",
                "--addr", "127.0.0.1:\(port)",
                "--auth-key", authKey,
                "--config", scratch.appending("rclone.conf"),
                "--cache-dir", scratch.appending("cache"),
                // No VFS cache: an answered PUT or Complete is on disk, and a read sees it at once.
                "--vfs-cache-mode", "off",
                // No directory cache: files a test writes or removes under root are seen at once.
                "--dir-cache-time", "0s", "--poll-interval", "0",
                "--force-path-style=\(addressing == .pathStyle)",
                scratch.appending("root"),
            ], port: port, log: scratch.appending("rclone.log"))
    }

    /// The rclone to run: `CAIRN_RCLONE` of `environment` when set, else
    /// `packageRoot/.build/tools/venv/bin/rclone`, else `rclone` in `PATH` of `environment`.
    ///
    /// - Throws: ``TestServerError`` when `CAIRN_RCLONE` names no executable file, or when none
    ///   is found (saying to run `make s3-tools`).
    package static func findExecutable(environment: [String: String], packageRoot: URL) throws -> String {
        try SupervisedServer.findExecutable(
            "rclone", variable: "CAIRN_RCLONE", environment: environment, packageRoot: packageRoot)
    }
}

/// Starting a test server (rclone, moto) as a grandchild that never outlives the test process.
enum SupervisedServer {
    /// The package's root directory (from this file's path: Tests/CairnTestSupport/...).
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The executable `name`: `environment[variable]` when set, else
    /// `packageRoot/.build/tools/venv/bin/name` (what `make s3-tools` installs), else `name` in
    /// `PATH` of `environment`.
    ///
    /// - Throws: ``TestServerError`` when `variable` names no executable file, or when none is
    ///   found (saying to run `make s3-tools`).
    static func findExecutable(
        _ name: String, variable: String, environment: [String: String], packageRoot: URL
    ) throws -> String {
        if let chosen = environment[variable], !chosen.isEmpty {
            guard FileManager.default.isExecutableFile(atPath: chosen) else {
                throw TestServerError("\(variable) is \(chosen), which is not an executable file")
            }
            return chosen
        }
        let installed = packageRoot.appendingPathComponent(".build/tools/venv/bin/" + name).path
        if FileManager.default.isExecutableFile(atPath: installed) { return installed }
        for directory in (environment["PATH"] ?? "").split(separator: ":") {
            let candidate = String(directory) + "/" + name
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw TestServerError(
            "\(name) is not installed (looked at $\(variable), \(installed) and PATH): run `make s3-tools` (`make deps` and `make test` do) in \(packageRoot.path)"
        )
    }

    /// Runs `command` under the supervisor, its output appended to `log`, and returns once
    /// 127.0.0.1:`port` accepts connections (within `timeout` seconds).
    ///
    /// - Returns: the supervisor's process: SIGTERM ends the server and then the supervisor;
    ///   SIGKILL ends the supervisor and, through PR_SET_PDEATHSIG, the server.
    /// - Throws: ``TestServerError`` when it does not start (the process is ended).
    static func launch(_ command: [String], port: UInt16, log: String, timeout: Double = Await.safetyBound) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: FaultProxy.python)
        process.arguments = ["-c", supervisor] + command
        process.standardInput = FileHandle.nullDevice
        if !FileManager.default.fileExists(atPath: log) {
            _ = FileManager.default.createFile(atPath: log, contents: nil)
        }
        let logHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        defer { try? logHandle.close() }
        logHandle.seekToEndOfFile()
        process.standardOutput = logHandle
        process.standardError = logHandle
        try process.run()
        guard Loopback.waitUntilAccepting(port: port, timeout: timeout, stillRunning: { process.isRunning }) else {
            process.stop(with: SIGKILL)
            throw TestServerError("\(command[0]) did not accept connections on 127.0.0.1:\(port)")
        }
        return process
    }

    /// The supervisor, run as `python3 -c SUPERVISOR COMMAND...`: starts the command with
    /// PR_SET_PDEATHSIG (SIGKILL when the supervisor dies) and an empty signal mask, ends it on
    /// SIGTERM, and ends it and itself when the test process (its parent) is gone or the command
    /// exits.
    static let supervisor = """
        import ctypes, os, signal, subprocess, sys, time
        parent = os.getppid()
        libc = ctypes.CDLL(None, use_errno=True)
        def prepare():
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
        child = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, preexec_fn=prepare)
        def end(*_):
            child.kill()
            child.wait()
            os._exit(0)
        signal.signal(signal.SIGTERM, end)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])
        while True:
            if child.poll() is not None:
                os._exit(1)
            if os.getppid() != parent:
                end()
            time.sleep(0.1)
        """
}

/// One answer to a request signed by
/// ``S3TestServer/request(_:_:body:range:headers:accessKeyID:secretAccessKey:timeout:)``.
package struct S3Response: Sendable {
    /// The final HTTP status (after any `100 Continue`); 0 when no response head arrived.
    package var status: Int
    /// The final response's header fields in order, names lower-cased.
    package var headers: [(name: String, value: String)]
    /// The body as received.
    package var body: [UInt8]
    /// curl's exit status: 0 when the transfer completed, else curl's code (18: the body ended
    /// early, 52: no answer, 56: the connection was reset...).
    package var curlStatus: Int32
    /// What curl wrote on standard error.
    package var curlError: String

    /// The value of the first header field named `name` (case-insensitive), if any.
    package func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.name == wanted }?.value
    }

    /// The body as UTF-8 text (XML for S3 errors and listings).
    package var text: String { String(decoding: body, as: UTF8.self) }

    /// The text of the first `<element>` of an XML body, entities decoded, e.g. `Code`.
    package func xmlValue(_ element: String) -> String? { xmlValues(element).first }

    /// The texts of every `<element>` of an XML body in order, with the entities S3 servers
    /// write decoded (rclone writes an ETag's quotes as `&#34;`): e.g. `ETag` of ListParts.
    package func xmlValues(_ element: String) -> [String] {
        var values: [String] = []
        var rest = text[...]
        while let open = rest.range(of: "<\(element)>"),
            let close = rest.range(of: "</\(element)>", range: open.upperBound..<rest.endIndex)
        {
            var value = String(rest[open.upperBound..<close.lowerBound])
            for (entity, character) in [
                ("&#34;", "\""), ("&quot;", "\""), ("&#39;", "'"), ("&apos;", "'"), ("&lt;", "<"), ("&gt;", ">"),
                ("&amp;", "&"),
            ] {
                value = value.replacingOccurrences(of: entity, with: character)
            }
            values.append(value)
            rest = rest[close.upperBound...]
        }
        return values
    }
}

/// An S3 server for the tests (``RcloneS3Server``, ``MotoS3Server``): its credentials and
/// endpoint, from which the environment of a CLI child and curl-signed requests follow.
package protocol S3TestServer: AnyObject {
    /// The access key id the server accepts.
    var accessKeyID: String { get }
    /// The secret access key of ``accessKeyID``.
    var secretAccessKey: String { get }
    /// The region to sign for.
    var region: String { get }
    /// `http://HOST:PORT`, no trailing slash: what `--s3-endpoint` and `AWS_ENDPOINT_URL` take.
    var endpoint: String { get }
}

extension S3TestServer {
    /// The variables a CLI child process reads its S3 settings from: `AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_REGION` and `AWS_ENDPOINT_URL` (``endpoint``). A caller
    /// merging this into its own environment should also drop any `AWS_SESSION_TOKEN`,
    /// `AWS_PROFILE` or `AWS_DEFAULT_REGION` it inherited.
    package var environment: [String: String] {
        [
            "AWS_ACCESS_KEY_ID": accessKeyID,
            "AWS_SECRET_ACCESS_KEY": secretAccessKey,
            "AWS_REGION": region,
            "AWS_ENDPOINT_URL": endpoint,
        ]
    }

    /// Sends one request signed with AWS SigV4 by curl (`--aws-sigv4`), with this server's
    /// credentials unless others are given, and waits for the answer.
    ///
    /// `url` may point at this server or at a proxy in front of it (the signature covers the
    /// `Host` the client sends). curl 7.88's signer has quirks that this works around: the query
    /// is put in canonical order and a bare key (`?uploads`) gets its `=`; `x-amz-content-sha256`
    /// (the body's SHA-256) and, with a body, `Content-Type: application/octet-stream` are sent.
    /// curl signs every field of `headers` as well; `range` is sent unsigned (curl's `-r`), as
    /// S3 clients commonly do, so a proxy may drop it (``FaultProxy/Mode/wholeObject``).
    ///
    /// - Parameters:
    ///   - method: `GET`, `HEAD`, `PUT`, `POST` or `DELETE`.
    ///   - body: the request body (sent with `Content-Length`; curl adds `Expect: 100-continue`
    ///     above 1 MiB).
    ///   - range: the `Range` field's ranges without `bytes=` (`0-9`, `-10`), unsigned.
    ///   - headers: extra header fields (`If-None-Match`...), signed.
    ///   - timeout: seconds before curl gives up (`--max-time`).
    /// - Throws: ``TestServerError`` when curl cannot be run or its output cannot be read; a
    ///   failed transfer is not thrown but reported in ``S3Response/curlStatus``.
    package func request(
        _ method: String, _ url: String, body: [UInt8]? = nil, range: String? = nil, headers: [String: String] = [:],
        accessKeyID: String? = nil, secretAccessKey: String? = nil, timeout: Double = 30
    ) throws -> S3Response {
        let work = try TemporaryDirectory(prefix: "cairn-s3-curl")
        defer { work.remove() }
        let payload = body ?? []
        var arguments = [
            "-sS", "--max-time", String(timeout),
            "--aws-sigv4", "aws:amz:\(region):s3",
            "--user", "\(accessKeyID ?? self.accessKeyID):\(secretAccessKey ?? self.secretAccessKey)",
            "-D", work.appending("head"), "-o", work.appending("body"),
            "-H", "x-amz-content-sha256: \(try SHA256.hash(payload).hexString)",
        ]
        arguments += method == "HEAD" ? ["-I"] : ["-X", method]
        if let body {
            try Data(body).write(to: URL(fileURLWithPath: work.appending("request")))
            arguments += ["--data-binary", "@" + work.appending("request"), "-H", "Content-Type: application/octet-stream"]
        }
        if let range { arguments += ["-r", range] }
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) { arguments += ["-H", "\(name): \(value)"] }
        arguments.append(Self.canonicalQueryOrder(url))
        let result = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/curl"), arguments, timeout: timeout + 10)
        let head = (try? String(contentsOfFile: work.appending("head"), encoding: .utf8)) ?? ""
        let responseBody = (try? Data(contentsOf: URL(fileURLWithPath: work.appending("body")))).map(Array.init) ?? []
        // The final head: a `100 Continue` comes first when curl sent `Expect`, and is all there
        // is when the connection closed before the answer.
        let blocks = head.replacingOccurrences(of: "\r\n", with: "\n").components(separatedBy: "\n\n")
            .filter { $0.hasPrefix("HTTP/") && !$0.hasPrefix("HTTP/1.1 1") }
        var status = 0
        var fields: [(name: String, value: String)] = []
        if let last = blocks.last {
            let lines = last.split(separator: "\n")
            status = lines.first.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                fields.append(
                    (line[..<colon].lowercased(), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
            }
        }
        return S3Response(
            status: status, headers: fields, body: responseBody, curlStatus: result.status, curlError: result.stderr)
    }

    /// `url` with its query parameters sorted and each bare key given an `=` (how SigV4
    /// canonicalises them, which curl 7.88 does not do itself).
    static func canonicalQueryOrder(_ url: String) -> String {
        guard let question = url.firstIndex(of: "?") else { return url }
        let pairs = url[url.index(after: question)...].split(separator: "&").map { field in
            let parts = field.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (key: String(parts[0]), value: parts.count > 1 ? String(parts[1]) : "")
        }
        let sorted = pairs.sorted { ($0.key.utf8.lexicographicallyPrecedes($1.key.utf8)) || ($0.key == $1.key && $0.value.utf8.lexicographicallyPrecedes($1.value.utf8)) }
        return url[..<question] + "?" + sorted.map { $0.key + "=" + $0.value }.joined(separator: "&")
    }
}
