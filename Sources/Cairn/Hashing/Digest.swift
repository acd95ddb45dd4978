/// A SHA-256 digest (FIPS 180-4): 32 bytes that name a chunk's contents.
///
/// The bytes are kept in four `UInt64` words in their original memory order, so equality and
/// hashing compare four machine words and `withUnsafeBytes(_:)` hands out the digest bytes
/// without conversion. Ordering (`<`) is lexicographic over the 32 bytes, the same order as
/// ``hexString``.
public struct Digest: Hashable, Sendable, CustomStringConvertible, Comparable {
    /// The number of bytes in a digest.
    public static let byteCount = 32

    // Words in memory order: `w0` holds bytes 0..<8 as they appear in memory, and so on.
    private var w0: UInt64
    private var w1: UInt64
    private var w2: UInt64
    private var w3: UInt64

    /// The digest whose 32 bytes are all zero (never the hash of real data in practice).
    public static let zero = Digest(words: 0, 0, 0, 0)

    private init(words w0: UInt64, _ w1: UInt64, _ w2: UInt64, _ w3: UInt64) {
        self.w0 = w0
        self.w1 = w1
        self.w2 = w2
        self.w3 = w3
    }

    /// Creates a digest from exactly 32 bytes.
    ///
    /// - Parameter bytes: The digest bytes; any alignment.
    /// - Returns: `nil` when `bytes.count` is not 32.
    package init?(bytes: UnsafeRawBufferPointer) {
        guard bytes.count == Self.byteCount else { return nil }
        self.init(
            words: bytes.loadUnaligned(fromByteOffset: 0, as: UInt64.self),
            bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
            bytes.loadUnaligned(fromByteOffset: 16, as: UInt64.self),
            bytes.loadUnaligned(fromByteOffset: 24, as: UInt64.self))
    }

    /// Creates a digest from exactly 32 bytes.
    ///
    /// - Returns: `nil` when `bytes.count` is not 32.
    package init?(bytes: [UInt8]) {
        guard let digest = bytes.withUnsafeBytes({ Digest(bytes: $0) }) else { return nil }
        self = digest
    }

    /// Parses 64 hexadecimal digits (either case).
    ///
    /// - Returns: `nil` when the string is not exactly 64 hexadecimal digits.
    public init?(hexString: String) {
        var bytes = [UInt8](repeating: 0, count: Self.byteCount)
        var index = 0
        var high: UInt8?
        for character in hexString.utf8 {
            let nibble: UInt8
            switch character {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = character &- UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = character &- UInt8(ascii: "a") &+ 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = character &- UInt8(ascii: "A") &+ 10
            default: return nil
            }
            if let first = high {
                guard index < Self.byteCount else { return nil }
                bytes[index] = first << 4 | nibble
                index += 1
                high = nil
            } else {
                high = nibble
            }
        }
        guard index == Self.byteCount, high == nil else { return nil }
        self.init(bytes: bytes)
    }

    /// The 64 lowercase hexadecimal digits of the digest.
    public var hexString: String {
        let digits: StaticString = "0123456789abcdef"
        return withUnsafeBytes { bytes in
            String(unsafeUninitializedCapacity: Self.byteCount * 2) { output in
                digits.withUTF8Buffer { table in
                    for (index, byte) in bytes.enumerated() {
                        output[2 * index] = table[Int(byte >> 4)]
                        output[2 * index + 1] = table[Int(byte & 0x0F)]
                    }
                }
                return Self.byteCount * 2
            }
        }
    }

    /// The ``hexString``.
    public var description: String { hexString }

    /// Calls `body` with the 32 digest bytes.
    package func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        // A homogeneous tuple is laid out contiguously, like a C array.
        let words = (w0, w1, w2, w3)
        return try Swift.withUnsafeBytes(of: words, body)
    }

    /// Appends the 32 digest bytes to `bytes`.
    package func append(to bytes: inout [UInt8]) {
        withUnsafeBytes { bytes.append(contentsOf: $0) }
    }

    /// Lexicographic order over the 32 bytes.
    public static func < (lhs: Digest, rhs: Digest) -> Bool {
        // `bigEndian` turns memory-order words into integers whose numeric order is byte order.
        if lhs.w0 != rhs.w0 { return lhs.w0.bigEndian < rhs.w0.bigEndian }
        if lhs.w1 != rhs.w1 { return lhs.w1.bigEndian < rhs.w1.bigEndian }
        if lhs.w2 != rhs.w2 { return lhs.w2.bigEndian < rhs.w2.bigEndian }
        return lhs.w3.bigEndian < rhs.w3.bigEndian
    }
}
