internal import CSodium

/// X25519 (RFC 7748 §5) through libsodium's `crypto_scalarmult_curve25519` and
/// `crypto_scalarmult_curve25519_base`: the key agreement of age v1's X25519 recipients
/// (`Spec/0004-trusted-archives.md §6.4.2`).
package enum X25519 {
    /// The number of bytes in a scalar (secret key), a point (public key) and a shared secret.
    package static let byteCount = 32

    /// `scalar` times the Curve25519 base point: the public key of a secret key.
    ///
    /// - Throws: ``CairnError`` with code `.invalidArgument` unless `scalar` holds 32 bytes,
    ///   `.io` when libsodium cannot initialize.
    package static func publicKey(of scalar: [UInt8]) throws(CairnError) -> [UInt8] {
        try checkSize(scalar)
        try Sodium.ready()
        var point = [UInt8](repeating: 0, count: byteCount)
        guard crypto_scalarmult_curve25519_base(&point, scalar) == 0 else {
            throw CairnError(.invalidArgument, "this X25519 secret key has no public key")
        }
        return point
    }

    /// The shared secret `scalar` times `point`, or nil when it is all zero bytes (a point of
    /// small order, which RFC 7748 §6.1.1 says to refuse).
    ///
    /// - Throws: ``CairnError`` with code `.invalidArgument` unless both hold 32 bytes, `.io`
    ///   when libsodium cannot initialize.
    package static func sharedSecret(_ scalar: [UInt8], _ point: [UInt8]) throws(CairnError) -> [UInt8]? {
        try checkSize(scalar)
        try checkSize(point)
        try Sodium.ready()
        var shared = [UInt8](repeating: 0, count: byteCount)
        // libsodium returns -1 for an all-zero result; the explicit check says the rule here.
        guard crypto_scalarmult_curve25519(&shared, scalar, point) == 0, sodium_is_zero(shared, byteCount) == 0 else {
            return nil
        }
        return shared
    }

    private static func checkSize(_ bytes: [UInt8]) throws(CairnError) {
        guard bytes.count == byteCount else {
            throw CairnError(.invalidArgument, "an X25519 key is \(byteCount) bytes, not \(bytes.count)")
        }
    }
}
