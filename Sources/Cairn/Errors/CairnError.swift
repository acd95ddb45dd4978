/// The one error type Cairn throws.
///
/// Every public throwing API in Cairn throws either `CairnError` or `CancellationError`, nothing
/// else. An error carries a machine-readable ``code``, a human ``message``, and where known the
/// path in the file system or in the archive, the byte offset in the archive, and the underlying
/// cause: as text in ``cause``, and as a value to switch on in ``underlyingCause`` (the `errno` of a
/// failed system call, an HTTP status, an S3 error code).
///
/// Match on codes with `==`, which compares only the code:
/// ```swift
/// do { try await extractor.extractAll(to: destination) }
/// catch let error as CairnError where error.code == .checksumMismatch { ... }
/// ```
/// and on the cause with `switch` or `==`:
/// ```swift
/// catch let error as CairnError where error.underlyingCause == .errno(.noSpace) { ... }
/// ```
public struct CairnError: Error, Sendable, CustomStringConvertible {
    /// A stable error category. New codes may be added in later versions; do not `switch`
    /// exhaustively over them.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: String, Sendable {
            case truncated, corrupted, checksumMismatch, unsupportedVersion, unsafePath
            case limitExceeded, io, invalidArgument, notFound, alreadyExists
            case sourceChanged, unsupportedFileType, tokenMismatch, notResumable, busy
            case network, httpStatus, untrusted
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// The archive ends before a record, a field or the footer is complete.
        public static let truncated = Code(.truncated)
        /// A structure in the archive is malformed (bad magic, bad field, impossible value).
        public static let corrupted = Code(.corrupted)
        /// A CRC-32 or SHA-256 over archive bytes or chunk contents does not match.
        public static let checksumMismatch = Code(.checksumMismatch)
        /// The archive's major format version is not one this library reads.
        public static let unsupportedVersion = Code(.unsupportedVersion)
        /// A name in the archive would write outside the destination or through a link.
        public static let unsafePath = Code(.unsafePath)
        /// A documented hard limit (record size, path length, total output...) was exceeded.
        public static let limitExceeded = Code(.limitExceeded)
        /// A system call failed; ``CairnError/underlyingCause`` holds its `errno`
        /// (``CairnError/Cause/errno(_:)``) and ``CairnError/cause`` the `errno`'s text.
        public static let io = Code(.io)
        /// An argument or option passed by the caller is invalid.
        public static let invalidArgument = Code(.invalidArgument)
        /// The path or entry does not exist.
        public static let notFound = Code(.notFound)
        /// The destination already exists and would be replaced.
        public static let alreadyExists = Code(.alreadyExists)
        /// A source file changed while it was being read.
        public static let sourceChanged = Code(.sourceChanged)
        /// The file type (socket, device, ...) cannot be archived or extracted.
        public static let unsupportedFileType = Code(.unsupportedFileType)
        /// A resume token does not match the archive it was presented to.
        public static let tokenMismatch = Code(.tokenMismatch)
        /// The archive cannot be resumed (no valid commit, or options differ).
        public static let notResumable = Code(.notResumable)
        /// Another process holds the archive or destination (a running `create` or extraction);
        /// wait for it to finish. Nothing is to be removed by hand.
        public static let busy = Code(.busy)
        /// An HTTP transfer failed below HTTP: the server cannot be reached, the connection was
        /// cut, nothing arrived within a timeout, or TLS failed. ``CairnError/path`` is the URL,
        /// ``CairnError/offset`` the offset reached in the resource when known, and
        /// ``CairnError/cause`` libcurl's description. Usually transient: retrying may succeed.
        public static let network = Code(.network)
        /// An HTTP server answered with an error status (400 or more); the message names the
        /// status (`the server answered 404 Not Found`), ``CairnError/path`` is the URL, and
        /// ``CairnError/underlyingCause`` holds the status (``CairnError/Cause/httpStatus(_:)``) or,
        /// when an object store's answer names its error, the store's code
        /// (``CairnError/Cause/s3(code:httpStatus:)``).
        public static let httpStatus = Code(.httpStatus)
        /// A signature that trusted keys were asked for is missing or is by another key: the
        /// archive (or the detached signature) is unsigned, or signed by a key that is not among
        /// the trusted ones. The message names the key id found (or "not signed") and the ones
        /// trusted (`Spec/0004-trusted-archives.md §4.1`). A signature by a trusted key that does
        /// not verify is ``checksumMismatch``: the bytes were changed. For an encrypted archive's
        /// key block (an age file, `Spec/0004-trusted-archives.md §6.4`): no identity given unwraps
        /// its file key ("no identity matches: the key block is for 2 X25519 recipients, …"), or
        /// the passphrase does not; a key block whose header MAC or payload does not verify is
        /// ``checksumMismatch``.
        public static let untrusted = Code(.untrusted)

        public var description: String { value.rawValue }
    }

    /// What failed underneath, as a value a caller can switch on: the `errno` of a system call,
    /// the status of an HTTP answer, the error code of an object store's answer.
    ///
    /// ``CairnError/cause`` holds the same cause as text for people. Later versions may add
    /// cases (a cause from another layer), so give a `switch` over it a `default`.
    public enum Cause: Hashable, Sendable, CustomStringConvertible {
        /// A system call failed with this `errno`; ``CairnError/cause`` is its `strerror(3)` text.
        case errno(Errno)
        /// An HTTP server answered with this status: an error status (400 or more), or one that
        /// does not answer the request (a partial answer to a request for a whole archive).
        case httpStatus(Int)
        /// An S3-compatible store answered with an `<Error>` body: its `<Code>` (`NoSuchKey`,
        /// `NoSuchBucket`, `AccessDenied`, `NoSuchUpload`, `InvalidPart`, ...) and the HTTP status
        /// of the answer (a `CompleteMultipartUpload` may carry its error in a 200).
        case s3(code: String, httpStatus: Int)

        /// `errno 28 (No space left on device)`, `HTTP status 404`,
        /// `S3 NoSuchKey (HTTP status 404)`.
        public var description: String {
            switch self {
            case .errno(let value): "errno \(value.rawValue) (\(value))"
            case .httpStatus(let status): "HTTP status \(status)"
            case .s3(let code, let status): "S3 \(code) (HTTP status \(status))"
            }
        }
    }

    /// The category of the failure.
    public var code: Code
    /// A sentence for humans, without the path or offset (those are in their own fields).
    public var message: String
    /// The file-system path or path in archive the error concerns, if any.
    public var path: String?
    /// The byte offset in the archive the error concerns, if any.
    public var offset: UInt64?
    /// A description of the underlying cause (for example `strerror(errno)`), if any.
    public var cause: String?
    /// The underlying cause as a value (the `errno` of a failed system call, an HTTP status, an
    /// S3 error code), when one is known. It may be set while ``cause`` is nil, where the
    /// ``message`` already says it (the status of an `.httpStatus` error).
    public var underlyingCause: Cause?
    /// Further problems of the same operation, after this first one (for example every damaged
    /// chunk `verify` found, up to its limit). Empty for most errors.
    public var additionalErrors: [CairnError] = []

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - code: the category.
    ///   - message: a sentence for humans, without the path, the offset or the cause.
    ///   - path: the file-system path, path in archive or URL it concerns.
    ///   - offset: the byte offset in the archive it concerns.
    ///   - cause: the underlying cause as text (`strerror(3)`'s for an `errno`).
    ///   - underlyingCause: the underlying cause as a value.
    public init(
        _ code: Code, _ message: String, path: String? = nil, offset: UInt64? = nil,
        cause: String? = nil, underlyingCause: Cause? = nil
    ) {
        self.code = code
        self.message = message
        self.path = path
        self.offset = offset
        self.cause = cause
        self.underlyingCause = underlyingCause
    }

    /// `"<path>: at offset <n>: <message>: <cause>"`, leaving out what is unknown. A password in
    /// a URL (`http://user:password@host/…`) is shown as `***`.
    public var description: String {
        var parts: [String] = []
        if let path { parts.append(Self.hidingPassword(in: path)) }
        if let offset { parts.append("at offset \(offset)") }
        parts.append(message)
        if let cause { parts.append(cause) }
        return parts.joined(separator: ": ")
    }

    /// `text` with the password of a URL's user information (RFC 3986 §3.2.1) replaced by
    /// `***`: `https://user:secret@host/x` becomes `https://user:***@host/x`.
    public static func hidingPassword(in text: String) -> String {
        guard let scheme = text.range(of: "://") else { return text }
        let authorityStart = scheme.upperBound
        let rest = text[authorityStart...]
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? text.endIndex
        let authority = text[authorityStart..<authorityEnd]
        guard let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") else { return text }
        return String(text[..<text.index(after: colon)]) + "***" + String(text[at...])
    }

    /// A copy of this error with `path` filled in when it was not set yet.
    package func withPath(_ newPath: String) -> CairnError {
        var copy = self
        if copy.path == nil { copy.path = newPath }
        return copy
    }
}
