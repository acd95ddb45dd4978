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

    /// Creates `<base>/<prefix>-XXXXXX` (`base` defaults to `/tmp`; `/dev/shm` is a tmpfs).
    public init(prefix: String = "cairn-test", in base: String = "/tmp") throws {
        var template = Array("\(base)/\(prefix)-XXXXXX".utf8CString)
        let created = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        guard let created else { throw FileSystemTestError("mkdtemp", path: Array("\(base)/\(prefix)".utf8)) }
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
