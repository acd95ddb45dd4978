/// One recipient stanza of an age v1 header (`Spec/0004-trusted-archives.md §6.4.1`): its
/// arguments (the first names its type, `X25519` or `cairn-argon2id`) and its body.
package struct AgeStanza: Hashable, Sendable {
    /// The arguments of the `-> ` line, at least one; each is 1 or more characters of US-ASCII
    /// 33–126 (no space).
    package var arguments: [String]
    /// The body's bytes (written as base64 wrapped at 64 columns).
    package var body: [UInt8]

    /// The stanza's type: its first argument.
    package var type: String { arguments.first ?? "" }
    /// The recipient kind `cairn info` names: `X25519`, `passphrase`, or the type itself.
    package var kind: String {
        switch type {
        case AgeRecipient.stanzaType: "X25519"
        case AgePassphrase.stanzaType: "passphrase"
        default: type
        }
    }

    /// A stanza from its arguments and body.
    ///
    /// - Throws: ``CairnError`` with code `.invalidArgument` when there is no argument or an
    ///   argument is empty or holds a character outside US-ASCII 33–126.
    package init(arguments: [String], body: [UInt8]) throws(CairnError) {
        guard !arguments.isEmpty, arguments.allSatisfy(Self.isArgument) else {
            throw CairnError(.invalidArgument, "an age stanza needs one or more arguments of US-ASCII 33-126: \(arguments)")
        }
        self.arguments = arguments
        self.body = body
    }

    /// Whether `text` may be an argument: 1 or more characters of US-ASCII 33–126 (ABNF `VCHAR`).
    package static func isArgument(_ text: String) -> Bool {
        !text.utf8.isEmpty && text.utf8.allSatisfy { (33...126).contains($0) }
    }

    /// The stanza as it appears in a header: `-> ARGS\n`, then the body's base64 in lines of
    /// 64 characters and a final shorter line (empty when the body's base64 fills whole lines).
    package var encoded: [UInt8] {
        var bytes = Array(("-> " + arguments.joined(separator: " ") + "\n").utf8)
        let text = Array(Base64.encodeUnpadded(body).utf8)
        var start = 0
        while text.count - start >= AgeHeader.bodyLineLength {
            bytes += text[start..<(start + AgeHeader.bodyLineLength)]
            bytes.append(0x0A)
            start += AgeHeader.bodyLineLength
        }
        bytes += text[start...]
        bytes.append(0x0A)
        return bytes
    }
}
