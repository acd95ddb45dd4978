import Glibc

/// FIFOs and device nodes (format 2.0 entry kinds 5–7, `Spec/0001 §6.3`), and checking that a
/// file system kept a modification time: the parts of extraction and archiving that `tar`
/// handles for special files, shared by every extractor.
package enum SpecialFiles {
    /// Linux's `dev_t` split into major and minor numbers (`major(3)`, `minor(3)`; glibc's
    /// encoding: 12 + 20 bits of major, 8 + 24 bits of minor).
    package static func split(_ device: UInt64) -> ArchiveEntry.Device {
        let major = UInt32(truncatingIfNeeded: ((device >> 8) & 0xFFF) | ((device >> 32) & ~UInt64(0xFFF)))
        let minor = UInt32(truncatingIfNeeded: (device & 0xFF) | ((device >> 12) & ~UInt64(0xFF)))
        return ArchiveEntry.Device(major: major, minor: minor)
    }

    /// The inverse of ``split(_:)`` (`makedev(3)`).
    package static func join(_ device: ArchiveEntry.Device) -> UInt64 {
        let major = UInt64(device.major)
        let minor = UInt64(device.minor)
        return (minor & 0xFF) | ((major & 0xFFF) << 8) | ((minor & ~UInt64(0xFF)) << 12) | ((major & ~UInt64(0xFFF)) << 32)
    }

    /// Creates the FIFO or device node `entry` as `name` in `directory` (mode 0o600 until its
    /// mode is applied): `mkfifoat(3)`, or `mknodat(2)` for a device, which only a process
    /// allowed to (`CAP_MKNOD`, normally root) may do.
    ///
    /// - Returns: false, after a warning to `options.onWarning` naming the entry, when a device
    ///   node was not created (not root, or the kernel refused); then nothing exists at `name`.
    /// - Throws: `CairnError` for any other failure (the name exists, the disk is full).
    package static func make(
        _ entry: ArchiveEntry, named name: [UInt8], in directory: FileDescriptor, options: ExtractionOptions
    ) throws(CairnError) -> Bool {
        if entry.kind == .fifo {
            let rc = name.withNullTerminated { mkfifoat(directory.rawValue, $0, 0o600) }
            guard rc == 0 else { throw Errno.current.error("cannot create FIFO", path: entry.path) }
            return true
        }
        guard entry.kind.isDevice, let device = entry.device else {
            throw CairnError(.unsupportedFileType, "entry kind \(entry.kind) cannot be extracted", path: entry.path)
        }
        guard geteuid() == 0 else {
            options.onWarning?(
                CairnError(.unsupportedFileType, "\(entry.kind.words) is created only when extracting as root; skipped", path: entry.path))
            return false
        }
        let type = entry.kind == .characterDevice ? S_IFCHR : S_IFBLK
        let rc = name.withNullTerminated { mknodat(directory.rawValue, $0, type | 0o600, dev_t(join(device))) }
        guard rc == 0 else {
            let errno = Errno.current
            if errno.rawValue == EPERM || errno.rawValue == EACCES {
                options.onWarning?(errno.error("\(entry.kind.words) was not created (the kernel refused); skipped", path: entry.path))
                return false
            }
            throw errno.error("cannot create \(entry.kind.words)", path: entry.path)
        }
        return true
    }

    /// Sets `entry`'s mode and modification time on `name`, after its content: the mode without
    /// set-ID bits (`Spec/0003 §11`), and a warning when the file system cannot hold the time.
    package static func finish(
        _ entry: ArchiveEntry, named name: [UInt8], in directory: FileDescriptor, options: ExtractionOptions
    ) throws(CairnError) {
        ExtendedAttributes.restore(entry.extendedAttributes, to: .name(name, in: directory), display: entry.path, options: options)
        try FileSystem.setExtractedPermissions(name, in: directory, mode: entry.permissions, display: entry.path)
        try setModificationTime(entry, named: name, in: directory, options: options)
    }

    /// `utimensat(2)` without following symlinks, then, for a time outside 1970–2038 (which
    /// file systems with 32-bit times clamp, and ext4 holds only up to 2446), a check of what
    /// the file system kept: a different time is a warning naming the file and both times, not
    /// a silent clamp (issue 9, item 2).
    package static func setModificationTime(
        _ entry: ArchiveEntry, named name: [UInt8], in directory: FileDescriptor, options: ExtractionOptions
    ) throws(CairnError) {
        try FileSystem.setModificationTime(name, in: directory, time: entry.modificationTime, display: entry.path)
        guard needsCheck(entry.modificationTime), let held = try? FileStatus.of(name, relativeTo: directory).modificationTime
        else { return }
        warnIfChanged(entry, held: held, options: options)
    }

    /// As ``setModificationTime(_:named:in:options:)`` through an open descriptor (`futimens(2)`).
    package static func setModificationTime(of file: FileDescriptor, _ entry: ArchiveEntry, options: ExtractionOptions) throws(CairnError) {
        try FileSystem.setModificationTime(of: file, time: entry.modificationTime)
        guard needsCheck(entry.modificationTime), let held = try? file.status().modificationTime else { return }
        warnIfChanged(entry, held: held, options: options)
    }

    private static func needsCheck(_ time: Timestamp) -> Bool { !(0..<(1 << 31)).contains(time.seconds) }

    private static func warnIfChanged(_ entry: ArchiveEntry, held: Timestamp, options: ExtractionOptions) {
        guard held != entry.modificationTime else { return }
        options.onWarning?(
            CairnError(
                .limitExceeded,
                "modification time \(entry.modificationTime) s cannot be held by this file system, which kept \(held) s",
                path: entry.path))
    }
}
