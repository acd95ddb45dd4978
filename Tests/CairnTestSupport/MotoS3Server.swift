import Foundation
import Glibc

/// moto's S3 server (`moto_server -H 127.0.0.1 -p PORT`, PyPI `moto`) for the calls that the real
/// test server, ``RcloneS3Server``, does not implement: `If-None-Match: *` on
/// `CompleteMultipartUpload` and `PutObject` (moto answers `412 PreconditionFailed` when the key
/// exists and keeps the upload). Not a replacement for rclone: moto keeps everything in memory
/// (a stopped server loses its buckets), accepts any credentials (it checks no signature),
/// answers ranges with 206, and, like AWS, refuses a Complete whose parts other than the last are
/// under 5 MiB (`400 EntityTooSmall`).
///
/// Path-style addressing, under the same supervisor as rclone (it never outlives the test
/// process).
///
/// - Important: Call ``stop()`` when done (also run by `deinit`, as a safety net).
package final class MotoS3Server: S3TestServer {
    /// The access key id the tests sign with (moto accepts any).
    package let accessKeyID = "CAIRNTESTKEY"
    /// The secret the tests sign with (moto checks none).
    package let secretAccessKey = "cairn-test-secret"
    /// The region to sign for.
    package let region = "us-east-1"
    /// The port the server listens on (127.0.0.1).
    package let port: UInt16
    /// The buckets created at start.
    package let buckets: [String]
    /// The `moto_server` executable in use.
    package let executable: String
    private let scratch: TemporaryDirectory
    private var process: Process?

    /// `http://127.0.0.1:PORT`.
    package var endpoint: String { "http://127.0.0.1:\(port)" }

    /// Starts moto's server, creates `buckets` (empty), and returns once they exist.
    ///
    /// The executable is `$CAIRN_MOTO_SERVER` when set, else `.build/tools/venv/bin/moto_server`
    /// in the package (what `make s3-tools` installs), else `moto_server` on `PATH`.
    ///
    /// - Throws: ``TestServerError`` when moto is not found (saying to run `make s3-tools`), does
    ///   not start (with what it logged), or refuses to create a bucket.
    package init(buckets: [String] = ["cairn"]) throws {
        executable = try SupervisedServer.findExecutable(
            "moto_server", variable: "CAIRN_MOTO_SERVER", environment: ProcessInfo.processInfo.environment,
            packageRoot: SupervisedServer.packageRoot)
        self.buckets = buckets
        let scratch = try TemporaryDirectory(prefix: "cairn-moto")
        self.scratch = scratch
        let log = scratch.appending("moto.log")
        var started: (UInt16, Process)? = nil
        for _ in 0..<5 where started == nil {
            do {
                let port = try Loopback.freePort()
                started = (port, try SupervisedServer.launch([executable, "-H", "127.0.0.1", "-p", String(port)], port: port, log: log))
            } catch {
                continue
            }
        }
        guard let (port, process) = started else {
            let said = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            scratch.remove()
            throw TestServerError("moto_server (\(executable)) did not start on 127.0.0.1; it said:\n\(said)")
        }
        self.port = port
        self.process = process
        for bucket in buckets {
            let created = try request("PUT", "\(endpoint)/\(bucket)")
            guard created.status == 200 else {
                stop()
                throw TestServerError("moto did not create bucket \(bucket): \(created.status) \(created.text)")
            }
        }
    }

    deinit { stop() }

    /// `http://127.0.0.1:PORT/bucket/key`.
    package func url(bucket: String = "cairn", key: String) -> String { "\(endpoint)/\(bucket)/\(key)" }

    /// What moto has logged so far (one line per request).
    package var log: String { (try? String(contentsOfFile: scratch.appending("moto.log"), encoding: .utf8)) ?? "" }

    /// Stops the server (everything it held is gone) and waits until its port is closed. Calling
    /// it again does nothing.
    package func stop() {
        guard let process else { return }
        self.process = nil
        process.stop(with: SIGTERM, timeout: 5)
        let deadline = Date().addingTimeInterval(5)
        while Loopback.accepts(port: port), Date() < deadline { usleep(10_000) }
        scratch.remove()
    }
}
