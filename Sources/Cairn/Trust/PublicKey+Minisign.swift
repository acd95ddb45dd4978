/// minisign's public key format (jedisct1/minisign, `src/minisign.h`; `Spec/0004-trusted-archives.md §2.1`):
/// base64 of the algorithm `Ed`, the 8-byte key id and the 32-byte Ed25519 public key.
extension PublicKey {
    /// minisign's signature algorithm tag, first in every key: `Ed` (Ed25519).
    static let minisignAlgorithm: [UInt8] = Array("Ed".utf8)
    /// The bytes a minisign public key encodes: algorithm, key id, key.
    static let minisignByteCount = 2 + SigningKeyID.byteCount + byteCount
    /// The text before a comment line in minisign's files.
    static let untrustedCommentPrefix = "untrusted comment: "
    /// The largest file of public keys read, in bytes: thousands of keys.
    package static let keyFileByteLimit = 1 << 20

    /// A key from the base64 line of a minisign public key file, or the argument of `minisign -P`.
    ///
    /// - Parameter minisignBase64: padded standard base64 of `Ed`, the 8-byte key id and the
    ///   32-byte key (56 characters, `RWQ...`); spaces and line breaks around it are ignored.
    /// - Throws: ``CairnError`` with code `.invalidArgument` when the text is not such a key.
    public init(minisignBase64: String) throws(CairnError) {
        let text = minisignBase64.trimmingMinisignSpace()
        guard let bytes = Base64.decode(text, count: Self.minisignByteCount) else {
            throw CairnError(
                .invalidArgument,
                "not a minisign public key: expected base64 of \(Self.minisignByteCount) bytes (56 characters starting RWQ)")
        }
        guard Array(bytes[0..<2]) == Self.minisignAlgorithm else {
            throw CairnError(.invalidArgument, "not an Ed25519 minisign public key (algorithm is not Ed)")
        }
        try self.init(keyID: SigningKeyID(bytes: Array(bytes[2..<10])), rawBytes: Array(bytes[10...]))
    }

    /// The key as minisign's base64 line (what `minisign -P` takes).
    public var minisignBase64: String { Base64.encode(Self.minisignAlgorithm + keyID.bytes + rawBytes) }

    /// The key as the text of a minisign public key file, as `minisign -G` writes it:
    /// `untrusted comment: minisign public key <ID>`, the base64 line, each ending in a newline.
    public var minisignFileText: String {
        "\(Self.untrustedCommentPrefix)minisign public key \(keyID)\n\(minisignBase64)\n"
    }

    /// The keys in the text of a file of minisign public keys.
    ///
    /// Each line is a base64 key, a comment (starting `untrusted comment:` or `#`) or blank;
    /// a minisign `.pub` file is such a file with one key, and so is a bare key as `minisign -P`
    /// takes it (`Spec/0004-trusted-archives.md §2.1`).
    ///
    /// - Parameter source: the file's name, for errors.
    /// - Throws: ``CairnError`` with code `.invalidArgument` naming `source` and the line when a
    ///   line is neither, or when no key is found.
    package static func keys(parsingMinisignText text: [UInt8], source: String) throws(CairnError) -> [PublicKey] {
        var keys: [PublicKey] = []
        for (index, rawLine) in text.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() {
            let line = String(decoding: rawLine, as: UTF8.self).trimmingMinisignSpace()
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(untrustedCommentPrefix.dropLast()) { continue }
            do throws(CairnError) {
                keys.append(try PublicKey(minisignBase64: String(line)))
            } catch {
                throw CairnError(.invalidArgument, "line \(index + 1): \(error.message)", path: source)
            }
        }
        guard !keys.isEmpty else {
            throw CairnError(.invalidArgument, "no minisign public key in the file (expected a line of base64 starting RWQ)", path: source)
        }
        return keys
    }
}

extension StringProtocol {
    /// The text without the spaces, tabs and line ends minisign's `trim` removes at its ends.
    func trimmingMinisignSpace() -> Substring {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }
        let text = Substring(self)
        guard let first = text.firstIndex(where: { !isSpace($0) }), let last = text.lastIndex(where: { !isSpace($0) }) else {
            return ""
        }
        return text[first...last]
    }
}
