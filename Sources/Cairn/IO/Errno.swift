import Glibc

/// A POSIX `errno` value.
package struct Errno: Equatable, Sendable {
    package let rawValue: Int32

    package init(rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's current `errno`.
    package static var current: Errno { Errno(rawValue: errno) }

    /// `strerror(3)` text.
    package var message: String {
        guard let text = strerror(rawValue) else { return "errno \(rawValue)" }
        return String(cString: text)
    }

    /// A ``CairnError`` with code `.notFound` for `ENOENT`, `.alreadyExists` for `EEXIST`, and
    /// `.io` otherwise (a full disk, `EFBIG` and `EDQUOT` included), whose cause is this errno's
    /// text (`strerror(3)`).
    package func error(_ what: String, path: String? = nil, offset: UInt64? = nil) -> CairnError {
        let code: CairnError.Code
        switch rawValue {
        case ENOENT: code = .notFound
        case EEXIST: code = .alreadyExists
        default: code = .io
        }
        return CairnError(code, what, path: path, offset: offset, cause: message)
    }
}
