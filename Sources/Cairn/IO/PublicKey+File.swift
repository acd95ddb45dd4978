/// Reading minisign public key files (`Spec/0004-trusted-archives.md §2.1`).
extension PublicKey {
    /// The keys in a minisign public key file, or in a file of several keys.
    ///
    /// The file is a minisign `.pub` file (`untrusted comment: …` line, then the base64 of `Ed`,
    /// the key id and the key), several of them one after the other, or bare base64 keys as
    /// `minisign -P` takes them, one per line; blank lines and lines starting with `#` or
    /// `untrusted comment:` are skipped.
    ///
    /// - Parameter path: the file; at most 1 MiB.
    /// - Returns: the keys, in file order, at least one.
    /// - Throws: ``CairnError`` naming `path`: `.notFound` / `.io` when it cannot be read,
    ///   `.limitExceeded` when it is larger than 1 MiB, `.invalidArgument` naming the line when a
    ///   line is not a key or comment, or when the file holds no key.
    public static func readKeys(fromFile path: String) throws(CairnError) -> [PublicKey] {
        let text = try SmallFile.read(path, limit: keyFileByteLimit, what: "public key file")
        return try keys(parsingMinisignText: text, source: path)
    }
}
