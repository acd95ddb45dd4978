import CairnTestSupport
import Foundation
import Glibc
import Testing

/// The S3 test server (`rclone serve s3` under ``RcloneS3Server``): it starts, answers requests
/// signed with its credentials and refuses others, comes back after a halt on the same port, and
/// always goes away.
@Suite("RcloneS3Server", .serialized)
struct RcloneS3ServerTests {
    @Test("a signed PUT then GET round-trips the bytes (stored as root/bucket/key); stop closes the port and removes the root")
    func putGetStop() async throws {
        try await onDedicatedThread {
            let server = try RcloneS3Server()
            defer { server.stop() }
            var generator = SeededGenerator(seed: 0x5333)
            let bytes = generator.bytes(200_000)
            let url = server.url(bucket: "cairn", key: "dir/object.bin")
            #expect(url == "http://127.0.0.1:\(server.port)/cairn/dir/object.bin")
            let put = try server.request("PUT", url, body: bytes)
            #expect(put.status == 200, "\(put.text) \(put.curlError)")
            #expect(put.header("etag")?.hasPrefix("\"") == true)
            let got = try server.request("GET", url)
            #expect(got.status == 200)
            #expect(Data(got.body) == Data(bytes))
            #expect(FileManager.default.contents(atPath: server.objectPath(key: "dir/object.bin")) == Data(bytes))
            #expect(server.environment["AWS_ENDPOINT_URL"] == "http://127.0.0.1:\(server.port)")
            #expect(server.environment["AWS_ACCESS_KEY_ID"] == server.accessKeyID)

            let root = server.root
            #expect(Loopback.accepts(port: server.port))
            server.stop()
            #expect(!Loopback.accepts(port: server.port))
            #expect(!FileManager.default.fileExists(atPath: root))
        }
    }

    @Test("a wrong secret is 403 SignatureDoesNotMatch, a wrong key 403 InvalidAccessKeyId, a missing bucket 404 NoSuchBucket")
    func refusals() async throws {
        try await onDedicatedThread {
            let server = try RcloneS3Server(buckets: ["cairn", "other"])
            defer { server.stop() }
            let url = server.url(bucket: "cairn", key: "k")
            let wrongSecret = try server.request("PUT", url, body: [1, 2, 3], secretAccessKey: "not-the-secret")
            #expect(wrongSecret.status == 403)
            #expect(wrongSecret.xmlValue("Code") == "SignatureDoesNotMatch")
            let wrongKey = try server.request("GET", url, accessKeyID: "NOSUCHKEY")
            #expect(wrongKey.status == 403)
            #expect(wrongKey.xmlValue("Code") == "InvalidAccessKeyId")
            let missing = try server.request("PUT", server.url(bucket: "nobucket", key: "k"), body: [1])
            #expect(missing.status == 404)
            #expect(missing.xmlValue("Code") == "NoSuchBucket")
            #expect(try server.request("HEAD", server.url(bucket: "other", key: "")).status == 200)
            #expect(!FileManager.default.fileExists(atPath: server.objectPath(key: "k")))
        }
    }

    @Test("halt then restart: the same port and objects, the multipart upload in progress is gone (404 NoSuchUpload)")
    func haltAndRestart() async throws {
        try await onDedicatedThread {
            let server = try RcloneS3Server()
            defer { server.stop() }
            let url = server.url(bucket: "cairn", key: "kept")
            #expect(try server.request("PUT", url, body: Array("kept".utf8)).status == 200)
            let created = try server.request("POST", server.url(bucket: "cairn", key: "upload") + "?uploads")
            let upload = try #require(created.xmlValue("UploadId"), "\(created.text)")
            let listed = try server.request("GET", server.url(bucket: "cairn", key: "upload") + "?uploadId=\(upload)")
            #expect(listed.status == 200, "\(listed.text)")

            let port = server.port
            server.halt()
            #expect(!server.isRunning)
            #expect(!Loopback.accepts(port: port))
            try server.restart()
            #expect(server.port == port)
            #expect(Loopback.accepts(port: port))
            #expect(try server.request("GET", url).body == Array("kept".utf8))
            let lost = try server.request("GET", server.url(bucket: "cairn", key: "upload") + "?uploadId=\(upload)")
            #expect(lost.status == 404)
            #expect(lost.xmlValue("Code") == "NoSuchUpload")
        }
    }

    @Test("a multipart upload: nothing at the key until Complete; ListParts gives each part's ETag (its MD5, quoted) and size; the object is the parts in order")
    func multipart() async throws {
        try await onDedicatedThread {
            let server = try RcloneS3Server()
            defer { server.stop() }
            var generator = SeededGenerator(seed: 0x4D50)
            let parts = [generator.bytes(70_000), generator.bytes(1234)]
            let url = server.url(bucket: "cairn", key: "mp/a.cairn")
            let created = try server.request("POST", url + "?uploads")
            let upload = try #require(created.xmlValue("UploadId"), "\(created.text)")
            var etags: [String] = []
            for (index, part) in parts.enumerated() {
                let sent = try server.request("PUT", url + "?uploadId=\(upload)&partNumber=\(index + 1)", body: part)
                #expect(sent.status == 200, "\(sent.text)")
                etags.append(try #require(sent.header("etag")))
            }
            #expect(etags.allSatisfy { $0.hasPrefix("\"") && $0.hasSuffix("\"") && $0.count == 34 }, "\(etags)")
            #expect(try server.request("HEAD", url).status == 404)
            #expect(try server.request("GET", url).xmlValue("Code") == "NoSuchKey")
            let listed = try server.request("GET", url + "?uploadId=\(upload)")
            #expect(listed.text.contains("&#34;"), "rclone escapes the quotes: \(listed.text)")
            #expect(listed.xmlValues("ETag") == etags)
            #expect(listed.xmlValues("Size") == parts.map { String($0.count) })
            #expect(listed.xmlValues("PartNumber") == ["1", "2"])
            let body = "<CompleteMultipartUpload>"
                + etags.enumerated().map { "<Part><PartNumber>\($0.offset + 1)</PartNumber><ETag>\($0.element)</ETag></Part>" }
                .joined() + "</CompleteMultipartUpload>"
            let completed = try server.request("POST", url + "?uploadId=\(upload)", body: Array(body.utf8))
            #expect(completed.status == 200, "\(completed.text)")
            #expect(Data(try server.request("GET", url).body) == Data(parts[0] + parts[1]))
        }
    }

    @Test("rclone ends with its supervisor: SIGKILL to the supervisor closes the port")
    func endsWithSupervisor() async throws {
        try await onDedicatedThread {
            let server = try RcloneS3Server()
            defer { server.stop() }
            let supervisor = try #require(server.supervisorProcessIdentifier)
            #expect(kill(supervisor, SIGKILL) == 0)
            // PR_SET_PDEATHSIG kills rclone: its port closes (whenever the loaded machine gets to it).
            try Await.until("rclone's port \(server.port) closes after its supervisor was killed") {
                !Loopback.accepts(port: server.port)
            }
        }
    }

    @Test("virtual-hosted addressing: BUCKET.localhost:PORT/KEY works and the path style is then refused")
    func virtualHosted() async throws {
        try await onDedicatedThread {
            let server = try RcloneS3Server(addressing: .virtualHosted)
            defer { server.stop() }
            #expect(server.endpoint == "http://localhost:\(server.port)")
            let url = server.url(bucket: "cairn", key: "v.bin")
            #expect(url == "http://cairn.localhost:\(server.port)/v.bin")
            let put = try server.request("PUT", url, body: [9, 8, 7])
            #expect(put.status == 200, "\(put.text) \(put.curlError)")
            #expect(try server.request("GET", url).body == [9, 8, 7])
            #expect(FileManager.default.contents(atPath: server.objectPath(key: "v.bin")) == Data([9, 8, 7]))
            let pathStyle = try server.request("GET", "http://127.0.0.1:\(server.port)/cairn/v.bin")
            #expect(pathStyle.status == 404)
        }
    }

    @Test("no rclone: the error says to run make s3-tools; CAIRN_RCLONE naming no executable is an error too")
    func missingExecutable() throws {
        let empty = try TemporaryDirectory(prefix: "cairn-no-rclone")
        defer { empty.remove() }
        do {
            _ = try RcloneS3Server.findExecutable(environment: ["PATH": empty.path], packageRoot: empty.url)
            Issue.record("found an rclone in an empty directory")
        } catch {
            #expect("\(error)".contains("make s3-tools"), "\(error)")
        }
        do {
            _ = try RcloneS3Server.findExecutable(
                environment: ["CAIRN_RCLONE": empty.appending("rclone"), "PATH": "/usr/bin"], packageRoot: empty.url)
            Issue.record("accepted a CAIRN_RCLONE that does not exist")
        } catch {
            #expect("\(error)".contains("CAIRN_RCLONE"), "\(error)")
        }
        let fake = empty.appending("rclone")
        _ = FileManager.default.createFile(atPath: fake, contents: Data("#!/bin/sh\n".utf8), attributes: [.posixPermissions: 0o755])
        #expect(try RcloneS3Server.findExecutable(environment: ["PATH": "/nonexistent:" + empty.path], packageRoot: URL(fileURLWithPath: "/nonexistent")) == fake)
    }
}
