import CairnTestSupport
import CLZ4
import Foundation
import Testing

@testable import Cairn

/// The kinds of chunk contents the round trips cover.
enum CompressionSample: String, CaseIterable, CustomTestStringConvertible {
    case text, zeros, random

    var testDescription: String { rawValue }

    func bytes(_ count: Int, seed: UInt64 = 1) -> [UInt8] {
        var rng = SeededGenerator(seed: seed)
        switch self {
        case .zeros:
            return [UInt8](repeating: 0, count: count)
        case .random:
            return (0..<count).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        case .text:
            let words = ["the ", "chunk ", "archive ", "cairn ", "stores ", "content ", "once, ", "and\n", "of "]
            var out: [UInt8] = []
            out.reserveCapacity(count + 16)
            while out.count < count { out += words[Int(rng.next() % UInt64(words.count))].utf8 }
            return Array(out.prefix(count))
        }
    }
}

private func compressed(_ raw: [UInt8], _ method: CompressionMethod) -> (ChunkCodec, [UInt8]) {
    var output: [UInt8] = []
    let codec = raw.withUnsafeBytes { ChunkCompressor(method: method).compress($0, appendingTo: &output) }
    return (codec, output)
}

/// Decodes into a buffer with guard bytes after `rawLength` and checks they survive, whatever
/// the outcome.
private func decodeGuarded(
    _ decompressor: ChunkDecompressor, codec: ChunkCodec, stored: [UInt8], rawLength: Int
) throws(CairnError) -> [UInt8] {
    let guardCount = 4096
    var buffer = [UInt8](repeating: 0xA5, count: rawLength + guardCount)
    let result = buffer.withUnsafeMutableBytes { destination in
        stored.withUnsafeBytes { source in
            Result { () throws(CairnError) in
                try decompressor.decompress(codec: codec, stored: source, rawLength: rawLength, into: destination)
            }
        }
    }
    #expect(buffer[rawLength...].allSatisfy { $0 == 0xA5 }, "wrote past the declared length")
    try result.get()
    return Array(buffer[..<rawLength])
}

@Suite("Compression methods")
struct CompressionMethodTests {
    @Test(
        "names parse to methods and print back",
        arguments: [
            ("none", CompressionMethod.none, "none"), ("lz4", .lz4, "lz4"), ("zlib", .zlib(), "zlib:6"),
            ("zlib:9", .zlib(level: 9), "zlib:9"), ("ZSTD", .zstd(), "zstd:3"), ("zstd:19", .zstd(level: 19), "zstd:19"),
            ("zstd:-5", .zstd(level: -5), "zstd:-5"), ("zlib:0", .zlib(level: 0), "zlib:0"),
        ])
    func parse(name: String, method: CompressionMethod, printed: String) throws {
        let parsed = try #require(CompressionMethod(name: name))
        #expect(parsed == method)
        #expect(parsed.description == printed)
        #expect(CompressionMethod(name: printed) == method)
    }

    @Test(
        "bad names are rejected",
        arguments: ["", "gzip", "lz4:1", "none:0", "zlib:10", "zlib:-1", "zlib:", "zstd:x", "zstd:100", "zlib:9:1", " lz4"])
    func reject(name: String) {
        #expect(CompressionMethod(name: name) == nil)
    }

    @Test("levels are clamped and codecs carry their on-disk ids")
    func levelsAndIds() {
        #expect(CompressionMethod.zlib(level: 42).level == 9)
        #expect(CompressionMethod.zstd(level: 1000).level == CompressionMethod.zstdLevels.upperBound)
        #expect(CompressionMethod.lz4.codec == .lz4)
        #expect(ChunkCodec.allCases.map(\.rawValue) == [0, 1, 2, 3])
        #expect(ChunkCodec.allCases.map(\.name) == ["none", "lz4", "zlib", "zstd"])
    }
}

@Suite("Chunk codecs")
struct ChunkCodecTests {
    static let methods: [CompressionMethod] = [
        .none, .lz4, .zlib(), .zlib(level: 1), .zlib(level: 9), .zstd(), .zstd(level: -3), .zstd(level: 19),
    ]
    static let sizes = [0, 1, 2, 17, 1000, 65_536, 65_537, 300_000]

    @Test("round trip keeps the bytes and compresses only when smaller", arguments: methods, CompressionSample.allCases)
    func roundTrip(method: CompressionMethod, sample: CompressionSample) throws {
        let compressor = ChunkCompressor(method: method)
        let decompressor = ChunkDecompressor()
        for size in Self.sizes {
            let raw = sample.bytes(size, seed: UInt64(size))
            var output: [UInt8] = [0xDE, 0xAD]
            let codec = raw.withUnsafeBytes { compressor.compress($0, appendingTo: &output) }
            #expect(output.prefix(2) == [0xDE, 0xAD], "existing output bytes are kept")
            let stored = Array(output.dropFirst(2))
            if codec == .none {
                #expect(stored == raw)
            } else {
                #expect(codec == method.codec)
                #expect(stored.count < raw.count)
            }
            if method.codec == .none || size < 2 || sample == .random {
                #expect(codec == .none, "size \(size)")
            } else if size >= 1000 {
                #expect(codec == method.codec, "size \(size) should compress")
            }
            #expect(try decodeGuarded(decompressor, codec: codec, stored: stored, rawLength: raw.count) == raw)
            let viaArray = try stored.withUnsafeBytes { source throws(CairnError) in
                try decompressor.decompress(codec: codec, stored: source, rawLength: raw.count)
            }
            #expect(viaArray == raw)
        }
    }

    @Test(
        "LZ4 payloads are single frames the lz4 command decodes",
        arguments: [(CompressionSample.text, 300_000), (.text, 1000), (.zeros, 5 << 20), (.text, 1 << 20)])
    func lz4CommandLine(sample: CompressionSample, size: Int) throws {
        let raw = sample.bytes(size)
        let (codec, stored) = compressed(raw, .lz4)
        try #require(codec == .lz4)
        // Frame descriptor (LZ4 Frame Format §"Frame Descriptor"): magic, FLG, BD.
        #expect(Array(stored.prefix(4)) == [0x04, 0x22, 0x4D, 0x18])
        let flags = stored[4]
        #expect(flags >> 6 == 1, "version 01")
        #expect(flags & 0x20 != 0, "independent blocks")
        #expect(flags & 0x10 == 0, "no block checksum")
        #expect(flags & 0x08 != 0, "content size present")
        #expect(flags & 0x04 == 0, "no content checksum")
        let blockSizeID = (stored[5] >> 4) & 7
        let expectedID: UInt8 = size <= 64 << 10 ? 4 : size <= 256 << 10 ? 5 : size <= 1 << 20 ? 6 : 7
        #expect(blockSizeID == expectedID)
        let contentSize = stored[6..<14].reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        #expect(contentSize == UInt64(size))

        let lz4 = URL(fileURLWithPath: "/usr/bin/lz4")
        guard FileManager.default.isExecutableFile(atPath: lz4.path) else {
            print("skipping the lz4 command-line check: /usr/bin/lz4 is not installed (apt-get install lz4)")
            return
        }
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("cairn-lz4-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let input = directory.appendingPathComponent("chunk.lz4")
        let output = directory.appendingPathComponent("chunk")
        try Data(stored).write(to: input)
        let process = Process()
        process.executableURL = lz4
        process.arguments = ["-d", "-q", "-f", input.path, output.path]
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(try Data(contentsOf: output) == Data(raw))
    }

    @Test(
        "1 MiB of zeros presented as 1000 bytes is rejected without writing past",
        arguments: [ChunkCodec.lz4, .zlib, .zstd])
    func bomb(codec: ChunkCodec) throws {
        let method: CompressionMethod = switch codec {
        case .lz4: .lz4
        case .zlib: .zlib()
        default: .zstd()
        }
        let (actual, stored) = compressed([UInt8](repeating: 0, count: 1 << 20), method)
        try #require(actual == codec)
        let decompressor = ChunkDecompressor()
        let error = #expect(throws: CairnError.self) {
            try decodeGuarded(decompressor, codec: codec, stored: stored, rawLength: 1000)
        }
        #expect(error?.code == .corrupted)
        #expect(error?.message == "chunk inflates past its declared length of 1000 bytes")
        // The decompressor is still usable afterwards.
        let raw = CompressionSample.text.bytes(10_000)
        let (again, payload) = compressed(raw, method)
        #expect(try decodeGuarded(decompressor, codec: again, stored: payload, rawLength: raw.count) == raw)
    }

    @Test("an LZ4 frame without a content size that inflates too far stops at the declared length")
    func lz4WithoutContentSize() throws {
        // Default preferences: linked 64 KiB blocks, no content size, so only decoding can tell.
        let raw = CompressionSample.text.bytes(200_000)
        var stored = [UInt8](repeating: 0, count: LZ4F_compressFrameBound(raw.count, nil))
        let size = stored.withUnsafeMutableBytes { destination in
            raw.withUnsafeBytes { source in
                LZ4F_compressFrame(destination.baseAddress, destination.count, source.baseAddress, source.count, nil)
            }
        }
        try #require(LZ4F_isError(size) == 0)
        stored.removeSubrange(size...)
        let decompressor = ChunkDecompressor()
        #expect(try decodeGuarded(decompressor, codec: .lz4, stored: stored, rawLength: raw.count) == raw)
        for declared in [0, 1, 65_536, raw.count - 1] {
            let error = #expect(throws: CairnError.self) {
                try decodeGuarded(decompressor, codec: .lz4, stored: stored, rawLength: declared)
            }
            #expect(error?.message == "chunk inflates past its declared length of \(declared) bytes")
        }
        let error = #expect(throws: CairnError.self) {
            try decodeGuarded(decompressor, codec: .lz4, stored: stored, rawLength: raw.count + 1)
        }
        #expect(error?.code == .corrupted)
    }

    static let compressingMethods: [CompressionMethod] = [.lz4, .zlib(), .zstd()]

    @Test("truncated payloads are rejected", arguments: compressingMethods)
    func truncated(method: CompressionMethod) throws {
        let raw = CompressionSample.text.bytes(100_000)
        let (codec, stored) = compressed(raw, method)
        try #require(codec == method.codec)
        let decompressor = ChunkDecompressor()
        for keep in [0, 1, 3, 4, 7, stored.count / 2, stored.count - 4, stored.count - 1] {
            let error = #expect(throws: CairnError.self, "keeping \(keep) bytes") {
                try decodeGuarded(decompressor, codec: codec, stored: Array(stored.prefix(keep)), rawLength: raw.count)
            }
            #expect(error?.code == .corrupted)
        }
        #expect(try decodeGuarded(decompressor, codec: codec, stored: stored, rawLength: raw.count) == raw)
    }

    @Test("trailing bytes after the frame or stream are rejected", arguments: compressingMethods)
    func trailing(method: CompressionMethod) throws {
        let raw = CompressionSample.text.bytes(50_000)
        let (codec, stored) = compressed(raw, method)
        try #require(codec == method.codec)
        let decompressor = ChunkDecompressor()
        for garbage in [[0], [0, 0, 0, 0], Array(stored.prefix(8)), stored] as [[UInt8]] {
            let error = #expect(throws: CairnError.self) {
                try decodeGuarded(decompressor, codec: codec, stored: stored + garbage, rawLength: raw.count)
            }
            #expect(error?.code == .corrupted)
            #expect(error?.message.contains("trailing") == true, "\(error?.message ?? "")")
        }
    }

    @Test("a payload that decodes short of the declared length is rejected", arguments: compressingMethods)
    func short(method: CompressionMethod) throws {
        let raw = CompressionSample.zeros.bytes(10_000)
        let (codec, stored) = compressed(raw, method)
        let error = #expect(throws: CairnError.self) {
            try decodeGuarded(ChunkDecompressor(), codec: codec, stored: stored, rawLength: raw.count + 1)
        }
        #expect(error?.code == .corrupted)
    }

    @Test("garbage is rejected by every codec", arguments: [ChunkCodec.lz4, .zlib, .zstd])
    func garbage(codec: ChunkCodec) {
        let decompressor = ChunkDecompressor()
        for stored in [[], CompressionSample.random.bytes(1000), [UInt8](repeating: 0, count: 64)] as [[UInt8]] {
            let error = #expect(throws: CairnError.self) {
                try decodeGuarded(decompressor, codec: codec, stored: stored, rawLength: 1000)
            }
            #expect(error?.code == .corrupted)
        }
    }

    @Test("a stored payload must be exactly the declared length")
    func storedLength() throws {
        let decompressor = ChunkDecompressor()
        let raw = CompressionSample.random.bytes(100)
        #expect(try decodeGuarded(decompressor, codec: .none, stored: raw, rawLength: 100) == raw)
        #expect(try decodeGuarded(decompressor, codec: .none, stored: [], rawLength: 0) == [])
        for declared in [0, 99, 101] {
            let error = #expect(throws: CairnError.self) {
                try decodeGuarded(decompressor, codec: .none, stored: raw, rawLength: declared)
            }
            #expect(error?.code == .corrupted)
        }
    }

    @Test("a destination smaller than the declared length is refused")
    func smallDestination() {
        var buffer = [UInt8](repeating: 0, count: 10)
        // A `throws(CairnError)` closure passed to the rethrowing `withUnsafeMutableBytes`
        // crashes the Swift 6.3.1 compiler (IRGen, signal 11): go through `Result` instead.
        let result = buffer.withUnsafeMutableBytes { destination in
            Result { () throws(CairnError) in
                try ChunkDecompressor().decompress(
                    codec: .none, stored: UnsafeRawBufferPointer(start: nil, count: 0), rawLength: 11, into: destination)
            }
        }
        let error = #expect(throws: CairnError.self) { try result.get() }
        #expect(error?.code == .invalidArgument)
    }
}
