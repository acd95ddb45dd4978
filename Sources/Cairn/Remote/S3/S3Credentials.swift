import Foundation

/// The access key an S3-compatible store authenticates requests with: an access key ID, its
/// secret access key, and for temporary credentials (AWS STS) a session token.
///
/// `SigV4Signer` signs requests with them (AWS Signature Version 4). Credentials are never
/// logged: ``description``, ``debugDescription`` and the value's mirror (what `dump` and test
/// failure messages print) show the access key ID only, with `secret ***` (and
/// `session token ***`) in place of the secrets, and no error Cairn throws contains the secret
/// or the token.
public struct S3Credentials: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The access key ID (`AKIA...`), sent in each request's `Authorization` field.
    public var accessKeyID: String
    /// The secret access key: it signs requests and is never sent, shown or logged.
    public var secretAccessKey: String
    /// The session token of temporary credentials, sent as `X-Amz-Security-Token`; `nil` for
    /// long-term keys. Never shown or logged.
    public var sessionToken: String?

    /// Creates credentials from explicit values.
    ///
    /// - Parameters:
    ///   - accessKeyID: The access key ID.
    ///   - secretAccessKey: The secret access key.
    ///   - sessionToken: The session token of temporary credentials, or `nil`.
    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }

    /// The environment variable holding the access key ID.
    public static let accessKeyIDVariable = "AWS_ACCESS_KEY_ID"
    /// The environment variable holding the secret access key.
    public static let secretAccessKeyVariable = "AWS_SECRET_ACCESS_KEY"
    /// The environment variable holding the session token.
    public static let sessionTokenVariable = "AWS_SESSION_TOKEN"

    /// Reads credentials from `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and
    /// `AWS_SESSION_TOKEN`, the variables the AWS command line tools and SDKs read.
    ///
    /// An empty variable counts as absent: an empty `AWS_SESSION_TOKEN` means no session token.
    ///
    /// - Parameter environment: The variables to read; the process's environment by default.
    /// - Returns: The credentials.
    /// - Throws: ``CairnError`` with code `.invalidArgument` when `AWS_ACCESS_KEY_ID` or
    ///   `AWS_SECRET_ACCESS_KEY` is missing or empty; the message names the variable (and
    ///   never contains a value).
    public static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(CairnError) -> S3Credentials {
        func value(_ name: String) -> String? {
            guard let value = environment[name], !value.isEmpty else { return nil }
            return value
        }
        guard let accessKeyID = value(accessKeyIDVariable) else { throw missing(accessKeyIDVariable) }
        guard let secretAccessKey = value(secretAccessKeyVariable) else { throw missing(secretAccessKeyVariable) }
        return S3Credentials(
            accessKeyID: accessKeyID, secretAccessKey: secretAccessKey, sessionToken: value(sessionTokenVariable))
    }

    private static func missing(_ name: String) -> CairnError {
        CairnError(
            .invalidArgument,
            "\(name) is not set or empty: S3 access needs \(accessKeyIDVariable) and \(secretAccessKeyVariable)")
    }

    /// `S3Credentials(access key ID AKIA..., secret ***)`, with `, session token ***` when there
    /// is one: never the secret or the token.
    public var description: String {
        "S3Credentials(access key ID \(accessKeyID), secret ***\(sessionToken == nil ? "" : ", session token ***"))"
    }

    /// The same as ``description``: never the secret or the token.
    public var debugDescription: String { description }

    /// A mirror with the access key ID and `***` for the secret and the token, so that `dump`
    /// and reflection-based printing do not show them either.
    public var customMirror: Mirror {
        var children: [(label: String?, value: Any)] = [("accessKeyID", accessKeyID), ("secretAccessKey", "***")]
        if sessionToken != nil { children.append(("sessionToken", "***")) }
        return Mirror(self, children: children, displayStyle: .struct)
    }
}
