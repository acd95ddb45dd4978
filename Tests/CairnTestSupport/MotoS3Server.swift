import Cairn
import Foundation
import Glibc

/// A second S3 implementation for the tests: moto's server mode (`moto_server`, PyPI
/// `moto[s3]`), on 127.0.0.1, in memory. It is used beside ``RcloneS3Server``, never instead of
/// it, for what `rclone serve s3` does not do: `If-None-Match: *` on `CompleteMultipartUpload`
/// (moto answers 412 as AWS does; rclone ignores it), and AWS's XML shapes (root elements, quoted
/// ETags, an exclusive part-number marker) and 206 range answers.
///
/// moto does not check signatures: wrong-credential tests need ``RcloneS3Server``. It refuses a
/// part under 5 MiB that is not the last (`EntityTooSmall`), as AWS does.
package final class MotoS3Server {
    /// The port on 127.0.0.1.
    package let port: UInt16
    /// `http://127.0.0.1:PORT`.
    package var endpoint: String { "http://127.0.0.1:\(port)" }
    /// Credentials to sign with (moto takes any).
    package let accessKeyID = "CAIRNMOTOKEY"
    package let secretAccessKey = "cairn-moto-secret"
    package let region = "us-east-1"
    /// The variables a CLI child reads its S3 settings from.
    package var environment: [String: String] {
        [
            "AWS_ACCESS_KEY_ID": accessKeyID, "AWS_SECRET_ACCESS_KEY": secretAccessKey, "AWS_REGION": region,
            "AWS_ENDPOINT_URL": endpoint, "AWS_SESSION_TOKEN": "",
        ]
    }
    private let process: Process
    private var stopped = false

    /// Starts `moto_server` (from `$CAIRN_MOTO_SERVER`, else `.build/tools/venv/bin/moto_server`,
    /// which `make s3-tools` installs) and creates `buckets`.
    ///
    /// - Throws: ``TestServerError`` when moto is not installed (saying to run `make s3-tools`) or
    ///   does not start; `CairnError` when a bucket cannot be created.
    package init(buckets: [String] = ["cairn"]) throws {
        let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let executable =
            ProcessInfo.processInfo.environment["CAIRN_MOTO_SERVER"]
            ?? packageRoot.appendingPathComponent(".build/tools/venv/bin/moto_server").path
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw TestServerError("moto_server is not installed at \(executable): run `make s3-tools` (`make deps` and `make test` do)")
        }
        port = try Loopback.freePort()
        process = Process()
        process.executableURL = URL(fileURLWithPath: FaultProxy.python)
        process.arguments = ["-c", RcloneS3Server.supervisor, executable, "-H", "127.0.0.1", "-p", "\(port)"]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let running = process
        guard Loopback.waitUntilAccepting(port: port, stillRunning: { running.isRunning }) else {
            process.stop(with: SIGKILL)
            throw TestServerError("moto_server did not accept connections on 127.0.0.1:\(port)")
        }
        let configuration = try S3Configuration(
            endpoint: endpoint, region: region, credentials: S3Credentials(accessKeyID: accessKeyID, secretAccessKey: secretAccessKey))
        let store = S3Client(configuration: configuration)
        for bucket in buckets {
            _ = try store.client.get(HTTPRequest(url: endpoint + "/" + bucket, method: .put, body: []), limit: 1 << 20)
        }
    }

    deinit { stop() }

    /// Ends the server. Calling it again does nothing.
    package func stop() {
        guard !stopped else { return }
        stopped = true
        process.stop(with: SIGTERM)
    }
}
