import Foundation
import Glibc

/// A new, empty, uniquely named directory under `/tmp` (`mkdtemp(3)`), for one test.
///
/// - Important: Call ``remove()`` when done (teardown never depends on `deinit`).
public final class TemporaryDirectory: Sendable {
    /// The directory's absolute path.
    public let path: String

    /// The directory as a file URL.
    public var url: URL { URL(fileURLWithPath: path, isDirectory: true) }

    /// Creates `/tmp/<prefix>-XXXXXX`.
    public init(prefix: String = "cairn-test") throws {
        var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
        let created = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        guard let created else { throw FileSystemTestError("mkdtemp", path: Array("/tmp/\(prefix)".utf8)) }
        path = String(cString: created)
    }

    /// `path/name`.
    public func appending(_ name: String) -> String { path + "/" + name }

    /// `url/name` as a file URL.
    public func url(appending name: String) -> URL { URL(fileURLWithPath: appending(name)) }

    /// Removes the directory and everything in it.
    public func remove() {
        RawFileSystem.removeTree(Array(path.utf8))
    }
}
