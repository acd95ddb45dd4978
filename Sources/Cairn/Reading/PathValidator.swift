/// The rules a path in archive must follow before anything is written for it
/// (`Spec/0001-container-format.md §6.2`).
///
/// A valid path is relative, made of 1...``FormatLimits/maximumPathDepth`` components separated
/// by single `/` bytes; no component is empty, `.` or `..`, or longer than
/// ``FormatLimits/maximumComponentLength``; no byte is NUL; the whole is at most
/// ``FormatLimits/maximumPathLength`` bytes. Any other byte, including ones that are not UTF-8,
/// is allowed and kept exactly.
package enum PathValidator {
    /// Why `path` is not a valid path in archive, or nil when it is.
    package static func problem(with path: [UInt8]) -> String? {
        if path.isEmpty { return "is empty" }
        if path.count > FormatLimits.maximumPathLength {
            return "is \(path.count) bytes, over the limit of \(FormatLimits.maximumPathLength)"
        }
        if path.first == 0x2F { return "is absolute" }
        if path.contains(0) { return "contains a NUL byte" }
        var depth = 0
        for component in path.split(separator: 0x2F, omittingEmptySubsequences: false) {
            depth += 1
            if component.isEmpty { return "has an empty component" }
            if component.elementsEqual([0x2E]) { return "has a '.' component" }
            if component.elementsEqual([0x2E, 0x2E]) { return "has a '..' component" }
            if component.count > FormatLimits.maximumComponentLength {
                return "has a component longer than \(FormatLimits.maximumComponentLength) bytes"
            }
        }
        if depth > FormatLimits.maximumPathDepth { return "is deeper than \(FormatLimits.maximumPathDepth) components" }
        return nil
    }

    /// The components of a valid path.
    package static func components(_ path: [UInt8]) -> [[UInt8]] {
        path.split(separator: 0x2F).map { Array($0) }
    }

    /// The parent path of a valid path (empty for a top-level name).
    package static func parent(_ path: [UInt8]) -> [UInt8] {
        guard let slash = path.lastIndex(of: 0x2F) else { return [] }
        return Array(path[..<slash])
    }
}
