import Glibc

/// Reading and writing a maker key file (`Spec/0004-trusted-archives.md §6.5`).
extension MakerKey {
    /// The largest maker key file read: the line is 64 bytes.
    static let fileByteLimit = 1024

    /// The key in the file at `path` (``fileText``'s form).
    ///
    /// - Throws: ``CairnError`` naming `path`: `.notFound` / `.io` when it cannot be read,
    ///   `.limitExceeded` over 1 KiB, `.invalidArgument` when it is not a maker key file or when
    ///   its group or others may read it (mode 0600 is asked for, as ssh does for its keys).
    public static func read(fromFile path: String) throws(CairnError) -> MakerKey {
        let bytes = try SmallFile.read(path, limit: fileByteLimit, what: "maker key file", ownerOnly: true)
        do throws(CairnError) {
            return try MakerKey(fileText: String(decoding: bytes, as: UTF8.self))
        } catch {
            throw error.withPath(path)
        }
    }

    /// Writes ``fileText`` to `path`, mode 0600, appearing only when complete.
    ///
    /// - Throws: ``CairnError`` naming `path`: `.alreadyExists` when it exists and not
    ///   `replacing`; `.io`.
    public func write(toFile path: String, replacing: Bool) throws(CairnError) {
        try SmallFile.write(Array(fileText.utf8), to: path, mode: 0o600, replacing: replacing)
    }
}
