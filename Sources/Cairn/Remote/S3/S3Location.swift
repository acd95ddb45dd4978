/// An object in an S3-compatible store, written `s3://BUCKET/KEY` (`Spec/0003-command-line.md
/// §1.2`): where `cairn create -o` uploads an archive and where the readers read one.
public struct S3Location: Sendable, Hashable, CustomStringConvertible {
    /// The bucket: 3 to 63 of `a-z`, `0-9`, `.`, `-` and `_`, starting and ending with a letter
    /// or digit.
    public let bucket: String
    /// The object key: 1 to 1,024 bytes of UTF-8, no NUL, CR or LF, not starting with `/`, and no
    /// empty, `.` or `..` segment between slashes (HTTP clients and servers normalise those away,
    /// so the signed path would not be the one sent).
    public let key: String

    /// Whether `text` starts with `s3://` (any case): an object location rather than a path or
    /// an HTTP URL. `ArchiveLocation.kind(of:)` asks this; ask that.
    package static func isLocation(_ text: String) -> Bool {
        text.prefix(5).lowercased() == "s3://"
    }

    /// Parses `s3://BUCKET/KEY`.
    ///
    /// - Throws: `CairnError` `.invalidArgument` naming `text` when it is not `s3://`, the
    ///   bucket is not a valid name, or the key is empty, too long or holds NUL, CR or LF.
    public init(parsing text: String) throws(CairnError) {
        guard Self.isLocation(text) else {
            throw CairnError(.invalidArgument, "not an s3://BUCKET/KEY location", path: text)
        }
        let rest = text.dropFirst(5)
        guard let slash = rest.firstIndex(of: "/") else {
            throw CairnError(.invalidArgument, "an s3:// location needs a key after the bucket (s3://BUCKET/KEY)", path: text)
        }
        try self.init(bucket: String(rest[..<slash]), key: String(rest[rest.index(after: slash)...]))
    }

    /// An object by its bucket and key.
    ///
    /// - Throws: `CairnError` `.invalidArgument` as ``init(parsing:)``.
    public init(bucket: String, key: String) throws(CairnError) {
        let display = "s3://\(bucket)/\(key)"
        let name = Array(bucket.utf8)
        let allowed: (UInt8) -> Bool = { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2E || $0 == 0x2D || $0 == 0x5F }
        let alphanumeric: (UInt8) -> Bool = { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) }
        guard name.count >= 3, name.count <= 63, name.allSatisfy(allowed), let first = name.first, let last = name.last,
            alphanumeric(first), alphanumeric(last)
        else {
            throw CairnError(
                .invalidArgument, "'\(bucket)' is not a bucket name (3 to 63 of a-z, 0-9, '.', '-' and '_')", path: display)
        }
        let keyBytes = Array(key.utf8)
        guard !keyBytes.isEmpty, keyBytes.count <= 1024, keyBytes.first != 0x2F,
            !keyBytes.contains(where: { $0 == 0 || $0 == 0x0A || $0 == 0x0D })
        else {
            throw CairnError(
                .invalidArgument, "the object key must be 1 to 1024 bytes, not start with '/', and hold no NUL, CR or LF",
                path: display)
        }
        let segments = key.split(separator: "/", omittingEmptySubsequences: false)
        guard !segments.contains(where: { $0 == "." || $0 == ".." || $0.isEmpty }) || (segments.last == "" && segments.dropLast().allSatisfy { $0 != "." && $0 != ".." && !$0.isEmpty }) else {
            throw CairnError(
                .invalidArgument, "the object key must not hold an empty, '.' or '..' segment between slashes (it would not be sent as signed)",
                path: display)
        }
        self.bucket = bucket
        self.key = key
    }

    /// `s3://BUCKET/KEY`.
    public var description: String { "s3://\(bucket)/\(key)" }

    /// The key percent-encoded for a URL path as S3 expects it in SigV4's canonical URI: every
    /// byte but `A-Z a-z 0-9 - . _ ~` and `/` as `%XX` (AWS Signature Version 4, "Create a
    /// canonical request").
    var encodedKey: String {
        S3Location.percentEncoded(key, keepingSlash: true)
    }

    /// `text` with every byte but the unreserved ones (and `/` when `keepingSlash`) as `%XX`,
    /// upper-case hex.
    static func percentEncoded(_ text: String, keepingSlash: Bool) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for byte in text.utf8 {
            let unreserved =
                (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39)
                || byte == 0x2D || byte == 0x2E || byte == 0x5F || byte == 0x7E
            if unreserved || (keepingSlash && byte == 0x2F) {
                out.append(byte)
            } else {
                out += [0x25, hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
