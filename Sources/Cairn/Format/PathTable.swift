/// A set of paths (raw bytes), each with a one-byte value, held compactly: the bytes of every
/// path in one arena and an open-addressing hash table of indices, instead of a `Set` or
/// `Dictionary` of ``PathKey`` holding one heap block per path (issue 9: for 100,000 files
/// the path sets of `create` and `extract` took about 11 MiB each of an 80 MiB peak RSS target).
///
/// In memory only. Removal leaves the path's bytes in the arena (tombstoned); it is rare (a file
/// left out part way).
///
/// - Complexity: O(path length) expected per operation; about 2 words and the path's bytes per
///   path.
package struct PathTable: Sendable {
    /// The bytes of every path inserted, one after another.
    private var arena: [UInt8] = []
    /// Per path, by insertion: where its bytes start in ``arena`` (they end where the next
    /// path's start, since the arena is only appended to).
    private var starts: [Int] = []
    private var values: [UInt8] = []
    /// Open addressing, linear probing: ``empty``, ``removed``, or an index into ``starts``.
    private var slots: [Int] = []
    private var used = 0
    private var removedCount = 0
    private static let empty = -1
    private static let removed = -2

    package init() {}

    /// The number of paths in the table.
    package var count: Int { used - removedCount }

    /// Whether `path` is in the table.
    package func contains(_ path: [UInt8]) -> Bool { value(of: path) != nil }

    /// The value stored with `path`, or nil when the path is not in the table.
    package func value(of path: [UInt8]) -> UInt8? {
        guard let slot = find(path).found else { return nil }
        return values[slots[slot]]
    }

    /// Adds `path` with `value` unless it is in the table already (whose value is then kept).
    ///
    /// - Returns: whether the path was added.
    @discardableResult
    package mutating func insert(_ path: [UInt8], value: UInt8 = 0) -> Bool {
        if (used + 1) * 2 > slots.count { grow() }
        let probe = find(path)
        if probe.found != nil { return false }
        let index = starts.count
        starts.append(arena.count)
        values.append(value)
        arena.append(contentsOf: path)
        slots[probe.free] = index
        used += 1
        return true
    }

    /// Removes `path` if it is in the table.
    package mutating func remove(_ path: [UInt8]) {
        guard let slot = find(path).found else { return }
        slots[slot] = Self.removed
        removedCount += 1
    }

    /// The slot holding `path`, if any, and the slot an insertion would use (the first removed
    /// or empty one on its probe sequence). `slots` is never full (at most half is used).
    private func find(_ path: [UInt8]) -> (found: Int?, free: Int) {
        guard !slots.isEmpty else { return (nil, 0) }
        let mask = slots.count - 1
        var slot = Self.hash(path) & mask
        var free: Int?
        while true {
            let index = slots[slot]
            if index == Self.empty { return (nil, free ?? slot) }
            if index == Self.removed {
                if free == nil { free = slot }
            } else if matches(index, path) {
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
        let start = starts[index]
        return arena.withUnsafeBytes { raw in
            path.withUnsafeBytes { other in
                UnsafeRawBufferPointer(rebasing: raw[start..<(start + other.count)]).elementsEqual(other)
            }
        }
    }

    /// Doubles the slots (at least 16) and places every path that is not removed again.
    private mutating func grow() {
        let capacity = Swift.max(16, slots.count * 2)
        var fresh = [Int](repeating: Self.empty, count: capacity)
        let mask = capacity - 1
        for slot in slots where slot >= 0 {
            let start = starts[slot]
            var position = arena.withUnsafeBytes { Self.hash(UnsafeRawBufferPointer(rebasing: $0[start..<(start + length(slot))])) } & mask
            while fresh[position] != Self.empty { position = (position + 1) & mask }
            fresh[position] = slot
        }
        slots = fresh
        used -= removedCount
        removedCount = 0
    }

    private static func hash(_ path: [UInt8]) -> Int {
        path.withUnsafeBytes { hash($0) }
    }

    private static func hash(_ bytes: UnsafeRawBufferPointer) -> Int {
        var hasher = Hasher()
        hasher.combine(bytes: bytes)
        return hasher.finalize()
    }
}
