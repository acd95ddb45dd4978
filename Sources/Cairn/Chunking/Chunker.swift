/// Finds chunk boundaries: FastCDC with normalized chunking level 2, or fixed-size cuts.
///
/// The algorithm is `Spec/0002-chunking.md §4–§5` (after Xia et al., "FastCDC: a Fast and
/// Efficient Content-Defined Chunking Approach for Data Deduplication", USENIX ATC 2016). The
/// gear table is copied into memory this object owns, so the hot loop reads it through a plain
/// pointer instead of a lazily initialised global.
///
/// The policy should have passed ``ChunkingPolicy/validate()``. An invalid policy does not trap:
/// its values are clamped into range, which gives boundaries no valid policy defines.
package final class Chunker {
    /// Scan progress inside a chunk whose end is not known yet, so that a caller that receives
    /// more bytes does not hash the same bytes again.
    package struct ScanState: Sendable {
        /// The number of leading bytes of the chunk already hashed (or skipped, below minimum).
        package var position = 0
        /// The gear hash after those bytes.
        package var hash: UInt64 = 0

        /// A state at a chunk start.
        package init() {}
    }

    /// The policy this chunker applies.
    package let policy: ChunkingPolicy
    /// The smallest chunk in bytes, except the last one of an input.
    package let minimum: Int
    /// The average (content-defined) or exact (fixed) chunk length in bytes.
    package let average: Int
    /// The largest chunk in bytes.
    package let maximum: Int

    private let isContentDefined: Bool
    /// Top `log2(average) + 2` bits set: the harder mask, before `average` bytes.
    private let maskS: UInt64
    /// Top `log2(average) - 2` bits set: the easier mask, from `average` bytes on.
    private let maskL: UInt64
    private let gear: UnsafeMutablePointer<UInt64>

    /// Creates a chunker for a policy.
    ///
    /// - Parameters:
    ///   - policy: A policy that passed ``ChunkingPolicy/validate()``.
    ///   - keying: The archive's keys, whose gear table it uses (`Spec/0004-trusted-archives.md
    ///     §6.7`); nil for the published table (`Spec/0002-chunking.md §3`).
    package init(policy: ChunkingPolicy, keying: ChunkKeying?) {
        self.policy = policy
        let maximum = min(max(policy.maximum, 1), ChunkingPolicy.maximumChunkLength)
        let average = min(max(policy.average, 1), maximum)
        self.maximum = maximum
        self.average = average
        self.minimum = min(max(policy.minimum, 0), average)
        self.isContentDefined = policy.isContentDefined
        // b = log2(average); for a valid policy 8 <= b <= 23.
        let b = Int.bitWidth - 1 - average.leadingZeroBitCount
        self.maskS = Self.topBits(b + 2)
        self.maskL = Self.topBits(b - 2)
        gear = UnsafeMutablePointer<UInt64>.allocate(capacity: 256)
        (keying?.gearValues ?? GearTable.values).withUnsafeBufferPointer { values in
            for index in 0..<256 {
                (gear + index).initialize(to: index < values.count ? values[index] : 0)
            }
        }
    }

    deinit {
        gear.deinitialize(count: 256)
        gear.deallocate()
    }

    /// A `UInt64` with its top `count` bits set (bits 63 down to 64 − `count`).
    private static func topBits(_ count: Int) -> UInt64 {
        let clamped = min(max(count, 1), 63)
        return ~UInt64(0) &<< UInt64(64 - clamped)
    }

    /// The length of the chunk that starts at the beginning of `buffer`, if the bytes given
    /// determine it.
    ///
    /// - Parameters:
    ///   - buffer: Bytes starting at a chunk start.
    ///   - isFinal: Whether `buffer` holds all remaining bytes of the input.
    /// - Returns: The chunk length, between 1 and ``maximum``: a cut point was found, or
    ///   `buffer.count >= maximum`, or `isFinal` (then the rest of the input, up to ``maximum``,
    ///   is a chunk). `nil` when more bytes are needed, or when `buffer` is empty.
    /// - Complexity: O(min(`buffer.count`, ``maximum``)).
    package func nextChunkLength(in buffer: UnsafeRawBufferPointer, isFinal: Bool) -> Int? {
        var state = ScanState()
        return nextChunkLength(in: buffer, isFinal: isFinal, state: &state)
    }

    /// Like ``nextChunkLength(in:isFinal:)``, resuming a scan that an earlier call over a
    /// prefix of the same chunk left unfinished.
    ///
    /// - Parameters:
    ///   - buffer: Bytes starting at the same chunk start as the earlier calls, at least as many.
    ///   - isFinal: Whether `buffer` holds all remaining bytes of the input.
    ///   - state: `ScanState()` at a chunk start, then what the previous call for this chunk
    ///     left. Reset to `ScanState()` whenever a length is returned.
    /// - Returns: As ``nextChunkLength(in:isFinal:)``.
    package func nextChunkLength(
        in buffer: UnsafeRawBufferPointer, isFinal: Bool, state: inout ScanState
    ) -> Int? {
        let count = buffer.count
        guard count > 0, let base = buffer.baseAddress else { return nil }
        if count >= maximum {
            if !isContentDefined || count <= minimum {
                // Fixed size, or minimum == maximum: nothing to hash.
                state = ScanState()
                return maximum
            }
        } else if !isContentDefined || count <= minimum {
            guard isFinal else { return nil }
            state = ScanState()
            return count
        }

        // count > minimum here. Hash bytes [max(position, minimum), limit).
        let limit = min(count, maximum)
        let normal = min(average, limit)
        let gear = UnsafePointer(self.gear)
        var hash = state.hash
        var index = max(state.position, minimum)

        if index < normal {
            let found = Self.scan(
                base, gear, from: index, to: normal, mask: maskS, hash: &hash)
            if found >= 0 {
                state = ScanState()
                return found
            }
            index = normal
        }
        if index < limit {
            let found = Self.scan(base, gear, from: index, to: limit, mask: maskL, hash: &hash)
            if found >= 0 {
                state = ScanState()
                return found
            }
            index = limit
        }
        if count >= maximum || isFinal {
            state = ScanState()
            return limit
        }
        state.position = index
        state.hash = hash
        return nil
    }

    /// The gear-hash loop over `[start, end)`: returns the cut length (`i + 1` for the first
    /// `i` whose hash has no bit of `mask` set) or −1, leaving the running hash in `hash`.
    @inline(__always)
    private static func scan(
        _ bytes: UnsafeRawPointer, _ gear: UnsafePointer<UInt64>, from start: Int, to end: Int,
        mask: UInt64, hash: inout UInt64
    ) -> Int {
        var h = hash
        var i = start
        // Four bytes per iteration; the hash chain is one shift-add per byte.
        while i &+ 4 <= end {
            h = (h &<< 1) &+ gear[Int(bytes.load(fromByteOffset: i, as: UInt8.self))]
            if h & mask == 0 {
                hash = h
                return i &+ 1
            }
            h = (h &<< 1) &+ gear[Int(bytes.load(fromByteOffset: i &+ 1, as: UInt8.self))]
            if h & mask == 0 {
                hash = h
                return i &+ 2
            }
            h = (h &<< 1) &+ gear[Int(bytes.load(fromByteOffset: i &+ 2, as: UInt8.self))]
            if h & mask == 0 {
                hash = h
                return i &+ 3
            }
            h = (h &<< 1) &+ gear[Int(bytes.load(fromByteOffset: i &+ 3, as: UInt8.self))]
            if h & mask == 0 {
                hash = h
                return i &+ 4
            }
            i &+= 4
        }
        while i < end {
            h = (h &<< 1) &+ gear[Int(bytes.load(fromByteOffset: i, as: UInt8.self))]
            i &+= 1
            if h & mask == 0 {
                hash = h
                return i
            }
        }
        hash = h
        return -1
    }
}
