/// A block of bytes in memory that one side fills and then hands to another whole (a fetch's
/// writer thread to its verifier, a verifier's reader to its checking tasks): the bytes
/// `start ..< end` of ``bytes``, ``capacity`` bytes of room, allocated once and reused.
///
/// - Important: only one side touches a block at a time: the one that fills it, then (after a
///   hand-over through a lock or a task's start) those that read it, until it is given back
///   (``ByteBlockSource/recycle(_:)``) and filled again. That discipline, not a lock, makes it
///   `Sendable`.
package final class ByteBlock: @unchecked Sendable {
    /// The memory, ``capacity`` bytes, 64-byte aligned.
    package let bytes: UnsafeMutableRawBufferPointer
    /// Where the valid bytes start and end in ``bytes``.
    package var start = 0
    package var end = 0

    /// - Parameter capacity: bytes of room (at least 1).
    package init(capacity: Int) {
        bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, capacity), alignment: 64)
    }

    deinit { bytes.deallocate() }

    package var capacity: Int { bytes.count }
    /// Bytes of room after ``end``.
    package var room: Int { bytes.count - end }
    /// The valid bytes.
    package var valid: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: bytes[start..<end]) }

    /// Copies `source` after ``end`` (at most ``room`` bytes of it) and returns how many were copied.
    package func append(_ source: UnsafeRawBufferPointer) -> Int {
        let n = min(room, source.count)
        guard n > 0, let from = source.baseAddress, let to = bytes.baseAddress else { return 0 }
        (to + end).copyMemory(from: from, byteCount: n)
        end += n
        return n
    }
}
