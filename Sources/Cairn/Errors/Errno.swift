import Foundation
import Glibc

extension CairnError {
    /// A POSIX `errno` value: why a system call failed.
    ///
    /// A ``CairnError`` whose cause is a failed system call carries it as
    /// ``CairnError/Cause/errno(_:)``. The common values have names (those of swift-system's
    /// `Errno`; each one's doc line gives its C name), and any other value compares by
    /// ``rawValue``:
    /// ```swift
    /// switch error.underlyingCause {
    /// case .errno(.noSpace)?, .errno(.diskQuotaExceeded)?: print("the disk is full")
    /// case .errno(.permissionDenied)?, .errno(.notPermitted)?: print("not allowed")
    /// default: print(error)
    /// }
    /// ```
    public struct Errno: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The C value (`ENOENT` is 2 on Linux).
        public let rawValue: Int32

        /// The `errno` value `rawValue`.
        public init(rawValue: Int32) { self.rawValue = rawValue }

        /// What `strerror(3)` says, for example `No such file or directory` (the text
        /// ``CairnError/cause`` holds for this value).
        public var description: String {
            guard let text = strerror(rawValue) else { return "errno \(rawValue)" }
            return String(cString: text)
        }

        /// `EPERM`: the operation is not permitted (an owner or capability check failed).
        public static let notPermitted = Errno(rawValue: EPERM)
        /// `ENOENT`: no such file or directory.
        public static let noSuchFileOrDirectory = Errno(rawValue: ENOENT)
        /// `EINTR`: a signal interrupted the call.
        public static let interrupted = Errno(rawValue: EINTR)
        /// `EIO`: an input/output error of the device.
        public static let ioError = Errno(rawValue: EIO)
        /// `EBADF`: the file descriptor is not open (or not open for this operation).
        public static let badFileDescriptor = Errno(rawValue: EBADF)
        /// `ENOMEM`: the kernel is out of memory.
        public static let noMemory = Errno(rawValue: ENOMEM)
        /// `EACCES`: the file's permissions refuse the access.
        public static let permissionDenied = Errno(rawValue: EACCES)
        /// `EBUSY`: the device or resource is busy.
        public static let resourceBusy = Errno(rawValue: EBUSY)
        /// `EEXIST`: the file exists.
        public static let fileExists = Errno(rawValue: EEXIST)
        /// `EXDEV`: a link or rename across file systems.
        public static let improperLink = Errno(rawValue: EXDEV)
        /// `ENOTDIR`: a component of the path is not a directory.
        public static let notDirectory = Errno(rawValue: ENOTDIR)
        /// `EISDIR`: the file is a directory.
        public static let isDirectory = Errno(rawValue: EISDIR)
        /// `EINVAL`: an invalid argument.
        public static let invalidArgument = Errno(rawValue: EINVAL)
        /// `EMFILE`: the process has too many open files.
        public static let tooManyOpenFiles = Errno(rawValue: EMFILE)
        /// `EFBIG`: the file would grow beyond what the file system or the process limit allows.
        public static let fileTooLarge = Errno(rawValue: EFBIG)
        /// `ENOSPC`: no space left on the device.
        public static let noSpace = Errno(rawValue: ENOSPC)
        /// `EROFS`: the file system is read-only.
        public static let readOnlyFileSystem = Errno(rawValue: EROFS)
        /// `EPIPE`: the other end of a pipe or socket is closed.
        public static let brokenPipe = Errno(rawValue: EPIPE)
        /// `ENAMETOOLONG`: a file name or the path is too long.
        public static let fileNameTooLong = Errno(rawValue: ENAMETOOLONG)
        /// `ENOTEMPTY`: the directory is not empty.
        public static let directoryNotEmpty = Errno(rawValue: ENOTEMPTY)
        /// `ELOOP`: too many symbolic links, or a link where `O_NOFOLLOW` refuses one.
        public static let tooManySymbolicLinkLevels = Errno(rawValue: ELOOP)
        /// `EOPNOTSUPP` (`ENOTSUP` on Linux): the operation is not supported.
        public static let notSupported = Errno(rawValue: EOPNOTSUPP)
        /// `EDQUOT`: the user's disk quota is exceeded.
        public static let diskQuotaExceeded = Errno(rawValue: EDQUOT)
    }
}

/// The module's short name for ``CairnError/Errno``.
package typealias Errno = CairnError.Errno

extension CairnError.Errno {
    /// The calling thread's current `errno`.
    package static var current: Errno { Errno(rawValue: errno) }

    /// The `errno` a Foundation error carries: an error of `NSPOSIXErrorDomain`, or one under a
    /// `FileManager` or `FileHandle` error (its `NSUnderlyingErrorKey`); nil for any other error.
    package init?(foundationError error: any Error) {
        let outer = error as NSError
        // The underlying error may be stored as a Swift `POSIXError`, which `as? NSError` misses.
        let posix =
            outer.domain == NSPOSIXErrorDomain ? outer : (outer.userInfo[NSUnderlyingErrorKey] as? any Error).map { $0 as NSError }
        guard let posix, posix.domain == NSPOSIXErrorDomain, let value = Int32(exactly: posix.code) else { return nil }
        self.init(rawValue: value)
    }

    /// `strerror(3)` text (``description``).
    package var message: String { description }

    /// A ``CairnError`` with code `.notFound` for `ENOENT`, `.alreadyExists` for `EEXIST`, and
    /// `.io` otherwise (a full disk, `EFBIG` and `EDQUOT` included), whose cause is this errno:
    /// its text (`strerror(3)`) and ``CairnError/Cause/errno(_:)``.
    package func error(_ what: String, path: String? = nil, offset: UInt64? = nil) -> CairnError {
        let code: CairnError.Code
        switch rawValue {
        case ENOENT: code = .notFound
        case EEXIST: code = .alreadyExists
        default: code = .io
        }
        return error(code, what, path: path, offset: offset)
    }

    /// A ``CairnError`` with `code` whose cause is this errno: its text (`strerror(3)`) and
    /// ``CairnError/Cause/errno(_:)``.
    package func error(_ code: CairnError.Code, _ what: String, path: String? = nil, offset: UInt64? = nil) -> CairnError {
        CairnError(code, what, path: path, offset: offset, cause: message, underlyingCause: .errno(self))
    }
}
