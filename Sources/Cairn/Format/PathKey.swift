/// A path's raw bytes as a dictionary or set key, hashed in one call over all its bytes
/// (`Hasher.combine(bytes:)`) instead of byte by byte as `[UInt8]` is: path sets of archives
/// with 100,000 entries spent more time hashing than checking.
package struct PathKey: Hashable, Sendable {
    package let bytes: [UInt8]

    package init(_ bytes: [UInt8]) { self.bytes = bytes }

    package func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    package static func == (a: PathKey, b: PathKey) -> Bool { a.bytes == b.bytes }
}
