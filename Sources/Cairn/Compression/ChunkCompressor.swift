internal import CLZ4
internal import CZlib
internal import CZstd

/// Compresses chunks one at a time into their stored form, reusing its C contexts.
///
/// Each payload is self-contained, so any chunk can be decoded alone:
/// - LZ4: one frame of the LZ4 Frame Format (`LZ4F_compressFrame`) with the content size set,
///   independent blocks of the smallest of 64 KiB, 256 KiB, 1 MiB, 4 MiB that holds the chunk,
///   no checksums: the `lz4 -d` command-line tool decodes it.
/// - zlib: one zlib stream (RFC 1950) of deflate data (RFC 1951).
/// - zstd: one Zstandard frame (RFC 8878) with the content size set and no checksum.
///
/// A chunk is stored compressed only when that is strictly smaller; otherwise it is stored as
/// is and ``compress(_:appendingTo:)`` returns `.none`.
///
/// - Important: One compressor per worker; it is not `Sendable`. The zlib and zstd contexts are
///   created on first use and freed exactly once in `deinit`. If libz or libzstd cannot allocate
///   a context, chunks are stored uncompressed (a valid, merely larger archive), and creation is
///   retried with the next chunk.
package final class ChunkCompressor {
    /// The method this compressor applies.
    package let method: CompressionMethod

    /// A deflate stream initialised at `method.level`, or `nil` until first needed.
    private var deflateStream: UnsafeMutablePointer<z_stream>?
    /// A zstd compression context with the level set, or `nil` until first needed.
    private var zstdContext: OpaquePointer?

    /// Creates a compressor for `method`.
    package init(method: CompressionMethod) {
        self.method = method
    }

    deinit {
        if let deflateStream {
            deflateEnd(deflateStream)
            deflateStream.deinitialize(count: 1)
            deflateStream.deallocate()
        }
        ZSTD_freeCCtx(zstdContext)
    }

    /// Appends the stored form of `raw` to `output` and returns the codec it is stored with.
    ///
    /// The compressed bytes are written straight into `output`'s new capacity, without an
    /// intermediate buffer.
    ///
    /// - Parameters:
    ///   - raw: The chunk's bytes.
    ///   - output: The buffer to append the payload to; its existing bytes are kept.
    /// - Returns: The method's codec when the compressed payload is strictly smaller than `raw`,
    ///   otherwise `.none` (the payload is then `raw` itself).
    package func compress(_ raw: UnsafeRawBufferPointer, appendingTo output: inout [UInt8]) -> ChunkCodec {
        // A payload of 0 or 1 byte cannot shrink.
        if raw.count > 1 {
            let compressed: Bool
            switch method.codec {
            case .none: compressed = false
            case .lz4: compressed = compressLZ4(raw, appendingTo: &output)
            case .zlib: compressed = compressZlib(raw, appendingTo: &output)
            case .zstd: compressed = compressZstd(raw, appendingTo: &output)
            }
            if compressed { return method.codec }
        }
        output.append(contentsOf: raw)
        return .none
    }

    /// Runs `body` on `capacity` uninitialised bytes at the end of `output`; keeps the first `n`
    /// bytes when `body` returns `n`, none when it returns `nil`.
    private func appendIfSmaller(
        _ output: inout [UInt8], capacity: Int,
        _ body: (UnsafeMutableRawBufferPointer) -> Int?
    ) -> Bool {
        var kept = false
        output.append(addingCapacity: capacity) { span in
            span.withUnsafeMutableBufferPointer { buffer, initializedCount in
                let destination = UnsafeMutableRawBufferPointer(buffer)
                if let count = body(destination), count >= 0, count <= capacity {
                    initializedCount = count
                    kept = true
                }
            }
        }
        return kept
    }

    // MARK: LZ4

    private func compressLZ4(_ raw: UnsafeRawBufferPointer, appendingTo output: inout [UInt8]) -> Bool {
        guard let source = raw.baseAddress else { return false }
        var preferences = LZ4F_preferences_t()
        preferences.frameInfo.blockSizeID =
            switch raw.count {
            case ...(64 << 10): LZ4F_max64KB
            case ...(256 << 10): LZ4F_max256KB
            case ...(1 << 20): LZ4F_max1MB
            default: LZ4F_max4MB
            }
        preferences.frameInfo.blockMode = LZ4F_blockIndependent
        preferences.frameInfo.contentChecksumFlag = LZ4F_noContentChecksum
        preferences.frameInfo.blockChecksumFlag = LZ4F_noBlockChecksum
        preferences.frameInfo.frameType = LZ4F_frame
        preferences.frameInfo.contentSize = UInt64(raw.count)
        preferences.compressionLevel = 0
        // LZ4F_compressFrame refuses a destination smaller than this bound.
        let bound = LZ4F_compressFrameBound(raw.count, &preferences)
        guard LZ4F_isError(bound) == 0 else { return false }
        return appendIfSmaller(&output, capacity: bound) { destination in
            guard let base = destination.baseAddress else { return nil }
            let size = LZ4F_compressFrame(base, destination.count, source, raw.count, &preferences)
            guard LZ4F_isError(size) == 0, size < raw.count else { return nil }
            return size
        }
    }

    // MARK: zlib

    private func compressZlib(_ raw: UnsafeRawBufferPointer, appendingTo output: inout [UInt8]) -> Bool {
        guard let source = raw.baseAddress, let stream = makeDeflateStream() else { return false }
        guard deflateReset(stream) == Z_OK else {
            discardDeflateStream()
            return false
        }
        // Only an output strictly smaller than the input is worth keeping, so deflate gets
        // `raw.count - 1` bytes of room and stops early on incompressible data.
        let capacity = raw.count - 1
        return appendIfSmaller(&output, capacity: capacity) { destination in
            guard let outputBase = destination.baseAddress else { return nil }
            var consumed = 0
            var produced = 0
            while true {
                // avail_in and avail_out are 32-bit: feed and drain at most 4 GiB - 1 per call.
                let inputStep = min(raw.count - consumed, Int(UInt32.max))
                let outputStep = min(capacity - produced, Int(UInt32.max))
                stream.pointee.next_in = UnsafeMutablePointer(
                    mutating: (source + consumed).assumingMemoryBound(to: Bytef.self))
                stream.pointee.avail_in = uInt(truncatingIfNeeded: inputStep)
                stream.pointee.next_out = (outputBase + produced).assumingMemoryBound(to: Bytef.self)
                stream.pointee.avail_out = uInt(truncatingIfNeeded: outputStep)
                let flush = consumed + inputStep == raw.count ? Z_FINISH : Z_NO_FLUSH
                let status = deflate(stream, flush)
                consumed += inputStep - Int(stream.pointee.avail_in)
                produced += outputStep - Int(stream.pointee.avail_out)
                if status == Z_STREAM_END { return produced }
                // Z_BUF_ERROR: no progress possible. A full output means "not smaller".
                guard status == Z_OK, produced < capacity else { return nil }
            }
        }
    }

    private func makeDeflateStream() -> UnsafeMutablePointer<z_stream>? {
        if let deflateStream { return deflateStream }
        let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        stream.initialize(to: z_stream())
        guard cairn_deflateInit(stream, Int32(truncatingIfNeeded: method.level)) == Z_OK else {
            stream.deinitialize(count: 1)
            stream.deallocate()
            return nil
        }
        deflateStream = stream
        return stream
    }

    private func discardDeflateStream() {
        guard let deflateStream else { return }
        deflateEnd(deflateStream)
        deflateStream.deinitialize(count: 1)
        deflateStream.deallocate()
        self.deflateStream = nil
    }

    // MARK: zstd

    private func compressZstd(_ raw: UnsafeRawBufferPointer, appendingTo output: inout [UInt8]) -> Bool {
        guard let source = raw.baseAddress, let context = makeZstdContext() else { return false }
        // As for zlib: room for strictly fewer bytes than the input.
        return appendIfSmaller(&output, capacity: raw.count - 1) { destination in
            guard let base = destination.baseAddress else { return nil }
            // ZSTD_compress2 starts a new frame, keeps the parameters, and with the whole input
            // at hand writes its size into the frame header.
            let size = ZSTD_compress2(context, base, destination.count, source, raw.count)
            guard ZSTD_isError(size) == 0 else {
                ZSTD_CCtx_reset(context, ZSTD_reset_session_only)
                return nil
            }
            return size
        }
    }

    private func makeZstdContext() -> OpaquePointer? {
        if let zstdContext { return zstdContext }
        guard let context = ZSTD_createCCtx() else { return nil }
        let level = Int32(truncatingIfNeeded: method.level)
        guard ZSTD_isError(ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, level)) == 0,
            ZSTD_isError(ZSTD_CCtx_setParameter(context, ZSTD_c_contentSizeFlag, 1)) == 0,
            ZSTD_isError(ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, 0)) == 0
        else {
            ZSTD_freeCCtx(context)
            return nil
        }
        zstdContext = context
        return context
    }
}
