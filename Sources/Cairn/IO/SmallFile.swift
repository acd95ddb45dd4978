import Glibc

/// A small file read whole, with a hard limit: key files, signatures, password files.
package enum SmallFile {
    /// The bytes of the file at `path`, which must hold at most `limit` bytes.
    ///
    /// - Parameters:
    ///   - what: what the file is, for the error ("public key file").
    ///   - ownerOnly: a secret: a regular file its group or others may read is refused, as ssh
    ///     refuses such a key ("permissions 0644 for 'KEY' are too open", ``isTooOpen(_:)``). The
    ///     mode is that of the file opened (`fstat(2)`), not of whatever the path names a moment
    ///     later; a pipe or a terminal (`/dev/stdin`, `<(…)`) is not a file to protect.
    /// - Throws: ``CairnError`` naming `path`: `.notFound` or `.io` when it cannot be opened or
    ///   read, `.limitExceeded` when it holds more than `limit` bytes (nothing more is read),
    ///   `.invalidArgument` for a secret others may read.
    package static func read(_ path: String, limit: Int, what: String, ownerOnly: Bool = false) throws(CairnError) -> [UInt8] {
        let descriptor = try FileDescriptor.open(path, flags: O_RDONLY)
        return try descriptor.closeAfter { () throws(CairnError) -> [UInt8] in
            var status = stat()
            if ownerOnly, fstat(descriptor.rawValue, &status) == 0, status.st_mode & S_IFMT == S_IFREG, status.st_mode & 0o077 != 0 {
                let digits = String(status.st_mode & 0o7777, radix: 8)
                throw CairnError(
                    .invalidArgument,
                    "permissions \(String(repeating: "0", count: max(0, 4 - digits.count)) + digits) for '\(path)'\(tooOpenMarker)"
                        + "the \(what) may be read by its group or others; chmod 600 it", path: path)
            }
            // Read in blocks until the end, whatever the file says its size is (a pipe says 0),
            // and stop as soon as the limit is passed.
            let block = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)
            defer { block.deallocate() }
            var bytes: [UInt8] = []
            while true {
                let count = try descriptor.read(into: block)
                if count == 0 { return bytes }
                bytes += block[..<count]
                guard bytes.count <= limit else {
                    throw CairnError(.limitExceeded, "too large for \("aeiou".contains(what.first ?? "x") ? "an" : "a") \(what): more than \(limit) bytes", path: path)
                }
            }
        }
    }
}

extension SmallFile {
    /// What ``read(_:limit:what:ownerOnly:)`` says of a secret others may read, after its mode and path.
    private static let tooOpenMarker = " are too open: "

    /// Whether `error` is ``read(_:limit:what:ownerOnly:)``'s refusal of a secret file its group or
    /// others may read (the command line's exit 2, `Spec/0003-command-line.md §14`).
    package static func isTooOpen(_ error: CairnError) -> Bool {
        error.code == .invalidArgument && error.message.hasPrefix("permissions ") && error.message.contains(tooOpenMarker)
    }

    /// Writes `bytes` as the file `path`, which appears only complete: a temporary name beside
    /// it (mode `mode`, `O_EXCL`), `fsync(2)`, then `rename(2)` over `path` when `replacing`, else
    /// `renameat2(2)` with `RENAME_NOREPLACE`, so an existing file is never replaced.
    ///
    /// - Throws: ``CairnError`` naming `path`: `.alreadyExists` when it exists and not
    ///   `replacing` (nothing is written), `.io` when writing fails (no temporary file is left),
    ///   `.invalidArgument` for an empty path.
    package static func write(_ bytes: [UInt8], to path: String, mode: mode_t, replacing: Bool) throws(CairnError) {
        guard !path.isEmpty else { throw CairnError(.invalidArgument, "an empty file name: name the file to write") }
        let temporary = path + ".\(getpid()).tmp"
        do throws(CairnError) {
            let descriptor: FileDescriptor
            do throws(CairnError) {
                descriptor = try FileDescriptor.open(temporary, flags: O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: mode)
            } catch where error.code != .alreadyExists {
                // Named as the file asked for: the temporary name is this function's business.
                throw CairnError(error.code, "cannot create", path: path, cause: error.cause, underlyingCause: error.underlyingCause)
            }
            do throws(CairnError) {
                try descriptor.closeAfter { () throws(CairnError) in
                    // The mode is set whatever the umask: a secret key stays 0600.
                    guard fchmod(descriptor.rawValue, mode) == 0 else { throw Errno.current.error("cannot set the mode", path: temporary) }
                    try descriptor.writeAll(bytes)
                    try descriptor.sync()
                }
                if replacing {
                    try FileSystem.rename(Array(temporary.utf8), to: Array(path.utf8), display: path)
                } else {
                    try FileSystem.renameNoReplace(Array(temporary.utf8), in: nil, to: Array(path.utf8), in: nil, display: path)
                }
            } catch {
                unlink(temporary)
                throw error
            }
        } catch where error.code == .alreadyExists {
            throw CairnError(.alreadyExists, "already exists; refusing to replace it", path: path)
        }
    }
}
