import Cairn
import CCrypto
import CLZ4
import CZlib
import Foundation

/// The result of one stage micro-benchmark.
struct StageResult {
    var stage: String
    var implementation: String
    /// Bytes processed per repetition (input bytes; decompression counts output bytes).
    var bytes: Int
    /// Wall seconds of the fastest repetition.
    var bestSeconds: Double
    var repetitions: Int
    /// The C library figure this one is compared with (same stage), if any.
    var baseline: String?
    var detail: String?

    var megabytesPerSecond: Double { Double(bytes) / bestSeconds / 1e6 }
}

/// A measured body, stored in an object so the optimiser cannot see through the call and hoist
/// a pure loop out of the repetitions (TOOLCHAIN.md). Its result is folded into `sink`.
final class MeasuredBody {
    let body: () -> UInt64
    init(_ body: @escaping () -> UInt64) { self.body = body }
}

/// Receives every measured result so that no work is dead.
final class ResultSink: @unchecked Sendable {
    // @unchecked: written only from the benchmark's single thread.
    var value: UInt64 = 0
    @inline(never) func consume(_ v: UInt64) { value = value &* 31 &+ v }
}

/// In-process micro-benchmarks of Cairn's stages against the C libraries, on one core and the
/// same buffers.
struct StageBenchmarks {
    var repetitions: Int
    let sink = ResultSink()

    /// Runs each body once to warm up, then `repetitions` rounds of every body in turn
    /// (A B A B ...), and returns the fastest time of each. Interleaving keeps a wrapper and its
    /// C baseline under the same load on a shared machine, so their ratio stays meaningful.
    func measure(_ bodies: [MeasuredBody]) -> [Double] {
        for body in bodies { sink.consume(body.body()) }
        var best = [Double](repeating: .infinity, count: bodies.count)
        for _ in 0..<repetitions {
            for (index, body) in bodies.enumerated() {
                let started = monotonicSeconds()
                let result = body.body()
                let seconds = monotonicSeconds() - started
                sink.consume(result)
                best[index] = min(best[index], seconds)
            }
        }
        return best
    }

    func measure(_ body: MeasuredBody) -> Double { measure([body])[0] }

    func run() -> [StageResult] {
        var results: [StageResult] = []
        let random = Buffer.random(count: 256 << 20, seed: 0x5EED)
        let text = Buffer.textLike(count: 64 << 20, seed: 0x7E47)
        let chunkSize = 64 << 10

        // FastCDC over 256 MiB of random data.
        do {
            let chunker = Chunker(policy: .default, keying: nil)
            var chunks = 0
            let seconds = measure(
                MeasuredBody {
                    var offset = 0
                    var count: UInt64 = 0
                    let all = random.bytes
                    while offset < all.count {
                        let rest = UnsafeRawBufferPointer(rebasing: all[offset...])
                        let length = chunker.nextChunkLength(in: rest, isFinal: true) ?? rest.count
                        offset += length
                        count += 1
                    }
                    chunks = Int(count)
                    return count
                })
            results.append(
                StageResult(
                    stage: "FastCDC chunker (16/64/256 KiB)", implementation: "Cairn Chunker", bytes: random.count,
                    bestSeconds: seconds, repetitions: repetitions,
                    detail: "\(chunks) chunks, mean \(random.count / max(chunks, 1) / 1024) KiB, random data"))
            log(String(format: "stage chunker: %.0f MB/s", Double(random.count) / seconds / 1e6))
        }

        // SHA-256 of 64 KiB chunks of the random data.
        do {
            let cairnBody = MeasuredBody {
                    var acc: UInt64 = 0
                    random.forEachChunk(chunkSize) { chunk in
                        let digest = try! Cairn.SHA256.hash(chunk)
                        acc &+= UInt64(digest.hashValue & 0xff)
                    }
                    return acc
                }
            let evpBody = MeasuredBody {
                    var acc: UInt64 = 0
                    var out = [UInt8](repeating: 0, count: 32)
                    random.forEachChunk(chunkSize) { chunk in
                        var length: UInt32 = 0
                        EVP_Digest(chunk.baseAddress, chunk.count, &out, &length, EVP_sha256(), nil)
                        acc &+= UInt64(out[0])
                    }
                    return acc
                }
            let oneShotBody = MeasuredBody {
                    var acc: UInt64 = 0
                    var out = [UInt8](repeating: 0, count: 32)
                    random.forEachChunk(chunkSize) { chunk in
                        _ = CCrypto.SHA256(chunk.baseAddress!.assumingMemoryBound(to: UInt8.self), chunk.count, &out)
                        acc &+= UInt64(out[0])
                    }
                    return acc
                }
            let times = measure([cairnBody, evpBody, oneShotBody])
            let (cairn, evp, oneShot) = (times[0], times[1], times[2])
            let stage = "SHA-256, 64 KiB messages"
            results.append(StageResult(stage: stage, implementation: "Cairn SHA256.hash", bytes: random.count, bestSeconds: cairn, repetitions: repetitions, baseline: "libcrypto EVP_Digest"))
            results.append(StageResult(stage: stage, implementation: "libcrypto EVP_Digest", bytes: random.count, bestSeconds: evp, repetitions: repetitions))
            results.append(StageResult(stage: stage, implementation: "libcrypto SHA256()", bytes: random.count, bestSeconds: oneShot, repetitions: repetitions, baseline: "libcrypto EVP_Digest"))
            log(String(format: "stage sha256: cairn %.0f, EVP %.0f MB/s", Double(random.count) / cairn / 1e6, Double(random.count) / evp / 1e6))
        }

        // LZ4 and zlib over 64 KiB chunks of text-like data (zlib on the first 16 MiB: it is slow).
        results += codecStages(
            name: "LZ4", method: .lz4, data: text, chunkSize: chunkSize,
            directCompress: LZ4Direct.compress, directDecompressMaker: LZ4Direct.makeDecompressor, cName: "LZ4F_compressFrame",
            cDecompressName: "LZ4F_decompress")
        let zlibText = text.prefix(16 << 20)
        results += codecStages(
            name: "zlib level 6", method: .zlib(level: 6), data: zlibText, chunkSize: chunkSize,
            directCompress: ZlibDirect.compress, directDecompressMaker: { ZlibDirect.decompress }, cName: "compress2",
            cDecompressName: "uncompress")
        return results
    }

    /// Compression and decompression through Cairn's wrappers and the C API directly.
    private func codecStages(
        name: String, method: CompressionMethod, data: Buffer, chunkSize: Int,
        directCompress: @escaping (UnsafeRawBufferPointer, UnsafeMutableRawBufferPointer) -> Int,
        directDecompressMaker: () -> (UnsafeRawBufferPointer, UnsafeMutableRawBufferPointer) -> Int,
        cName: String, cDecompressName: String
    ) -> [StageResult] {
        var results: [StageResult] = []
        let compressor = ChunkCompressor(method: method)
        var output: [UInt8] = []
        output.reserveCapacity(2 * chunkSize)
        var storedTotal = 0
        let wrapperBody = MeasuredBody {
                var total: UInt64 = 0
                data.forEachChunk(chunkSize) { chunk in
                    output.removeAll(keepingCapacity: true)
                    _ = compressor.compress(chunk, appendingTo: &output)
                    total &+= UInt64(output.count)
                }
                storedTotal = Int(total)
                return total
            }
        let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 2 * chunkSize + 4096, alignment: 16)
        defer { scratch.deallocate() }
        var directTotal = 0
        let directBody = MeasuredBody {
                var total: UInt64 = 0
                data.forEachChunk(chunkSize) { chunk in
                    total &+= UInt64(directCompress(chunk, scratch))
                }
                directTotal = Int(total)
                return total
            }
        let compressTimes = measure([wrapperBody, directBody])
        let (wrapper, direct) = (compressTimes[0], compressTimes[1])
        let stage = "\(name) compress, 64 KiB chunks, text-like"
        let ratio = String(format: "%.2f×", Double(data.count) / Double(max(storedTotal, 1)))
        let directRatio = String(format: "%.2f×", Double(data.count) / Double(max(directTotal, 1)))
        results.append(
            StageResult(
                stage: stage, implementation: "Cairn ChunkCompressor", bytes: data.count, bestSeconds: wrapper, repetitions: repetitions,
                baseline: cName, detail: "ratio \(ratio)"))
        results.append(
            StageResult(
                stage: stage, implementation: cName, bytes: data.count, bestSeconds: direct, repetitions: repetitions,
                detail: "ratio \(directRatio)"))

        // Decompression of the wrapper's payloads (both codecs' payloads are standard frames/streams).
        var payloads: [(codec: ChunkCodec, bytes: [UInt8], rawLength: Int)] = []
        data.forEachChunk(chunkSize) { chunk in
            var stored: [UInt8] = []
            let codec = compressor.compress(chunk, appendingTo: &stored)
            payloads.append((codec, stored, chunk.count))
        }
        let compressedCount = payloads.filter { $0.codec != .none }.count
        let decompressor = ChunkDecompressor()
        let destination = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 16)
        defer { destination.deallocate() }
        let wrapperDecodeBody = MeasuredBody {
                var total: UInt64 = 0
                for p in payloads {
                    p.bytes.withUnsafeBytes { stored in
                        try! decompressor.decompress(codec: p.codec, stored: stored, rawLength: p.rawLength, into: destination)
                    }
                    total &+= UInt64(destination[p.rawLength &- 1])
                }
                return total
            }
        let directDecompress = directDecompressMaker()
        let directDecodeBody = MeasuredBody {
                var total: UInt64 = 0
                for p in payloads {
                    if p.codec == .none {
                        p.bytes.withUnsafeBytes { destination.copyMemory(from: $0) }
                    } else {
                        let n = p.bytes.withUnsafeBytes { directDecompress($0, destination) }
                        precondition(n == p.rawLength, "\(cDecompressName) decoded \(n) of \(p.rawLength) bytes")
                    }
                    total &+= UInt64(destination[p.rawLength &- 1])
                }
                return total
            }
        let decodeTimes = measure([wrapperDecodeBody, directDecodeBody])
        let (wrapperDecode, directDecode) = (decodeTimes[0], decodeTimes[1])
        let dstage = "\(name) decompress, 64 KiB chunks"
        let note = "\(compressedCount)/\(payloads.count) chunks compressed; MB/s of output"
        results.append(
            StageResult(
                stage: dstage, implementation: "Cairn ChunkDecompressor", bytes: data.count, bestSeconds: wrapperDecode,
                repetitions: repetitions, baseline: cDecompressName, detail: note))
        results.append(
            StageResult(stage: dstage, implementation: cDecompressName, bytes: data.count, bestSeconds: directDecode, repetitions: repetitions))
        log(
            String(
                format: "stage %@: compress cairn %.0f / C %.0f MB/s, decompress cairn %.0f / C %.0f MB/s", name,
                Double(data.count) / wrapper / 1e6, Double(data.count) / direct / 1e6,
                Double(data.count) / wrapperDecode / 1e6, Double(data.count) / directDecode / 1e6))
        return results
    }
}

/// LZ4 frame API called directly, with the same frame preferences as `ChunkCompressor`.
enum LZ4Direct {
    static func compress(_ source: UnsafeRawBufferPointer, _ destination: UnsafeMutableRawBufferPointer) -> Int {
        var preferences = LZ4F_preferences_t()
        preferences.frameInfo.blockSizeID = LZ4F_max64KB
        preferences.frameInfo.blockMode = LZ4F_blockIndependent
        preferences.frameInfo.contentSize = UInt64(source.count)
        let size = LZ4F_compressFrame(destination.baseAddress, destination.count, source.baseAddress, source.count, &preferences)
        return LZ4F_isError(size) == 0 ? size : 0
    }

    /// A decoder with one reused `LZ4F_dctx` (kept for the life of the process).
    static func makeDecompressor() -> (UnsafeRawBufferPointer, UnsafeMutableRawBufferPointer) -> Int {
        var context: OpaquePointer?
        _ = LZ4F_createDecompressionContext(&context, UInt32(LZ4F_VERSION))
        return { source, destination in
            var dstSize = destination.count
            var srcSize = source.count
            let hint = LZ4F_decompress(context, destination.baseAddress, &dstSize, source.baseAddress, &srcSize, nil)
            if LZ4F_isError(hint) != 0 || hint != 0 {
                LZ4F_resetDecompressionContext(context)
                return -1
            }
            return dstSize
        }
    }
}

/// zlib's one-call API: `compress2` at level 6 and `uncompress`.
enum ZlibDirect {
    static func compress(_ source: UnsafeRawBufferPointer, _ destination: UnsafeMutableRawBufferPointer) -> Int {
        var length = uLongf(destination.count)
        let status = compress2(
            destination.baseAddress!.assumingMemoryBound(to: Bytef.self), &length,
            source.baseAddress!.assumingMemoryBound(to: Bytef.self), uLong(source.count), 6)
        return status == Z_OK ? Int(length) : 0
    }

    static func decompress(_ source: UnsafeRawBufferPointer, _ destination: UnsafeMutableRawBufferPointer) -> Int {
        var length = uLongf(destination.count)
        let status = uncompress(
            destination.baseAddress!.assumingMemoryBound(to: Bytef.self), &length,
            source.baseAddress!.assumingMemoryBound(to: Bytef.self), uLong(source.count))
        return status == Z_OK ? Int(length) : -1
    }
}

/// An owned, immutable byte buffer for the micro-benchmarks.
final class Buffer: @unchecked Sendable {
    // @unchecked: never mutated after init.
    let bytes: UnsafeRawBufferPointer
    var count: Int { bytes.count }

    private init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }
    deinit { bytes.deallocate() }

    /// A copy of the first `count` bytes.
    func prefix(_ count: Int) -> Buffer {
        let n = min(count, self.count)
        let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: n, alignment: 64)
        copy.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[0..<n]))
        return Buffer(UnsafeRawBufferPointer(copy))
    }

    func forEachChunk(_ size: Int, _ body: (UnsafeRawBufferPointer) -> Void) {
        var offset = 0
        while offset < bytes.count {
            let end = min(offset + size, bytes.count)
            body(UnsafeRawBufferPointer(rebasing: bytes[offset..<end]))
            offset = end
        }
    }

    /// Seeded pseudo-random bytes (SplitMix64).
    static func random(count: Int, seed: UInt64) -> Buffer {
        let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: count, alignment: 64)
        var rng = BenchRandom(seed: seed)
        let words = count / 8
        let typed = memory.baseAddress!.bindMemory(to: UInt64.self, capacity: words)
        for i in 0..<words { typed[i] = rng.next() }
        for i in (words * 8)..<count { memory[i] = UInt8(truncatingIfNeeded: rng.next()) }
        return Buffer(UnsafeRawBufferPointer(memory))
    }

    /// Seeded text-like bytes (``TextGenerator``), so it compresses about as well as app data.
    static func textLike(count: Int, seed: UInt64) -> Buffer {
        var generator = TextGenerator(seed: seed)
        var out: [UInt8] = []
        out.reserveCapacity(count + 1024)
        generator.append(to: &out, atLeast: count)
        let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: count, alignment: 64)
        out.withUnsafeBytes { memory.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
        return Buffer(UnsafeRawBufferPointer(memory))
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): seeded, fast, good enough for benchmark data.
struct BenchRandom {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z &>> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z &>> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z &>> 31)
    }
}
