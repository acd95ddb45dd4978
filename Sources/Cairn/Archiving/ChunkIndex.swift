/// The archive writer's dedup index: chunk id → index in the manifest's chunk table, keyed by
/// the id's first 8 bytes (12 bytes a slot instead of a `[Digest: UInt32]`'s 36; issue 9's peak
/// RSS for 100,000 files), the full id checked against the writer's id of every chunk; the rare
/// ids sharing their first 8 bytes with another id go to a small dictionary keyed by the full
/// id.
///
/// Every method takes `ids`, the id of every chunk by index (the writer's `chunkIDs`); every
/// index stored must name the same id in it.
struct ChunkIndex {
    private var byPrefix: [UInt64: UInt32] = [:]
    private var collisions: [Digest: UInt32] = [:]

    /// The index stored for `id`, if any.
    func lookup(_ id: Digest, in ids: [Digest]) -> UInt32? {
        if let index = byPrefix[Self.key(id)], Int(index) < ids.count, ids[Int(index)] == id { return index }
        return collisions.isEmpty ? nil : collisions[id]
    }

    /// Stores `index` for `id` (replacing the index stored for it); `ids[index]` is `id`.
    mutating func set(_ id: Digest, _ index: UInt32, in ids: [Digest]) {
        let key = Self.key(id)
        // One probe for a new id; a colliding one puts the other id's index back.
        if let existing = byPrefix.updateValue(index, forKey: key), Int(existing) < ids.count, ids[Int(existing)] != id {
            byPrefix[key] = existing
            collisions[id] = index
        } else if !collisions.isEmpty {
            collisions[id] = nil
        }
    }

    /// Forgets `id`; `ids` still holds the indices stored.
    mutating func remove(_ id: Digest, in ids: [Digest]) {
        let key = Self.key(id)
        if let existing = byPrefix[key], Int(existing) < ids.count, ids[Int(existing)] == id { byPrefix[key] = nil }
        if !collisions.isEmpty { collisions[id] = nil }
    }

    private static func key(_ id: Digest) -> UInt64 {
        id.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
    }
}
