/// Reading age identity files and recipients files (`Spec/0004-trusted-archives.md §6.4.4`).
extension AgeIdentity {
    /// The identities in an identity file as `age-keygen -o` writes it: comment lines (`#`),
    /// blank lines, and one or more `AGE-SECRET-KEY-1…` lines.
    ///
    /// - Parameter path: the file; at most 1 MiB.
    /// - Returns: the identities, in file order, at least one.
    /// - Throws: ``CairnError`` naming `path`: `.notFound` / `.io` when it cannot be read,
    ///   `.limitExceeded` when it is larger than 1 MiB, `.invalidArgument` naming the line when a
    ///   line is not an X25519 identity or comment, when the file holds no identity, or when its
    ///   group or others may read it (mode 0600 is asked for, as ssh does; a pipe is taken).
    public static func readIdentities(fromFile path: String) throws(CairnError) -> [AgeIdentity] {
        let text = try SmallFile.read(path, limit: AgeKeyFile.byteLimit, what: "age identity file", ownerOnly: true)
        return try identities(parsingFileText: text, source: path)
    }
}

extension AgeRecipient {
    /// The recipients in a recipients file as `age -R` reads it: comment lines (`#`), blank
    /// lines, and one or more `age1…` lines.
    ///
    /// - Parameter path: the file; at most 1 MiB.
    /// - Returns: the recipients, in file order, at least one.
    /// - Throws: ``CairnError`` naming `path`: `.notFound` / `.io` when it cannot be read,
    ///   `.limitExceeded` when it is larger than 1 MiB, `.invalidArgument` naming the line when a
    ///   line is not an X25519 recipient or comment, or when the file holds no recipient.
    public static func readRecipients(fromFile path: String) throws(CairnError) -> [AgeRecipient] {
        let text = try SmallFile.read(path, limit: AgeKeyFile.byteLimit, what: "age recipients file")
        return try recipients(parsingFileText: text, source: path)
    }
}
