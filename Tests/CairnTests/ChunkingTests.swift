import Testing

@testable import Cairn

/// Content-defined and fixed-size chunking (`Spec/0002-chunking.md`).
@Suite("Chunking")
struct ChunkingTests {
    /// SplitMix64, the generator of the spec's test input (`§6`) and of all test data here.
    struct SeededBytes {
        var state: UInt64

        mutating func next() -> UInt64 {
            GearTable.splitMix64(&state)
        }

        /// `count` bytes: successive outputs written little-endian, the last one truncated.
        mutating func bytes(_ count: Int) -> [UInt8] {
            var result: [UInt8] = []
            result.reserveCapacity(count + 8)
            while result.count < count {
                let word = next()
                for shift in stride(from: 0, to: 64, by: 8) {
                    result.append(UInt8(truncatingIfNeeded: word >> UInt64(shift)))
                }
            }
            result.removeLast(result.count - count)
            return result
        }

        static func bytes(seed: UInt64, count: Int) -> [UInt8] {
            var generator = SeededBytes(state: seed)
            return generator.bytes(count)
        }
    }

    static let smallPolicy = ChunkingPolicy.contentDefined(
        minimum: 2048, average: 8192, maximum: 65536)

    static let policies: [ChunkingPolicy] = [
        .default,
        smallPolicy,
        .contentDefined(minimum: 64, average: 256, maximum: 1024),
        .contentDefined(minimum: 4096, average: 4096, maximum: 8192),
        .contentDefined(minimum: 1024, average: 1024, maximum: 1024),
        .fixed(size: 4096),
        .fixed(size: 1000),
    ]

    /// Chunk lengths of one whole input through `Chunker`.
    static func wholeLengths(_ data: [UInt8], _ policy: ChunkingPolicy) -> [Int] {
        let chunker = Chunker(policy: policy, keying: nil)
        return data.withUnsafeBytes { buffer in
            var lengths: [Int] = []
            var offset = 0
            while let length = chunker.nextChunkLength(
                in: UnsafeRawBufferPointer(rebasing: buffer[offset...]), isFinal: true)
            {
                lengths.append(length)
                offset += length
            }
            return lengths
        }
    }

    /// Chunk lengths through `StreamingChunker`, fed in slices of the given sizes (cycled).
    static func streamedLengths(
        _ data: [UInt8], _ policy: ChunkingPolicy, sliceSizes: (inout Int) -> Int
    ) -> [Int] {
        var streaming = StreamingChunker(policy: policy, keying: nil)
        var lengths: [Int] = []
        var counter = 0
        data.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let end = min(buffer.count, offset + sliceSizes(&counter))
                lengths += streaming.append(UnsafeRawBufferPointer(rebasing: buffer[offset..<end]))
                #expect(streaming.bufferedByteCount < policy.maximum)
                offset = end
            }
        }
        lengths += streaming.finish()
        return lengths
    }

    // MARK: - Known answers (§3, §6)

    @Test("Gear table known answers: gear[0], gear[1], gear[255] (Spec/0002 §3, §6)")
    func gearTableKnownAnswers() {
        #expect(GearTable.values.count == 256)
        #expect(GearTable.values[0] == 0x1EE5_6E81_C2BE_D32B)
        #expect(GearTable.values[1] == 0x7ACE_B2CC_22DB_8300)
        #expect(GearTable.values[255] == 0xD206_6430_13C5_91BE)
        #expect(GearTable.seed == 0x4341_4952_4E47_4541)
        #expect(Set(GearTable.values).count == 256)
    }

    @Test("SplitMix64 seeded with 0 produces the reference first output")
    func splitMixReference() {
        var generator = SeededBytes(state: 0)
        // Reference value of SplitMix64 (Vigna's splitmix64.c) from state 0.
        #expect(generator.next() == 0xE220_A839_7B1D_CDAF)
    }

    static let vectorInput = SeededBytes.bytes(seed: 0, count: 1 << 20)

    @Test("Known-answer chunk lengths under the default policy (Spec/0002 §6.2)")
    func defaultPolicyVector() {
        let expected = [
            113721, 105200, 69004, 69555, 84202, 68155, 37845, 79708, 74280, 75631, 71824, 80944,
            91847, 26660,
        ]
        #expect(Self.wholeLengths(Self.vectorInput, .default) == expected)
    }

    @Test("Known-answer chunk lengths under cdc 2048/8192/65536 (Spec/0002 §6.3)")
    func smallPolicyVector() {
        let expected = [
            11829, 10507, 8985, 9293, 4235, 11366, 10268, 12283, 8259, 10231, 13679, 2786, 15353,
            9391, 8276, 9719, 9169, 8279, 9297, 8846, 10307, 10511, 10058, 6211, 8274, 8346, 10622,
            14833, 9468, 8885, 12258, 8392, 9612, 5588, 10191, 8695, 9055, 9105, 8842, 12173, 10255,
            2168, 17582, 2877, 9107, 8990, 10112, 9531, 8753, 6619, 8799, 7311, 9215, 13660, 8300,
            10287, 8679, 10667, 9190, 8247, 11438, 13118, 4347, 8772, 11383, 10062, 14759, 4930,
            8461, 14258, 9978, 8453, 2808, 10101, 9040, 8744, 16106, 22160, 8875, 11027, 4655,
            12871, 2292, 9747, 11049, 8454, 8750, 13008, 5653, 13001, 11145, 7227, 15373, 9030,
            8983, 9678, 12807, 10920, 9576, 8613, 9867, 9394, 9984, 10521, 9556, 7116, 10127, 3966,
            12514, 53,
        ]
        let lengths = Self.wholeLengths(Self.vectorInput, Self.smallPolicy)
        #expect(lengths.count == 110)
        #expect(lengths == expected)
    }

    // MARK: - Feeding (§4)

    @Test(
        "Boundaries are identical whole, byte by byte and in seeded random slices",
        arguments: policies)
    func feedingDoesNotMoveBoundaries(policy: ChunkingPolicy) {
        let data = SeededBytes.bytes(seed: 7, count: 700_000)
        let whole = Self.wholeLengths(data, policy)
        #expect(whole.reduce(0, +) == data.count)
        #expect(Self.streamedLengths(data, policy) { _ in data.count } == whole)

        var random = SeededBytes(state: 99)
        let sliced = Self.streamedLengths(data, policy) { _ in
            // Mostly small slices, sometimes larger than the maximum chunk.
            let pick = random.next()
            return pick % 8 == 0
                ? Int((pick >> 40) % UInt64(3 * policy.maximum)) + 1 : Int((pick >> 40) % 5000) + 1
        }
        #expect(sliced == whole)

        let small = Array(data.prefix(200_000))
        let byteByByte = Self.streamedLengths(small, policy) { _ in 1 }
        #expect(byteByByte == Self.wholeLengths(small, policy))
    }

    @Test("Streaming chunker is reusable after finish and handles an empty input")
    func streamingReuse() {
        var streaming = StreamingChunker(policy: Self.smallPolicy, keying: nil)
        #expect(streaming.finish().isEmpty)
        let data = SeededBytes.bytes(seed: 3, count: 100_000)
        let once = Self.streamedLengths(data, Self.smallPolicy) { _ in 4096 }
        var lengths: [Int] = []
        for _ in 0..<2 {
            data.withUnsafeBytes { lengths += streaming.append($0) }
            lengths += streaming.finish()
        }
        #expect(lengths == once + once)
    }

    @Test("Chunker returns nil until a chunk is determined", arguments: [ChunkingTests.smallPolicy])
    func chunkerNeedsMoreData(policy: ChunkingPolicy) {
        let chunker = Chunker(policy: policy, keying: nil)
        let data = SeededBytes.bytes(seed: 11, count: 3 * policy.maximum)
        data.withUnsafeBytes { buffer in
            #expect(
                chunker.nextChunkLength(
                    in: UnsafeRawBufferPointer(rebasing: buffer[0..<0]), isFinal: true) == nil)
            #expect(
                chunker.nextChunkLength(
                    in: UnsafeRawBufferPointer(rebasing: buffer[0..<0]), isFinal: false) == nil)
            // Not more than the minimum: undetermined unless final.
            let short = UnsafeRawBufferPointer(rebasing: buffer[0..<policy.minimum])
            #expect(chunker.nextChunkLength(in: short, isFinal: false) == nil)
            #expect(chunker.nextChunkLength(in: short, isFinal: true) == policy.minimum)
            // Whole buffer: the first cut.
            guard let first = chunker.nextChunkLength(in: buffer, isFinal: false) else {
                Issue.record("no chunk in \(buffer.count) bytes")
                return
            }
            #expect(first > policy.minimum && first <= policy.maximum)
            // One byte short of the cut: undetermined, or final gives the remainder.
            let before = UnsafeRawBufferPointer(rebasing: buffer[0..<(first - 1)])
            #expect(chunker.nextChunkLength(in: before, isFinal: false) == nil)
            #expect(chunker.nextChunkLength(in: before, isFinal: true) == first - 1)
            #expect(
                chunker.nextChunkLength(
                    in: UnsafeRawBufferPointer(rebasing: buffer[0..<first]), isFinal: false)
                    == first)
        }
    }

    @Test(
        "A run of zero bytes never matches a mask and is cut at the maximum",
        arguments: [ChunkingPolicy.default, ChunkingTests.smallPolicy])
    func zerosCutAtMaximum(policy: ChunkingPolicy) {
        // After 64 zero bytes the hash is gear[0] * (2^64 - 1) = -gear[0] (mod 2^64),
        // 0xE11A917E3D412CD5, whose top bits are set: no cut point before the maximum.
        let data = [UInt8](repeating: 0, count: 2 * policy.maximum + 5)
        #expect(Self.wholeLengths(data, policy) == [policy.maximum, policy.maximum, 5])
    }

    // MARK: - Bounds and statistics

    @Test("Every chunk but the last lies within [minimum, maximum]", arguments: policies)
    func chunksWithinBounds(policy: ChunkingPolicy) {
        let data = SeededBytes.bytes(seed: 5, count: 2_000_000)
        let lengths = Self.wholeLengths(data, policy)
        #expect(lengths.reduce(0, +) == data.count)
        #expect(lengths.dropLast().allSatisfy { $0 >= policy.minimum && $0 <= policy.maximum })
        if let last = lengths.last { #expect(last >= 1 && last <= policy.maximum) }
    }

    @Test("Fixed-size chunking cuts every size bytes and keeps a short tail")
    func fixedSizes() {
        let data = SeededBytes.bytes(seed: 1, count: 10_500)
        #expect(
            Self.wholeLengths(data, .fixed(size: 1000)) == Array(repeating: 1000, count: 10) + [500]
        )
        #expect(
            Self.wholeLengths(Array(data.prefix(10_000)), .fixed(size: 1000))
                == Array(repeating: 1000, count: 10))
        #expect(
            Self.wholeLengths(Array(data.prefix(7)), .fixed(size: 1))
                == Array(repeating: 1, count: 7))
        #expect(Self.wholeLengths(Array(data.prefix(999)), .fixed(size: 1000)) == [999])
    }

    @Test("An empty input has no chunks", arguments: policies)
    func emptyInput(policy: ChunkingPolicy) {
        #expect(Self.wholeLengths([], policy).isEmpty)
        var streaming = StreamingChunker(policy: policy, keying: nil)
        #expect([UInt8]().withUnsafeBytes { streaming.append($0) }.isEmpty)
        #expect(streaming.finish().isEmpty)
    }

    @Test(
        "Inserting one byte at the front changes only the first one or two chunks",
        arguments: [ChunkingPolicy.default, ChunkingTests.smallPolicy])
    func insertionIsLocal(policy: ChunkingPolicy) {
        let original = SeededBytes.bytes(seed: 42, count: 4 << 20)
        let shifted = [0x5A] + original
        let before = Self.wholeLengths(original, policy)
        let after = Self.wholeLengths(shifted, policy)
        #expect(before.count > 10)
        let localized = (1...2).contains { changed in
            Array(before.dropFirst(changed)) == Array(after.dropFirst(changed))
        }
        #expect(localized)
    }

    @Test("Average chunk length on random data is near the target")
    func averageOnRandomData() {
        let policy = Self.smallPolicy
        let data = SeededBytes.bytes(seed: 2024, count: 4 << 20)
        let lengths = Self.wholeLengths(data, policy)
        let mean = data.count / lengths.count
        // FastCDC NC2 with minimum = average / 4 gives a mean a little above the average.
        #expect(mean >= policy.average * 3 / 4 && mean <= policy.average * 3 / 2, "mean \(mean)")
    }

    // MARK: - Policy (§2)

    static let invalidPolicies: [(ChunkingPolicy, Int)] = [
        (.contentDefined(minimum: 16384, average: 65535, maximum: 262144), 65535),
        (.contentDefined(minimum: 64, average: 128, maximum: 1024), 128),
        (.contentDefined(minimum: 0, average: 128, maximum: 1024), 128),
        (.contentDefined(minimum: 63, average: 256, maximum: 1024), 63),
        (.contentDefined(minimum: 512, average: 256, maximum: 1024), 512),
        (.contentDefined(minimum: 64, average: 1024, maximum: 512), 512),
        (.contentDefined(minimum: 64, average: 1024, maximum: 8_388_609), 8_388_609),
        (.contentDefined(minimum: -1, average: 1024, maximum: 2048), -1),
        (.contentDefined(minimum: 64, average: 0, maximum: 2048), 0),
        (.contentDefined(minimum: 64, average: 16 << 20, maximum: 16 << 20), 16 << 20),
        (.fixed(size: 0), 0),
        (.fixed(size: -5), -5),
        (.fixed(size: 8_388_609), 8_388_609),
    ]

    @Test(
        "Validation rejects bad values with .invalidArgument naming the value",
        arguments: invalidPolicies)
    func validationRejects(policy: ChunkingPolicy, badValue: Int) {
        let error = #expect(throws: CairnError.self) { try policy.validate() }
        #expect(error?.code == .invalidArgument)
        #expect(error?.message.contains(String(badValue)) == true, "\(error?.message ?? "")")
    }

    @Test(
        "Validation accepts the limits",
        arguments: policies + [
            .contentDefined(minimum: 64, average: 256, maximum: 256),
            .contentDefined(minimum: 8 << 20, average: 8 << 20, maximum: 8 << 20),
            .fixed(size: 1), .fixed(size: 8 << 20),
        ])
    func validationAccepts(policy: ChunkingPolicy) throws {
        try policy.validate()
    }

    @Test("Policy properties", arguments: [ChunkingPolicy.default])
    func policyProperties(policy: ChunkingPolicy) {
        #expect(policy.isContentDefined)
        #expect(policy.minimum == 16384 && policy.average == 65536 && policy.maximum == 262144)
        let fixed = ChunkingPolicy.fixed(size: 4096)
        #expect(!fixed.isContentDefined)
        #expect(fixed.minimum == 4096 && fixed.average == 4096 && fixed.maximum == 4096)
        #expect(ChunkingPolicy.maximumChunkLength == 8_388_608)
    }

    @Test("Policy names parse and round-trip through description")
    func policyNames() {
        #expect(ChunkingPolicy(name: "cdc") == .default)
        #expect(ChunkingPolicy(name: "fixed") == .fixed(size: 65536))
        #expect(ChunkingPolicy(name: "cdc:16k:64k:256k") == .default)
        #expect(ChunkingPolicy(name: "CDC:2048:8K:64k") == Self.smallPolicy)
        #expect(ChunkingPolicy(name: "fixed:1m") == .fixed(size: 1 << 20))
        #expect(ChunkingPolicy(name: "fixed:1000") == .fixed(size: 1000))
        #expect(ChunkingPolicy.default.description == "cdc:16k:64k:256k")
        #expect(ChunkingPolicy.fixed(size: 1000).description == "fixed:1000")
        for policy in Self.policies {
            #expect(ChunkingPolicy(name: policy.description) == policy)
        }
        for bad in [
            "", "lz4", "cdc:", "cdc:16k:64k", "cdc:16k:64k:256k:1m", "cdc:1k:3k:4k", "fixed:0",
            "fixed:9m", "fixed:", "fixed:1g", "fixed:-1", "fixed:+5", "fixed:k",
            "fixed:99999999999999999999", "fixed:9999999999999999m",
        ] {
            #expect(ChunkingPolicy(name: bad) == nil, "\(bad)")
        }
    }
}
