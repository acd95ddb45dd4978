internal import CSodium

/// Secret bytes (a secret key, a seed, a block key) in memory this object alone owns, wiped
/// with `sodium_memzero` when the last reference to it goes (`Spec/0004-trusted-archives.md`
/// "Secrets in memory"): the types that hold a secret (``SigningKey``, ``AgeIdentity``,
/// ``MakerKey``, `BlockSealer`) keep it here instead of in a `[UInt8]`, which Swift may copy
/// anywhere and never clears.
///
/// `@unchecked Sendable`: the bytes are written once, in `init`, and only read after; the
/// memory is freed in `deinit`, when no other reference can read it.
package final class SecretBytes: @unchecked Sendable {
    private let base: UnsafeMutablePointer<UInt8>

    /// The number of secret bytes.
    package let count: Int

    /// A copy of `bytes`; the caller wipes its own array (``wipe(_:)``) when it was a temporary.
    package init(copying bytes: [UInt8]) {
        count = bytes.count
        base = UnsafeMutablePointer<UInt8>.allocate(capacity: max(count, 1))
        base.initialize(repeating: 0, count: max(count, 1))
        for (index, byte) in bytes.enumerated() { base[index] = byte }
    }

    /// `count` bytes written by `fill`, in place (no temporary array).
    package init<E: Error>(count: Int, fill: (UnsafeMutablePointer<UInt8>) throws(E) -> Void) throws(E) {
        self.count = count
        base = UnsafeMutablePointer<UInt8>.allocate(capacity: max(count, 1))
        base.initialize(repeating: 0, count: max(count, 1))
        do {
            try fill(base)
        } catch {
            sodium_memzero(base, max(count, 1))
            base.deallocate()
            throw error
        }
    }

    /// Calls `body` with the bytes, which it must not keep or copy out beyond its need.
    package func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// Calls `body` with a pointer to the bytes, for a C function that takes the key.
    package func withPointer<R, E: Error>(_ body: (UnsafePointer<UInt8>) throws(E) -> R) throws(E) -> R {
        try body(base)
    }

    /// Whether these bytes are `other`'s, compared in constant time (`sodium_memcmp`).
    package func matches(_ other: SecretBytes) -> Bool {
        count == other.count && other.withPointer { sodium_memcmp(base, $0, count) == 0 }
    }

    deinit {
        sodium_memzero(base, max(count, 1))
        base.deallocate()
    }

    /// Overwrites `bytes` with zeros in place (`sodium_memzero`, which the compiler may not drop):
    /// a temporary that held a secret (a decrypted key file, a derived key before it was stored),
    /// wiped once used. Copies Swift made of the array before are not reached.
    package static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { sodium_memzero($0.baseAddress, $0.count) }
    }
}
