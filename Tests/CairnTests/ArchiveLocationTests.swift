import CairnTestSupport
import Foundation
import Testing

import Cairn

/// ``ArchiveLocation``: the one parser of where an archive is, the names it derives, and its
/// openers behind ``Extractor/init(at:)-(ArchiveLocation)``.
@Suite("Archive locations")
struct ArchiveLocationTests {
    /// An environment with credentials and an endpoint, so `s3://` text parses without a server.
    static let s3Environment = ["AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK", "AWS_ENDPOINT_URL": "http://127.0.0.1:1"]

    @Test("text: s3:// is an object, http(s):// a URL, anything else a path (any case)")
    func parsesText() throws {
        guard case .file(let path) = try ArchiveLocation(parsing: "dir/a.cairn", environment: [:]) else {
            Issue.record("a path is a file")
            return
        }
        #expect(path == "dir/a.cairn")
        for text in ["http://h/a.cairn", "HTTPS://h:8443/x/a.cairn?v=1"] {
            guard case .http(let url) = try ArchiveLocation(parsing: text, environment: [:]) else {
                Issue.record("\(text) is a URL")
                continue
            }
            #expect(url.absoluteString == text)
        }
        guard case .object(let object, let configuration) = try ArchiveLocation(parsing: "S3://bucket/k/a.cairn", environment: Self.s3Environment)
        else {
            Issue.record("s3:// is an object")
            return
        }
        #expect(object.bucket == "bucket" && object.key == "k/a.cairn")
        #expect(configuration.endpoint == "http://127.0.0.1:1")
        // The endpoint given wins over AWS_ENDPOINT_URL.
        let given = try ArchiveLocation(parsing: "s3://bucket/k", s3Endpoint: "http://127.0.0.1:2/", environment: Self.s3Environment)
        guard case .object(_, let chosen) = given else { return }
        #expect(chosen.endpoint == "http://127.0.0.1:2")
    }

    @Test("text: a malformed object or missing credentials are refused as before, naming the text or the variable")
    func refusesText() throws {
        let malformed = #expect(throws: CairnError.self) { try ArchiveLocation(parsing: "s3://bucket", environment: Self.s3Environment) }
        #expect(malformed?.code == .invalidArgument && malformed?.path == "s3://bucket")
        #expect(malformed?.message == "an s3:// location needs a key after the bucket (s3://BUCKET/KEY)")
        let bare = #expect(throws: CairnError.self) { try ArchiveLocation(parsing: "s3://bucket/k", environment: [:]) }
        #expect(bare?.code == .invalidArgument)
        #expect(bare?.description.contains("AWS_ACCESS_KEY_ID") == true, "\(String(describing: bare))")
        // The location is checked before the credentials, as the tool always did.
        let both = #expect(throws: CairnError.self) { try ArchiveLocation(parsing: "s3://B/k", environment: [:]) }
        #expect(both?.description.contains("bucket name") == true, "\(String(describing: both))")
    }

    @Test("text: an http(s) operand is taken as typed; one libcurl cannot parse is refused with the transfer's own message")
    func httpTextAsTyped() throws {
        // A space (typed, or trailing from a copy), an unclosed IPv6 host, a bad escape: refused as
        // the HTTP client refuses them, never quietly percent-encoded into another resource.
        for text in ["http://h/sp ace.cairn", "http://h/a.cairn ", "http://[::1", "http://exa mple.com/x", "http://%zz/x"] {
            let error = #expect(throws: CairnError.self) { try ArchiveLocation(parsing: text, environment: [:]) }
            #expect(error?.code == .invalidArgument && error?.path == text, "\(text)")
            #expect(error?.message == "not a URL the HTTP client can fetch", "\(text)")
            #expect(error?.cause == "URL using bad/illegal format or missing URL", "\(text)")
        }
        // An escape typed stays as typed; only non-ASCII characters are percent-encoded.
        guard case .http(let typed) = try ArchiveLocation(parsing: "http://h/a%20b.cairn", environment: [:]),
            case .http(let international) = try ArchiveLocation(parsing: "http://h/ü.cairn", environment: [:])
        else {
            Issue.record("http text is a URL")
            return
        }
        #expect(typed.absoluteString == "http://h/a%20b.cairn")
        #expect(international.absoluteString == "http://h/%C3%BC.cairn")
        // A URL without a scheme names a file by its decoded path.
        let relative = try #require(URL(string: "my file.cairn"))
        #expect(try ArchiveLocation(relative, environment: [:]).description == "my file.cairn")
    }

    @Test("URL: file:, http(s): and s3: (its escapes decoded); another scheme is refused naming the URL")
    func parsesURL() throws {
        guard case .file(let path) = try ArchiveLocation(URL(filePath: "/tmp/a b.cairn"), environment: [:]) else {
            Issue.record("a file: URL is a file")
            return
        }
        #expect(path == "/tmp/a b.cairn")
        let https = try #require(URL(string: "https://h/a.cairn"))
        guard case .http(let url) = try ArchiveLocation(https, environment: [:]) else {
            Issue.record("https: is a URL")
            return
        }
        #expect(url == https)
        let object = try ArchiveLocation(try #require(URL(string: "s3://bucket/a%20b.cairn")), environment: Self.s3Environment)
        #expect(object.description == "s3://bucket/a b.cairn")
        let ftp = try #require(URL(string: "ftp://h/a.cairn"))
        let error = #expect(throws: CairnError.self) { try ArchiveLocation(ftp, environment: [:]) }
        #expect(error?.code == .invalidArgument && error?.path == ftp.absoluteString)
    }

    @Test("a path: .file(path:) and a file: URL name the same location")
    func parsesPath() throws {
        let byCase = ArchiveLocation.file(path: "/srv/a.cairn")
        let byURL = try ArchiveLocation(URL(filePath: "/srv/a.cairn"))
        #expect(byCase.description == byURL.description)
        #expect(byCase.kind == .file && byURL.kind == .file)
    }

    @Test("derived names: the partial file, a fetch's state and set-aside seed, an upload's state")
    func derivedNames() throws {
        #expect(ArchiveLocation.partialPath(of: "/d/a.cairn") == "/d/a.cairn.partial")
        #expect(ArchiveLocation.partialPath(of: Array("/d/\u{FF}.cairn".utf8)) == Array("/d/\u{FF}.cairn.partial".utf8))
        #expect(ArchiveLocation.fetchStatePath(of: "/d/a.cairn") == "/d/a.cairn.partial.fetch")
        #expect(ArchiveLocation.setAsidePath(of: "/d/a.cairn") == "/d/a.cairn.partial.seed")
        let work = try TemporaryDirectory(prefix: "cairn-location")
        defer { work.remove() }
        let object = try S3Location(parsing: "s3://bucket/exports/app.cairn")
        let state = try ArchiveLocation.uploadStatePath(of: object, endpoint: "http://127.0.0.1:1", environment: ["XDG_STATE_HOME": work.path])
        #expect(state.hasPrefix(work.path + "/cairn/uploads/"))
        #expect(state.hasSuffix("-app.cairn.partial.upload"))
        // The staging directory: beside a missing destination, inside an existing one.
        #expect(StagingLocation.path(for: Array((work.path + "/new").utf8)) == Array((work.path + "/.new.cairn-staging").utf8))
        #expect(StagingLocation.path(for: Array((work.path + "/").utf8)) == Array((work.path + "/.cairn-staging").utf8))
    }

    @Test("an http location is refused as an archive's destination, naming the URL")
    func httpIsNoSink() async throws {
        let location = try ArchiveLocation(parsing: "http://127.0.0.1:9/a.cairn")
        let error = try await #require(throws: CairnError.self) { _ = try await Archiver(writingTo: location) }
        #expect(error.code == .invalidArgument)
        #expect(error.path == "http://127.0.0.1:9/a.cairn")
        #expect(throws: CairnError.self) { try FileSink(writingTo: location) }
    }

    @Test("the classification is the tool's: an operand is remote for `cairn verify --partial` exactly when kind(of:) says so")
    func classificationIsTheToolsOne() throws {
        let cases = ["a.cairn", "./s3:/x", "s3://b/k", "S3://b/k", "http://h/a", "HTTP://h/a", "https://h/a", "httpx://h/a", "s3:/b/k"]
        for text in cases {
            let kind = ArchiveLocation.kind(of: text)
            let result = try FetchCLI.run(["verify", "--partial", text])
            let refusedAsRemote = result.stderr.contains("--partial reads a local copy")
            #expect(refusedAsRemote == (kind != .file), "\(text): \(kind), \(result.stderr)")
            #expect(result.status == (refusedAsRemote ? 2 : 1), "\(text): \(result.stderr)")
        }
    }

    @Test("Extractor(at:) opens each kind: a file, an http URL (nginx) and an object (rclone serve s3)")
    func opensEachKind() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (_, path) = try await PublicAPITests.archive(PublicAPITests.tree(), in: directory)
        let local = try await Extractor(at: .file(path: path))
        defer { local.close() }

        let www = directory.appending("www")
        try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: path, toPath: www + "/a.cairn")
        let nginx = try NginxServer(root: www)
        defer { nginx.stop() }
        let served = try await Extractor(at: ArchiveLocation(parsing: nginx.url("a.cairn")))
        defer { served.close() }
        #expect(served.entries == local.entries)

        let rclone = try RcloneS3Server()
        defer { rclone.stop() }
        let object = rclone.objectPath(key: "exports/a.cairn")
        try FileManager.default.createDirectory(atPath: (object as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: path, toPath: object)
        var environment = rclone.environment
        environment["AWS_SESSION_TOKEN"] = ""
        let stored = try await Extractor(at: ArchiveLocation(parsing: "s3://cairn/exports/a.cairn", environment: environment))
        defer { stored.close() }
        #expect(stored.entries == local.entries)
        #expect(stored.summary == local.summary)
    }
}
