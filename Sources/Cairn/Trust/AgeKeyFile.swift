/// The text of age's key files (`Spec/0004-trusted-archives.md §6.4.4`): an identity file as
/// `age-keygen` writes it and a recipients file as `age -R` reads it.
///
/// Both are lines ended by LF (a CR before it is dropped, as age's line reader does); spaces
/// and tabs around a line are ignored; blank lines and lines starting with `#` are comments;
/// every other line is one key.
package enum AgeKeyFile {
    /// The most bytes a key file may hold.
    package static let byteLimit = 1 << 20

    /// The key lines of `bytes`, with their 1-based line numbers.
    static func keyLines(_ bytes: [UInt8]) -> [(number: Int, text: String)] {
        var lines: [(number: Int, text: String)] = []
        for (index, rawLine) in bytes.split(separator: 0x0A, omittingEmptySubsequences: false).enumerated() {
            var line = rawLine[...]
            while let first = line.first, first == 0x20 || first == 0x09 { line = line.dropFirst() }
            while let last = line.last, last == 0x20 || last == 0x09 || last == 0x0D { line = line.dropLast() }
            if line.isEmpty || line.first == UInt8(ascii: "#") { continue }
            lines.append((index + 1, String(decoding: line, as: UTF8.self)))
        }
        return lines
    }
}

extension AgeIdentity {
    /// The identities in the text of an identity file (`age-keygen` output): one
    /// `AGE-SECRET-KEY-1…` per key line.
    ///
    /// - Parameter source: the file's path, for errors.
    /// - Returns: the identities, in file order, at least one.
    /// - Throws: ``CairnError`` with code `.invalidArgument` naming `source` and the line (and why,
    ///   never the line's text: it may be a secret) when a key line is not an X25519 identity,
    ///   or when the file holds none.
    package static func identities(parsingFileText bytes: [UInt8], source: String) throws(CairnError) -> [AgeIdentity] {
        var identities: [AgeIdentity] = []
        for line in AgeKeyFile.keyLines(bytes) {
            do {
                identities.append(try AgeIdentity(line.text))
            } catch {
                throw CairnError(.invalidArgument, "line \(line.number): \(error.message)", path: source)
            }
        }
        guard !identities.isEmpty else {
            throw CairnError(.invalidArgument, "no age identity in the file (expected a line AGE-SECRET-KEY-1...)", path: source)
        }
        return identities
    }
}

extension AgeRecipient {
    /// The recipients in the text of a recipients file: one `age1…` per key line.
    ///
    /// - Parameter source: the file's path, for errors.
    /// - Returns: the recipients, in file order, at least one.
    /// - Throws: ``CairnError`` with code `.invalidArgument` naming `source` and the line when a
    ///   key line is not an X25519 recipient (an SSH key or a plugin's recipient included), or
    ///   when the file holds none.
    package static func recipients(parsingFileText bytes: [UInt8], source: String) throws(CairnError) -> [AgeRecipient] {
        var recipients: [AgeRecipient] = []
        for line in AgeKeyFile.keyLines(bytes) {
            do {
                recipients.append(try AgeRecipient(line.text))
            } catch {
                throw CairnError(.invalidArgument, "line \(line.number): \(error.message)", path: source)
            }
        }
        guard !recipients.isEmpty else {
            throw CairnError(.invalidArgument, "no age recipient in the file (expected a line age1...)", path: source)
        }
        return recipients
    }
}
