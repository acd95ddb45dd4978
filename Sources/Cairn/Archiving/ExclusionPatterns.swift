import Glibc

/// tar's `--exclude` rule, in one place: a glob pattern (`fnmatch(3)` with `FNM_PATHNAME`, so `*`,
/// `?` and `[...]` do not match `/`) excludes an item when it matches the item's whole path in
/// archive or any trailing sub-path of it. So `*.log` and `cache` match at any depth
/// (`logs/app.log`, `a/b/cache`), while `logs/*.log` matches only below a `logs` component.
/// An excluded directory is left out with everything below it.
package struct ExclusionPatterns: Sendable {
    /// Each pattern, NUL-terminated, ready for `fnmatch(3)`.
    private let patterns: [[CChar]]

    /// - Parameter patterns: glob patterns; empty ones are ignored.
    package init(_ patterns: [String]) {
        self.patterns = patterns.filter { !$0.isEmpty }.map { Array($0.utf8CString) }
    }

    /// Whether no pattern is set (nothing is ever excluded).
    package var isEmpty: Bool { patterns.isEmpty }

    /// Whether `pathInArchive` (raw bytes, `/`-separated, no leading `/`) or one of its
    /// trailing sub-paths matches a pattern.
    ///
    /// - Complexity: O(patterns × components × length).
    package func excludes(_ pathInArchive: [UInt8]) -> Bool {
        guard !patterns.isEmpty, !pathInArchive.isEmpty else { return false }
        var name = pathInArchive.map { CChar(bitPattern: $0) }
        name.append(0)
        return name.withUnsafeBufferPointer { buffer -> Bool in
            guard let base = buffer.baseAddress else { return false }
            var start = 0
            while start < buffer.count - 1 {
                for pattern in patterns where fnmatch(pattern, base + start, FNM_PATHNAME) == 0 {
                    return true
                }
                // The next trailing sub-path starts after the next '/'.
                guard let slash = buffer[start..<(buffer.count - 1)].firstIndex(of: 0x2F) else { break }
                start = slash + 1
            }
            return false
        }
    }
}
