internal import CSodium

/// The one place libsodium is initialized.
///
/// `sodium_init()` must run once before any other libsodium call (it picks the fastest
/// implementations and seeds the random generator); it is safe to call again, and returns -1 only
/// when the library cannot work at all (no source of randomness).
package enum Sodium {
    private static let initialized: Bool = sodium_init() >= 0

    /// Initializes libsodium on first use.
    ///
    /// - Throws: ``CairnError`` with code `.io` when libsodium cannot initialize (no source of
    ///   randomness on this machine).
    package static func ready() throws(CairnError) {
        guard initialized else {
            throw CairnError(.io, "libsodium could not initialize (no source of randomness)")
        }
    }

    /// Refuses a key of all zero bytes (`Spec/0004-trusted-archives.md` "Keys"): no generator
    /// makes one, so it is an empty buffer or a broken file, and with it every archive or
    /// signature would be made with a key anyone can guess. Checked in constant time
    /// (`sodium_is_zero`).
    ///
    /// - Parameter what: the key's name in the message ("maker key").
    /// - Throws: ``CairnError`` `.invalidArgument` "the WHAT is all zero bytes".
    package static func requireNotAllZero(_ key: [UInt8], _ what: String) throws(CairnError) {
        guard sodium_is_zero(key, key.count) == 0 else {
            throw CairnError(.invalidArgument, "the \(what) is all zero bytes: not a key (made by a broken generator, or a file emptied)")
        }
    }

    /// `count` bytes from libsodium's cryptographic random generator (`randombytes_buf`).
    package static func randomBytes(_ count: Int) throws(CairnError) -> [UInt8] {
        try ready()
        var bytes = [UInt8](repeating: 0, count: count)
        randombytes_buf(&bytes, count)
        return bytes
    }
}
