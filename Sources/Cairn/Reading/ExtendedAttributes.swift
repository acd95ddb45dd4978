import Glibc
internal import CLinux

/// An item's extended attributes on disk, as raw names and values, read on create and written
/// on extract (`Spec/0001-container-format.md §6.5`, `Spec/0003-command-line.md §3, §4`).
///
/// Collected: `user.*`, and `trusted.*` and `security.*` as far as the caller may read them
/// (`trusted.*` needs `CAP_SYS_ADMIN`), and POSIX ACLs through their `system.posix_acl_access`
/// and `system.posix_acl_default` attributes; other `system.*` names are file-system internals
/// and are left out. Nothing here follows a symlink: an open descriptor uses the `f*` calls
/// (`flistxattr(2)`, `fgetxattr(2)`, `fsetxattr(2)`), a name uses the `l*` calls on
/// `/proc/self/fd/N/NAME`, so only the last component is looked up by name and never followed.
///
/// Neither direction throws: a problem with one attribute is a warning naming the item and the
/// attribute, and the rest goes on.
package enum ExtendedAttributes {
    /// Where an item is.
    package enum Item {
        /// An open descriptor of a file or directory.
        case descriptor(FileDescriptor)
        /// `name` (one component, or a relative path whose components the caller created) in
        /// `directory` (nil: the current directory); the last component is not followed if it is
        /// a symlink.
        case name([UInt8], in: FileDescriptor?)
    }

    /// Whether create collects the attribute `name` (see the type's documentation).
    package static func isCollected(_ name: [UInt8]) -> Bool {
        name.starts(with: userPrefix) || name.starts(with: trustedPrefix) || name.starts(with: securityPrefix)
            || name == aclAccess || name == aclDefault
    }

    /// Reads an item's collected attributes in the order the file system lists them: one
    /// `listxattr` call when there are none, then one `getxattr` per attribute.
    ///
    /// Left out silently: names that are not collected (``isCollected(_:)``), a file system
    /// without extended attributes (`ENOTSUP`), an attribute removed meanwhile (`ENODATA`), and
    /// `trusted.*` or `security.*` attributes the caller may not read (`EPERM`, `EACCES`).
    /// Left out with a warning: any other failure, and what is over the format's limits
    /// (``withinLimits(_:display:)``).
    ///
    /// - Parameters:
    ///   - item: the file, directory or symlink.
    ///   - display: the item's path, for warnings; built only when the item has attributes.
    /// - Returns: the attributes (at most 128, names ≤ 255 bytes, values ≤ 65,536 bytes) and
    ///   the warnings, each naming `display` and the attribute.
    /// - Complexity: 1 system call for an item without attributes; 1 + n for n attributes
    ///   whose names take at most 1 KiB (2 more for a longer list). At
    ///   most 64 KiB of names (the kernel's `XATTR_LIST_MAX`) and 64 KiB per value are allocated.
    package static func read(_ item: Item, display displayPath: @autoclosure () -> String) -> (
        attributes: [ArchiveEntry.ExtendedAttribute], warnings: [CairnError]
    ) {
        let target = Target(item)
        var names: [UInt8] = []
        // Most lists are short: one call into a small buffer, and only a longer list takes a
        // size query first.
        var firstError: Errno?
        let firstCount = withUnsafeTemporaryAllocation(byteCount: smallListBytes, alignment: 1) { buffer in
            let got = target.list(buffer)
            if got < 0 {
                firstError = Errno.current
            } else if got > 0 {
                names = Array(UnsafeRawBufferPointer(rebasing: buffer[0..<min(got, buffer.count)]))
            }
            return got
        }
        if firstCount == 0 { return ([], []) }
        let display = displayPath()
        if let firstError, firstError.rawValue != ERANGE { return ([], listFailure(firstError, display: display)) }
        var attempts = 0
        while firstError != nil {
            let size = target.list(nil)
            if size == 0 { return ([], []) }
            guard size > 0 else { return ([], listFailure(Errno.current, display: display)) }
            guard size <= maximumListBytes else {
                return (
                    [],
                    [CairnError(.limitExceeded, "\(size) bytes of extended attribute names, over \(maximumListBytes); none archived", path: display)]
                )
            }
            names = [UInt8](repeating: 0, count: size)
            let got = names.withUnsafeMutableBytes { target.list($0) }
            if got >= 0 {
                names.removeSubrange(min(got, names.count)...)
                firstError = nil
                break
            }
            // The list grew between the two calls: ask for its size again, a few times.
            let error = Errno.current
            attempts += 1
            guard error.rawValue == ERANGE, attempts < 4 else { return ([], listFailure(error, display: display)) }
        }
        var attributes: [ArchiveEntry.ExtendedAttribute] = []
        var warnings: [CairnError] = []
        // One uninitialized buffer of the largest value the kernel holds (XATTR_SIZE_MAX, the
        // format's limit too): one call per attribute, and no 64 KiB memset per item.
        let value = UnsafeMutableRawBufferPointer.allocate(
            byteCount: FormatLimits.maximumExtendedAttributeValueLength, alignment: 1)
        defer { value.deallocate() }
        for name in names.split(separator: 0, omittingEmptySubsequences: true).map(Array.init) where isCollected(name) {
            let got = target.get(name, into: value)
            guard got >= 0 else {
                let error = Errno.current
                let privileged = name.starts(with: trustedPrefix) || name.starts(with: securityPrefix)
                switch error.rawValue {
                case ENODATA, ENOTSUP: continue
                case EPERM where privileged, EACCES where privileged: continue
                case ERANGE:
                    warnings.append(
                        CairnError(
                            .limitExceeded,
                            "extended attribute \(PathBytes.escaped(name)) is over \(FormatLimits.maximumExtendedAttributeValueLength) bytes; left out",
                            path: display))
                default:
                    warnings.append(error.error("cannot read extended attribute \(PathBytes.escaped(name)); left out", path: display))
                }
                continue
            }
            let bytes = Array(UnsafeRawBufferPointer(rebasing: value[0..<min(got, value.count)]))
            attributes.append(ArchiveEntry.ExtendedAttribute(name: name, value: bytes))
        }
        let (kept, over) = withinLimits(attributes, display: display)
        return (kept, warnings + over)
    }

    /// The attributes that fit the format (`Spec/0001-container-format.md §14`): names of 1 to
    /// 255 bytes, values of at most 65,536 bytes, the first 128 attributes. The writer refuses
    /// an entry past these (``ArchiveWriter/checkLimits(_:)``); this leaves the offending
    /// attributes out instead.
    ///
    /// - Returns: the attributes kept, in their order, and one `.limitExceeded` warning per
    ///   attribute left out, naming `display` and the attribute.
    package static func withinLimits(_ attributes: [ArchiveEntry.ExtendedAttribute], display: String) -> (
        kept: [ArchiveEntry.ExtendedAttribute], warnings: [CairnError]
    ) {
        var kept: [ArchiveEntry.ExtendedAttribute] = []
        var warnings: [CairnError] = []
        for attribute in attributes {
            let name = PathBytes.escaped(attribute.name)
            let problem: String? =
                if attribute.name.isEmpty || attribute.name.count > FormatLimits.maximumExtendedAttributeNameLength {
                    "extended attribute \(name) has a name of \(attribute.name.count) bytes, outside 1…\(FormatLimits.maximumExtendedAttributeNameLength)"
                } else if attribute.value.count > FormatLimits.maximumExtendedAttributeValueLength {
                    "extended attribute \(name) is \(attribute.value.count) bytes, over the limit of \(FormatLimits.maximumExtendedAttributeValueLength)"
                } else if kept.count >= FormatLimits.maximumExtendedAttributes {
                    "extended attribute \(name) is past the limit of \(FormatLimits.maximumExtendedAttributes) per item"
                } else {
                    nil
                }
            if let problem {
                warnings.append(CairnError(.limitExceeded, problem + "; left out", path: display))
            } else {
                kept.append(attribute)
            }
        }
        return (kept, warnings)
    }

    /// Sets an extracted item's attributes (`fsetxattr(2)` or `lsetxattr(2)`, creating or
    /// replacing each), after its content is written and before its mode is applied (a mode
    /// without the owner's write bit would refuse them). Does nothing when `attributes` is
    /// empty or ``ExtractionOptions/restoresExtendedAttributes`` is false.
    ///
    /// `security.capability` grants privileges, so, like the set-user-ID bit, it is restored
    /// only when the extracting process runs as root (effective user id 0); otherwise it is left
    /// out silently. Every refusal by the destination (`ENOTSUP`, `EPERM` for `trusted.*` as a
    /// user, `EACCES`, `ENOSPC`, `E2BIG`, ...) goes to ``ExtractionOptions/onWarning`` as an
    /// `.io` error naming `display` and the attribute; extraction goes on.
    ///
    /// - Parameters:
    ///   - attributes: the entry's attributes, in archive order.
    ///   - item: the extracted file, directory or symlink.
    ///   - display: the entry's path, for warnings.
    ///   - options: the extraction's options.
    package static func restore(
        _ attributes: [ArchiveEntry.ExtendedAttribute], to item: Item, display: String, options: ExtractionOptions
    ) {
        guard !attributes.isEmpty, options.restoresExtendedAttributes else { return }
        let target = Target(item)
        let isRoot = geteuid() == 0
        for attribute in attributes {
            if attribute.name == capability, !isRoot { continue }
            guard target.set(attribute.name, value: attribute.value) != 0 else { continue }
            options.onWarning?(
                Errno.current.error("cannot set extended attribute \(PathBytes.escaped(attribute.name))", path: display))
        }
    }

    // MARK: - System calls

    private static let userPrefix = Array("user.".utf8)
    private static let trustedPrefix = Array("trusted.".utf8)
    private static let securityPrefix = Array("security.".utf8)
    private static let aclAccess = Array("system.posix_acl_access".utf8)
    private static let aclDefault = Array("system.posix_acl_default".utf8)
    private static let capability = Array("security.capability".utf8)
    /// The kernel lists at most `XATTR_LIST_MAX` (64 KiB) of names; anything larger is refused
    /// before allocating.
    private static let maximumListBytes = 65536
    /// The first listing goes into a buffer of this many bytes on the stack.
    private static let smallListBytes = 1024

    private static func listFailure(_ error: Errno, display: String) -> [CairnError] {
        // A file system without extended attributes has nothing to archive.
        if error.rawValue == ENOTSUP || error.rawValue == ENOSYS { return [] }
        return [error.error("cannot list extended attributes; none archived", path: display)]
    }

    /// An item resolved to a descriptor or a NUL-free path for the `l*` calls.
    private struct Target {
        var descriptor: Int32 = -1
        var path: [UInt8] = []

        init(_ item: Item) {
            switch item {
            case .descriptor(let fd):
                descriptor = fd.rawValue
            case .name(let name, nil):
                path = name
            case .name(let name, let directory?):
                path = Array("/proc/self/fd/\(directory.rawValue)/".utf8) + name
            }
        }

        /// `flistxattr(2)`/`llistxattr(2)`; nil buffer: the size needed.
        func list(_ buffer: UnsafeMutableRawBufferPointer?) -> Int {
            let base = buffer?.baseAddress?.assumingMemoryBound(to: CChar.self)
            let count = buffer?.count ?? 0
            return retryOnInterrupt {
                descriptor >= 0 ? flistxattr(descriptor, base, count) : path.withNullTerminated { llistxattr($0, base, count) }
            }
        }

        /// `fgetxattr(2)`/`lgetxattr(2)` into `buffer`; the value's length or -1.
        func get(_ name: [UInt8], into buffer: UnsafeMutableRawBufferPointer) -> Int {
            name.withNullTerminated { n in
                retryOnInterrupt {
                    descriptor >= 0
                        ? fgetxattr(descriptor, n, buffer.baseAddress, buffer.count)
                        : path.withNullTerminated { lgetxattr($0, n, buffer.baseAddress, buffer.count) }
                }
            }
        }

        /// `fsetxattr(2)`/`lsetxattr(2)` with flags 0 (create or replace); 0 or -1.
        func set(_ name: [UInt8], value: [UInt8]) -> Int32 {
            name.withNullTerminated { n in
                value.withUnsafeBytes { v in
                    retryOnInterrupt {
                        descriptor >= 0
                            ? fsetxattr(descriptor, n, v.baseAddress, v.count, 0)
                            : path.withNullTerminated { lsetxattr($0, n, v.baseAddress, v.count, 0) }
                    }
                }
            }
        }
    }
}
