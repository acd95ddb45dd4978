import Glibc
import Synchronization

/// Closes descriptors without dropping the POSIX record locks this process holds.
///
/// POSIX advisory record locks (`fcntl(2)` `F_SETLK`, what SQLite's unix VFS takes on a
/// database file) belong to the process and the file, not to a descriptor: closing *any*
/// descriptor of the file drops every such lock the process holds on it
/// (<https://www.sqlite.org/howtocorrupt.html> §2.2). An app that exports its own open database
/// in-process holds them through its connection; if Cairn closed its descriptor of the database,
/// another process would see the app's connection as gone and could, for example, checkpoint and
/// delete the `-wal` the app still writes to.
///
/// So a descriptor of a file the process holds a record lock on is not closed but kept here, and
/// closed by a later ``close(_:)`` once the process holds no lock on its file (SQLite's unix VFS
/// does the same with its own descriptors). Whether the process holds a lock is asked of the
/// kernel with an open file description lock probe (`F_OFD_GETLK` over the whole file, which
/// conflicts with the process's own record locks and names the holder's pid); when the probe
/// names another process, `/proc/locks` settles it, and when neither can answer the descriptor
/// is kept.
package enum ProcessRecordLocks {
    /// Descriptors kept open because the process held a record lock on their file.
    private static let kept = Mutex<[FileDescriptor]>([])

    /// `F_OFD_GETLK` (`<fcntl.h>` under `_GNU_SOURCE`, Linux 3.15 and later).
    private static let ofdGetLock: Int32 = 36

    /// Closes `file`, or keeps it open while this process holds a record lock on its file; first
    /// closes the kept descriptors whose locks are gone.
    package static func close(_ file: FileDescriptor) {
        let ready = kept.withLock { list in
            let split = list.partition { !holdsLock(on: $0) }
            let ready = Array(list[split...])
            list.removeSubrange(split...)
            return ready
        }
        for descriptor in ready { _ = try? descriptor.close() }
        if holdsLock(on: file) {
            kept.withLock { $0.append(file) }
        } else {
            _ = try? file.close()
        }
    }

    /// How many descriptors are kept open (for tests).
    package static var keptCount: Int { kept.withLock { $0.count } }

    /// Whether this process holds a POSIX record lock on any byte of `file`'s file.
    package static func holdsLock(on file: FileDescriptor) -> Bool {
        var probe = flock()
        probe.l_type = Int16(F_WRLCK)
        probe.l_whence = Int16(SEEK_SET)
        probe.l_start = 0
        probe.l_len = 0
        guard fcntl(file.rawValue, ofdGetLock, &probe) == 0 else { return listedLock(on: file) ?? true }
        if probe.l_type == Int16(F_UNLCK) { return false }
        if probe.l_pid == getpid() { return true }
        // The probe names one conflicting lock; another process's may hide this one's.
        return listedLock(on: file) ?? true
    }

    /// Whether `/proc/locks` lists a POSIX lock of this process on `file`'s file (lines
    /// `N: POSIX ADVISORY READ|WRITE <pid> <major hex>:<minor hex>:<inode> <start> <end>`); nil
    /// when it cannot be read.
    private static func listedLock(on file: FileDescriptor) -> Bool? {
        guard let status = try? file.status(), let table = try? FileDescriptor.open("/proc/locks", flags: O_RDONLY) else { return nil }
        defer { _ = try? table.close() }
        var text: [UInt8] = []
        var block = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = block.withUnsafeMutableBytes { (try? table.read(into: $0)) ?? -1 }
            if count < 0 { return nil }
            if count == 0 { break }
            text += block[0..<count]
        }
        let device = status.device
        let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~0xfff)
        let minor = (device & 0xff) | ((device >> 12) & ~0xff)
        let pid = String(getpid())
        for line in text.split(separator: UInt8(ascii: "\n")) {
            let fields = line.split(separator: UInt8(ascii: " ")).map { String(decoding: $0, as: UTF8.self) }
            guard fields.count >= 6, fields[1] == "POSIX", fields[4] == pid else { continue }
            let identity = fields[5].split(separator: ":")
            guard identity.count == 3, UInt64(identity[0], radix: 16) == major, UInt64(identity[1], radix: 16) == minor,
                UInt64(identity[2]) == status.inode
            else { continue }
            return true
        }
        return false
    }
}
