import Foundation

/// Helpers for file names kept as raw bytes.
///
/// Linux file names are byte strings; Cairn never converts them to `String` except for display,
/// so names that are not valid UTF-8 round-trip exactly.
package enum PathBytes {
    /// A printable form of `bytes`: valid UTF-8 is shown as is except control characters and
    /// backslash; every other byte is shown as `\xHH`. The mapping is reversible.
    package static func display(_ bytes: [UInt8]) -> String {
        escaped(bytes)
    }

    /// Escapes `bytes` reversibly (`Spec/0003-command-line.md §5`): `\\` for a backslash, `\xHH`
    /// for each byte of a control character (C0 U+0000–U+001F, DEL U+007F, and C1 U+0080–U+009F,
    /// whose two UTF-8 bytes some terminals act on) and for each byte that is not part of valid
    /// UTF-8; everything else is kept.
    package static func escaped(_ bytes: [UInt8]) -> String {
        // Most names are printable ASCII without a backslash: one scan, one copy.
        if !bytes.contains(where: { $0 < 0x20 || $0 >= 0x7F || $0 == 0x5C }) {
            return String(decoding: bytes, as: UTF8.self)
        }
        var out = ""
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            if b == 0x5C {
                out += "\\\\"
                i += 1
            } else if b < 0x20 || b == 0x7F {
                out += hexEscape(b)
                i += 1
            } else if b < 0x80 {
                out.unicodeScalars.append(Unicode.Scalar(b))
                i += 1
            } else {
                let length = utf8SequenceLength(bytes, at: i)
                if length == 2, b == 0xC2, (0x80..<0xA0).contains(bytes[i + 1]) {
                    // A C1 control character, U+0080–U+009F: C2 80 … C2 9F.
                    out += hexEscape(b) + hexEscape(bytes[i + 1])
                    i += 2
                } else if length > 0, let s = String(validating: bytes[i..<(i + length)], as: UTF8.self) {
                    out += s
                    i += length
                } else {
                    out += hexEscape(b)
                    i += 1
                }
            }
        }
        return out
    }

    /// Reverses ``escaped(_:)``. Returns nil for malformed escapes.
    package static func unescaped(_ text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count)
        var i = 0
        while i < utf8.count {
            if utf8[i] != 0x5C {
                out.append(utf8[i])
                i += 1
                continue
            }
            guard i + 1 < utf8.count else { return nil }
            if utf8[i + 1] == 0x5C {
                out.append(0x5C)
                i += 2
            } else if utf8[i + 1] == UInt8(ascii: "x"), i + 3 < utf8.count,
                let hi = hexValue(utf8[i + 2]), let lo = hexValue(utf8[i + 3])
            {
                out.append(hi << 4 | lo)
                i += 4
            } else {
                return nil
            }
        }
        return out
    }

    /// Joins two relative byte paths with `/`.
    package static func join(_ a: [UInt8], _ b: [UInt8]) -> [UInt8] {
        if a.isEmpty { return b }
        if b.isEmpty { return a }
        // One allocation, not three (`a + [0x2F] + b` builds the literal and an intermediate).
        var joined: [UInt8] = []
        joined.reserveCapacity(a.count + 1 + b.count)
        joined.append(contentsOf: a)
        joined.append(0x2F)
        joined.append(contentsOf: b)
        return joined
    }

    /// The last component of a path, ignoring trailing slashes.
    package static func lastComponent(_ path: [UInt8]) -> [UInt8] {
        var end = path.count
        while end > 1 && path[end - 1] == 0x2F { end -= 1 }
        var start = end
        while start > 0 && path[start - 1] != 0x2F { start -= 1 }
        return Array(path[start..<end])
    }

    private static func hexEscape(_ b: UInt8) -> String {
        let digits: [Character] = Array("0123456789abcdef")
        return "\\x" + String(digits[Int(b >> 4)]) + String(digits[Int(b & 0xF)])
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x61...0x66: return c - 0x61 + 10
        case 0x41...0x46: return c - 0x41 + 10
        default: return nil
        }
    }

    private static func utf8SequenceLength(_ bytes: [UInt8], at i: Int) -> Int {
        let b = bytes[i]
        let length: Int
        switch b {
        case 0xC2...0xDF: length = 2
        case 0xE0...0xEF: length = 3
        case 0xF0...0xF4: length = 4
        default: return 0
        }
        return i + length <= bytes.count ? length : 0
    }
}

extension Array where Element == UInt8 {
    /// Calls `body` with a NUL-terminated C string of these bytes.
    package func withNullTerminated<R>(_ body: (UnsafePointer<CChar>) throws -> R) rethrows -> R {
        // On the stack (the standard library moves a large one to the heap), not a copy of the
        // array with a NUL appended: one heap block per system call on a name.
        try withUnsafeTemporaryAllocation(of: CChar.self, capacity: count + 1) { chars in
            // A buffer of at least one element always has a base address; the fallback is never taken.
            guard let base = chars.baseAddress else { return try "".withCString(body) }
            withUnsafeBytes { raw in
                if let source = raw.baseAddress { UnsafeMutableRawPointer(base).copyMemory(from: source, byteCount: raw.count) }
            }
            base[count] = 0
            return try body(base)
        }
    }
}

extension Array where Element == UInt8 {
    /// `withUnsafeBytes` for a body that throws only ``CairnError`` (the standard library's
    /// version is `rethrows`, which erases the error type).
    package func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws(CairnError) -> R) throws(CairnError) -> R {
        let result: Result<R, CairnError> = withUnsafeBytes { raw in
            Result { () throws(CairnError) -> R in try body(raw) }
        }
        return try result.get()
    }

    /// `withUnsafeMutableBytes` for a body that throws only ``CairnError``.
    package mutating func withMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws(CairnError) -> R)
        throws(CairnError) -> R
    {
        let result: Result<R, CairnError> = withUnsafeMutableBytes { raw in
            Result { () throws(CairnError) -> R in try body(raw) }
        }
        return try result.get()
    }
}

extension PathBytes {
    /// The raw file-system bytes of a file URL.
    package static func fileSystemPath(_ url: URL) -> [UInt8] {
        url.withUnsafeFileSystemRepresentation { pointer in
            guard let pointer else { return Array(url.path.utf8) }
            return Array(UnsafeBufferPointer(start: UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self), count: strlen(pointer)))
        }
    }
}
