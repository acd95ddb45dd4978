import Glibc

/// A set of paths (raw bytes), each with a one-byte value, held compactly: the bytes of every
/// path in one arena and an open-addressing hash table of indices, instead of a `Set` or
/// `Dictionary` of ``PathKey`` holding one heap block per path (issue 9: for 100,000 files
/// the path sets of `create` and `extract` took about 11 MiB each of an 80 MiB peak RSS target).
///
/// In memory only. Removal leaves the path's bytes in the arena (tombstoned); it is rare (a file
/// left out part way).
///
/// A slot holds the path's index and 27 bits of its hash (its ``tag(_:)``), which are also
/// where its probe sequence starts: a probe reads the bytes of almost no path but the one it
/// looks for, and growing places the paths again without hashing them (up to 2²⁷ slots;
/// beyond, they are hashed again).
///
/// - Complexity: O(path length) expected per operation; about 2 words, a byte and the path's
///   bytes per path. At most 2³⁶ paths (far beyond any memory: their starts alone would take
///   512 GiB).
package struct PathTable: Sendable {
    /// The bytes of every path inserted, one after another.
    private var arena: [UInt8] = []
    /// Per path, by insertion: where its bytes start in ``arena`` (they end where the next
    /// path's start, since the arena is only appended to).
    private var starts: [Int] = []
    private var values: [UInt8] = []
    /// Open addressing, linear probing: ``empty``, ``removed``, or a path's index into
    /// ``starts`` (bits 0–35) with its hash's ``tag(_:)`` (bits 36–62).
    private var slots: [Int] = []
    private var used = 0
    private var removedCount = 0
    private static let empty = -1
    private static let removed = -2
    private static let indexBits = 36
    /// Tables up to this many slots start probes at the tag's low bits, so growing can place a
    /// path from its slot alone.
    private static let tagSlots = 1 << 27
    private static let indexMask = (1 << indexBits) - 1

    package init() {}

    /// The number of paths in the table.
    package var count: Int { used - removedCount }

    /// Whether `path` is in the table.
    package func contains(_ path: [UInt8]) -> Bool { value(of: path) != nil }

    /// The value stored with `path`, or nil when the path is not in the table.
    package func value(of path: [UInt8]) -> UInt8? {
        guard let slot = find(path, hash: Self.hash(path)).found else { return nil }
        return values[slots[slot] & Self.indexMask]
    }

    /// Adds `path` with `value` unless it is in the table already (whose value is then kept).
    ///
    /// - Returns: whether the path was added.
    @discardableResult
    package mutating func insert(_ path: [UInt8], value: UInt8 = 0) -> Bool {
        if (used + 1) * 2 > slots.count { grow() }
        let hash = Self.hash(path)
        let probe = find(path, hash: hash)
        if probe.found != nil { return false }
        let index = starts.count
        starts.append(arena.count)
        values.append(value)
        arena.append(contentsOf: path)
        slots[probe.free] = (index & Self.indexMask) | Self.tag(hash)
        used += 1
        return true
    }

    /// Removes `path` if it is in the table.
    package mutating func remove(_ path: [UInt8]) {
        guard let slot = find(path, hash: Self.hash(path)).found else { return }
        slots[slot] = Self.removed
        removedCount += 1
    }

    /// The slot holding `path`, whose ``hash(_:)`` is `hash`, if any, and the slot an insertion
    /// would use (the first removed or empty one on its probe sequence). `slots` is never full
    /// (at most half is used).
    private func find(_ path: [UInt8], hash: UInt64) -> (found: Int?, free: Int) {
        guard !slots.isEmpty else { return (nil, 0) }
        let mask = slots.count - 1
        let tag = Self.tag(hash)
        var slot = Self.start(hash, slots: slots.count)
        var free: Int?
        while true {
            let held = slots[slot]
            if held == Self.empty { return (nil, free ?? slot) }
            if held == Self.removed {
                if free == nil { free = slot }
            } else if held & ~Self.indexMask == tag, matches(held & Self.indexMask, path) {
                return (slot, free ?? slot)
            }
            slot = (slot + 1) & mask
        }
    }

    /// The length of the path inserted `index`th.
    private func length(_ index: Int) -> Int {
        (index + 1 < starts.count ? starts[index + 1] : arena.count) - starts[index]
    }

    private func matches(_ index: Int, _ path: [UInt8]) -> Bool {
        guard length(index) == path.count else { return false }
        guard !path.isEmpty else { return true }
        let start = starts[index]
        return arena.withUnsafeBytes { raw in
            path.withUnsafeBytes { other in
                // Same length, checked above; memcmp, not a generic element loop.
                guard let base = raw.baseAddress, let bytes = other.baseAddress else { return false }
                return memcmp(base + start, bytes, other.count) == 0
            }
        }
    }

    /// Doubles the slots (at least 16) and places every path that is not removed again.
    private mutating func grow() {
        let capacity = Swift.max(16, slots.count * 2)
        var fresh = [Int](repeating: Self.empty, count: capacity)
        let mask = capacity - 1
        for slot in slots where slot >= 0 {
            var position: Int
            if capacity <= Self.tagSlots {
                position = (slot >> Self.indexBits) & mask
            } else {
                let index = slot & Self.indexMask
                let start = starts[index]
                let hash = arena.withUnsafeBytes { Self.hash(UnsafeRawBufferPointer(rebasing: $0[start..<(start + length(index))])) }
                position = Self.start(hash, slots: capacity)
            }
            while fresh[position] != Self.empty { position = (position + 1) & mask }
            fresh[position] = slot
        }
        slots = fresh
        used -= removedCount
        removedCount = 0
    }

    /// The standard library's seeded hash of the path's bytes (seeded per process, so paths from
    /// an archive cannot be chosen to collide).
    private static func hash(_ path: [UInt8]) -> UInt64 {
        path.withUnsafeBytes { hash($0) }
    }

    private static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var hasher = Hasher()
        hasher.combine(bytes: bytes)
        return UInt64(bitPattern: Int64(hasher.finalize()))
    }

    /// Bits 37–63 of `hash`, in place in a slot (bits 36–62; bit 63 stays clear, so a slot
    /// holding a path is never ``empty`` or ``removed``).
    private static func tag(_ hash: UInt64) -> Int {
        Int(truncatingIfNeeded: (hash >> 37) << UInt64(indexBits))
    }

    /// Where the probe sequence of `hash` starts in a table of `slots` slots (a power of two):
    /// the tag's low bits up to ``tagSlots``, the hash's low bits beyond.
    private static func start(_ hash: UInt64, slots: Int) -> Int {
        let mask = slots - 1
        return slots <= tagSlots ? Int(truncatingIfNeeded: hash >> 37) & mask : Int(truncatingIfNeeded: hash) & mask
    }
}
