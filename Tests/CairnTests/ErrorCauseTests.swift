import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import Cairn

/// ``CairnError/underlyingCause``: a failed system call keeps its `errno`, an HTTP error its
/// status, an object store's error its `<Code>`, as values a caller switches on; relabelling an
/// error keeps them; the text of each error is what it was before the typed cause existed.
@Suite("CairnError's typed cause")
struct ErrorCauseTests {
    // MARK: errno

    @Test("the named Errno values are the C values, their description is strerror(3)'s text, and they switch")
    func errnoValues() {
        let named: [(CairnError.Errno, Int32)] = [
            (.notPermitted, EPERM), (.noSuchFileOrDirectory, ENOENT), (.interrupted, EINTR), (.ioError, EIO),
            (.badFileDescriptor, EBADF), (.noMemory, ENOMEM), (.permissionDenied, EACCES), (.resourceBusy, EBUSY),
            (.fileExists, EEXIST), (.improperLink, EXDEV), (.notDirectory, ENOTDIR), (.isDirectory, EISDIR),
            (.invalidArgument, EINVAL), (.tooManyOpenFiles, EMFILE), (.fileTooLarge, EFBIG), (.noSpace, ENOSPC),
            (.readOnlyFileSystem, EROFS), (.brokenPipe, EPIPE), (.fileNameTooLong, ENAMETOOLONG),
            (.directoryNotEmpty, ENOTEMPTY), (.tooManySymbolicLinkLevels, ELOOP), (.notSupported, EOPNOTSUPP),
            (.diskQuotaExceeded, EDQUOT),
        ]
        for (value, raw) in named {
            #expect(value.rawValue == raw)
            #expect(value == CairnError.Errno(rawValue: raw))
            #expect(value.description == String(cString: strerror(raw)))
        }
        #expect(Set(named.map(\.0)).count == named.count)
        #expect(CairnError.Errno.noSpace.description == "No space left on device")

        func words(_ value: CairnError.Errno) -> String {
            switch value {
            case .noSpace, .diskQuotaExceeded: "full"
            case .permissionDenied, .notPermitted: "refused"
            default: "other"
            }
        }
        #expect(words(CairnError.Errno(rawValue: ENOSPC)) == "full")
        #expect(words(CairnError.Errno(rawValue: EACCES)) == "refused")
        #expect(words(CairnError.Errno(rawValue: 9999)) == "other")
        #expect(CairnError.Cause.errno(.noSpace).description == "errno \(ENOSPC) (No space left on device)")
        #expect(CairnError.Cause.httpStatus(404).description == "HTTP status 404")
        #expect(CairnError.Cause.s3(code: "NoSuchKey", httpStatus: 404).description == "S3 NoSuchKey (HTTP status 404)")
    }

    @Test("opening a missing archive: .notFound with cause ENOENT, and the same text as before")
    func missingArchive() async throws {
        let directory = try TemporaryDirectory(prefix: "cairn-cause")
        defer { directory.remove() }
        let path = directory.appending("absent.cairn")
        let error = await expectCairnError { _ = try await Extractor(at: URL(filePath: path)) }
        #expect(error?.code == .notFound)
        #expect(error?.underlyingCause == .errno(.noSuchFileOrDirectory))
        switch error?.underlyingCause {
        case .errno(.noSuchFileOrDirectory)?: break
        default: Issue.record("not ENOENT: \(String(describing: error?.underlyingCause))")
        }
        // The text is byte for byte what it was (the CLI prints it).
        #expect(error?.cause == "No such file or directory")
        #expect(error.map { "\($0)" } == "\(path): cannot open: No such file or directory")
    }

    @Test("a path through a file is ENOTDIR, a link loop ELOOP, an exclusive create of an existing file EEXIST, writing a directory EISDIR")
    func systemCallFailures() async throws {
        let directory = try TemporaryDirectory(prefix: "cairn-cause")
        defer { directory.remove() }
        let file = directory.appending("file")
        #expect(FileManager.default.createFile(atPath: file, contents: Data([1, 2, 3])))
        #expect(symlink(directory.appending("loop-b"), directory.appending("loop-a")) == 0)
        #expect(symlink(directory.appending("loop-a"), directory.appending("loop-b")) == 0)

        let throughFile = await expectCairnError { _ = try await Extractor(at: URL(filePath: file + "/inside.cairn")) }
        #expect(throughFile?.code == .io)
        #expect(throughFile?.underlyingCause == .errno(.notDirectory))

        let loop = await expectCairnError { _ = try await Extractor(at: URL(filePath: directory.appending("loop-a"))) }
        #expect(loop?.underlyingCause == .errno(.tooManySymbolicLinkLevels))

        let exists = expectCairnError { _ = try FileDescriptor.open(file, flags: O_WRONLY | O_CREAT | O_EXCL) }
        #expect(exists?.code == .alreadyExists)
        #expect(exists?.underlyingCause == .errno(.fileExists))

        let isDirectory = expectCairnError { _ = try FileDescriptor.open(directory.path, flags: O_WRONLY) }
        #expect(isDirectory?.code == .io)
        #expect(isDirectory?.underlyingCause == .errno(.isDirectory))
        #expect(isDirectory?.cause == CairnError.Errno.isDirectory.description)
    }

    @Test(
        "a file without read permission is EACCES (not as root: root reads it anyway)",
        .enabled(if: geteuid() != 0, "root bypasses file permissions"))
    func permissionDenied() async throws {
        let directory = try TemporaryDirectory(prefix: "cairn-cause")
        defer { directory.remove() }
        let file = directory.appending("locked.cairn")
        #expect(FileManager.default.createFile(atPath: file, contents: Data([1, 2, 3])))
        #expect(chmod(file, 0) == 0)
        let error = await expectCairnError { _ = try await Extractor(at: URL(filePath: file)) }
        #expect(error?.code == .io)
        #expect(error?.underlyingCause == .errno(.permissionDenied))
    }

    @Test(
        "writing to a full device is ENOSPC (/dev/full, which fails every write for root too)",
        .enabled(if: FileManager.default.fileExists(atPath: "/dev/full")))
    func noSpace() throws {
        let full = try FileDescriptor.open("/dev/full", flags: O_WRONLY)
        let error = expectCairnError { try full.closeAfter { () throws(CairnError) in try full.writeAll([UInt8](repeating: 7, count: 4096)) } }
        #expect(error?.code == .io)
        #expect(error?.underlyingCause == .errno(.noSpace))
        switch error?.underlyingCause {
        case .errno(.noSpace)?, .errno(.diskQuotaExceeded)?: break
        default: Issue.record("not a full disk: \(String(describing: error?.underlyingCause))")
        }
        #expect(error?.cause == "No space left on device")
    }

    @Test("a Foundation file error keeps its errno: the directory of upload states under a file is ENOTDIR")
    func foundationErrors() throws {
        let directory = try TemporaryDirectory(prefix: "cairn-cause")
        defer { directory.remove() }
        let file = directory.appending("file")
        #expect(FileManager.default.createFile(atPath: file, contents: Data([1])))
        let error = expectCairnError {
            _ = try ArchiveLocation.uploadStatePath(
                of: try S3Location(parsing: "s3://cairn/key"), endpoint: "http://h", environment: ["XDG_STATE_HOME": file])
        }
        #expect(error?.code == .io)
        #expect(error?.underlyingCause == .errno(.notDirectory))
        #expect(CairnError.Errno(foundationError: CairnError(.io, "not Foundation's")) == nil)
        #expect(CairnError.Errno(foundationError: POSIXError(.ENOSPC)) == .noSpace)
    }

    @Test("relabelling keeps the cause: withPath, withDisplay, and a new code over an old error")
    func relabelling() {
        let original = CairnError.Errno.noSpace.error("cannot write", offset: 12)
        #expect(original.underlyingCause == .errno(.noSpace))
        #expect(original.cause == "No space left on device")
        #expect(original.withPath("/a").underlyingCause == .errno(.noSpace))
        #expect(original.withDisplay("/b").underlyingCause == .errno(.noSpace))
        var named = original
        named.message += " (in /c)"
        #expect(named.underlyingCause == .errno(.noSpace))
        // The text is unchanged by the typed cause.
        #expect("\(original.withPath("/a"))" == "/a: at offset 12: cannot write: No space left on device")
        #expect(CairnError(.io, "plain").underlyingCause == nil)
    }

    // MARK: HTTP

    @Test("an HTTP 404 from nginx: .httpStatus with cause httpStatus(404), in a GET and a HEAD, and the same text as before")
    func httpNotFound() async throws {
        try await onDedicatedThread {
            try withHTTPFixture { fixture in
                let client = HTTPClient()
                let url = fixture.server.url("absent.cairn")
                for method in [HTTPRequest.Method.get, .head] {
                    let error = expectCairnError {
                        _ = try client.perform(HTTPRequest(url: url, method: method), onHead: { _ in }, onBody: { _ in })
                    }
                    #expect(error?.code == .httpStatus)
                    #expect(error?.underlyingCause == .httpStatus(404))
                    switch error?.underlyingCause {
                    case .httpStatus(let status)?: #expect(status == 404)
                    default: Issue.record("not an HTTP status: \(String(describing: error?.underlyingCause))")
                    }
                    #expect(error?.cause == nil)
                    #expect(error.map { "\($0)" } == "\(url): the server answered 404 Not Found")
                }
            }
        }
    }

    // MARK: S3

    @Test("S3 answers name their code: NoSuchKey for a missing object, NoSuchBucket for a missing bucket; the call's name keeps it")
    func s3Codes() async throws {
        try await onDedicatedThread {
            let server = try RcloneS3Server()
            defer { server.stop() }
            let configuration = try ObjectStoreTests.configuration(server)

            // A GET of a missing key: the body is an <Error> with <Code>NoSuchKey.
            let client = HTTPClient(signer: S3RequestSigner(configuration: configuration))
            let missingKey = try S3Location(parsing: "s3://cairn/absent.cairn")
            let url = configuration.url(for: missingKey)
            let noKey = expectCairnError {
                _ = try client.perform(HTTPRequest(url: url), onHead: { _ in }, onBody: { _ in })
            }
            #expect(noKey?.code == .httpStatus)
            #expect(noKey?.underlyingCause == .s3(code: "NoSuchKey", httpStatus: 404))
            #expect(noKey?.httpStatusCode == 404)

            // CreateMultipartUpload in a missing bucket, through S3Client (which puts the call's
            // name before the message).
            let store = S3Client(configuration: configuration, retry: RetryPolicy(attempts: 1))
            let noBucket = expectCairnError { _ = try store.createMultipartUpload(try S3Location(parsing: "s3://nobucket/a.cairn")) }
            #expect(noBucket?.code == .httpStatus)
            switch noBucket?.underlyingCause {
            case .s3(code: "NoSuchBucket", httpStatus: 404)?: break
            default: Issue.record("not NoSuchBucket: \(String(describing: noBucket?.underlyingCause))")
            }
            #expect(
                noBucket.map { "\($0)" }
                    == "http://127.0.0.1:\(server.port)/nobucket/a.cairn: CreateMultipartUpload: the server answered 404 Not Found (NoSuchBucket: The specified bucket does not exist)")

            // A HEAD has no body to name a code: the status alone.
            let head = expectCairnError {
                _ = try client.perform(HTTPRequest(url: url, method: .head), onHead: { _ in }, onBody: { _ in })
            }
            #expect(head?.underlyingCause == .httpStatus(404))
        }
    }

    @Test("a 200 CompleteMultipartUpload answer whose body is an <Error> keeps the store's code with status 200")
    func errorInSuccessfulAnswer() throws {
        let body = "<?xml version=\"1.0\"?><Error><Code>InternalError</Code><Message>retry</Message></Error>"
        let document = try #require(S3XMLDocument(Array(body.utf8)))
        let error = HTTPClient.statusError(
            status: 200, reason: "with an error", url: "http://h/b/k", detail: S3RequestSigner.detail(of: document.root),
            cause: S3RequestSigner.cause(of: document.root, status: 200))
        #expect(error.underlyingCause == .s3(code: "InternalError", httpStatus: 200))
        #expect(error.httpStatusCode == 200)
        #expect(RetryPolicy.isTransient(error))
        #expect(error.message == "the server answered 200 with an error (InternalError: retry)")
    }
}
