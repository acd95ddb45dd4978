/// The gear table of Cairn's content-defined chunking (`Spec/0002-chunking.md §3`).
///
/// 256 `UInt64` values: the first 256 outputs of SplitMix64 seeded with `0x434149524E474541`
/// ("CAIRNGEA" as big-endian ASCII). Part of the format: changing one value changes every
/// chunk boundary. A keyed archive uses a table derived from its chunker key instead
/// (``keyedValues(chunkerKey:)``, `Spec/0004-trusted-archives.md §6.7`).
///
/// - Important: ``values`` is a lazily initialised global. Do not read it in a hot loop (that
///   costs a lazy-initialisation check per byte); ``Chunker`` copies it once into memory it owns.
package enum GearTable {
    /// The SplitMix64 seed: the bytes "CAIRNGEA" read as a big-endian `UInt64`.
    package static let seed: UInt64 = 0x4341_4952_4E47_4541

    /// The 256 gear values, `values[i]` being SplitMix64's output number `i` (from 0).
    package static let values: [UInt64] = makeValues(seed: seed)

    /// The number of bytes of keystream a keyed table is read from: 256 values of 8 bytes.
    package static let keyedStreamByteCount = 256 * 8

    /// The gear table of a keyed archive (`Spec/0004-trusted-archives.md §6.7`): `values[i]` is
    /// bytes `8i ..< 8i + 8` of the ChaCha20 keystream (RFC 8439, IETF variant, libsodium's
    /// `crypto_stream_chacha20_ietf`) under `chunkerKey` with the all-zero 12-byte nonce, read
    /// as a little-endian `UInt64`.
    ///
    /// - Parameter chunkerKey: 32 bytes.
    /// - Returns: 256 values.
    /// - Throws: ``CairnError`` with code `.invalidArgument` for a key of another length, `.io`
    ///   when libsodium fails.
    package static func keyedValues(chunkerKey: [UInt8]) throws(CairnError) -> [UInt64] {
        let stream = try Sodium.chaCha20Keystream(key: chunkerKey, count: keyedStreamByteCount)
        return stream.withUnsafeBytes { raw in
            (0..<256).map { index in UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 8 * index, as: UInt64.self)) }
        }
    }

    /// Generates 256 gear values from a SplitMix64 seed.
    ///
    /// - Parameter seed: The SplitMix64 initial state.
    /// - Returns: The first 256 outputs.
    package static func makeValues(seed: UInt64) -> [UInt64] {
        var state = seed
        var table: [UInt64] = []
        table.reserveCapacity(256)
        for _ in 0..<256 {
            table.append(splitMix64(&state))
        }
        return table
    }

    /// One SplitMix64 step (Steele, Lea and Flood, "Fast splittable pseudorandom number
    /// generators", OOPSLA 2014): advances `state` and returns the next output.
    ///
    /// - Parameter state: The generator state, advanced by `0x9E3779B97F4A7C15`.
    /// - Returns: The mixed output.
    @inline(__always)
    package static func splitMix64(_ state: inout UInt64) -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z &>> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z &>> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z &>> 31)
    }
}
