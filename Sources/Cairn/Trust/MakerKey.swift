/// A maker's key for the encrypted archives it makes without signing them
/// (`Spec/0004-trusted-archives.md §6.5`): 32 secret bytes from which every one of its archives
/// derives the same chunk id key and chunker key, so that its exports share chunk ids and chunk
/// boundaries (a seeded fetch between them saves bytes), as a signing key's exports do.
///
/// Its file (``fileText``, `cairn key generate --maker FILE`) is one line:
/// `cairn-maker-key-v1 ` and the 32 bytes in padded standard base64 (RFC 4648 §4), then a line
/// feed. Keep it as secret as a signing key: with it, anyone can tell whether a known chunk is in
/// one of the maker's archives.
public struct MakerKey: Sendable {
    /// The number of secret bytes.
    public static let byteCount = 32
    /// The first word of the file's line.
    public static let fileTag = "cairn-maker-key-v1"

    /// The secret bytes, the input key material of the derivation; wiped when the last copy of
    /// the key goes.
    private let secret: SecretBytes

    /// A key of the 32 bytes `secretBytes`.
    ///
    /// - Throws: ``CairnError`` `.invalidArgument` when `secretBytes` is not 32 bytes, or is all
    ///   zero bytes.
    public init(secretBytes: [UInt8]) throws(CairnError) {
        guard secretBytes.count == Self.byteCount else {
            throw CairnError(.invalidArgument, "a maker key is \(Self.byteCount) bytes, not \(secretBytes.count)")
        }
        try Sodium.requireNotAllZero(secretBytes, "maker key")
        secret = SecretBytes(copying: secretBytes)
    }

    /// Calls `body` with the 32 secret bytes, in a temporary wiped after it.
    package func withSecretBytes<R, E: Error>(_ body: ([UInt8]) throws(E) -> R) throws(E) -> R {
        var bytes = secret.withUnsafeBytes { Array($0) }
        defer { SecretBytes.wipe(&bytes) }
        return try body(bytes)
    }

    /// A new key of 32 bytes from libsodium's `randombytes_buf`.
    ///
    /// - Throws: ``CairnError`` `.io` when libsodium cannot initialize.
    public static func generate() throws(CairnError) -> MakerKey {
        try MakerKey(secretBytes: Sodium.randomBytes(byteCount))
    }

    /// The key a file's text holds: `cairn-maker-key-v1 BASE64`, with or without a final line feed.
    ///
    /// - Throws: ``CairnError`` `.invalidArgument` for any other text (the message names the
    ///   expected form, never the text).
    public init(fileText: String) throws(CairnError) {
        var line = Substring(fileText)
        if line.hasSuffix("\n") { line = line.dropLast() }
        let prefix = Self.fileTag + " "
        guard line.hasPrefix(prefix), let bytes = Base64.decode(line.dropFirst(prefix.count), count: Self.byteCount) else {
            throw CairnError(
                .invalidArgument, "not a maker key file: expected one line '\(Self.fileTag) ' and 32 bytes in base64")
        }
        var decoded = bytes
        defer { SecretBytes.wipe(&decoded) }
        try self.init(secretBytes: decoded)
    }

    /// The file's text: `cairn-maker-key-v1 BASE64` and a line feed.
    public var fileText: String { withSecretBytes { Self.fileTag + " " + Base64.encode($0) + "\n" } }
}
