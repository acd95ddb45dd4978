internal import CLZ4
internal import CZlib
internal import CZstd

/// Decodes stored chunk payloads (see ``ChunkCompressor``) into caller-owned memory, reusing its
/// C contexts.
///
/// Decoding is strict, because the payload comes from a file: it writes at most `rawLength`
/// bytes, and anything but exactly one well-formed frame or stream that decodes to exactly
/// `rawLength` bytes is rejected as `.corrupted`.
///
/// - Important: One decompressor per worker; it is not `Sendable`. Its contexts are created on
///   first use, reset after every error so the object stays usable, and freed exactly once in
///   `deinit`.
package final class ChunkDecompressor {
    /// An LZ4 frame decompression context, or `nil` until first needed.
    private var lz4Context: OpaquePointer?
    /// An inflate stream, or `nil` until first needed.
    private var inflateStream: UnsafeMutablePointer<z_stream>?
    /// A zstd decompression context, or `nil` until first needed.
    private var zstdContext: OpaquePointer?
    /// Where output goes once the destination is full, to detect a payload that decodes to
    /// more than its declared length without writing past the destination.
    private let overflow: UnsafeMutableRawBufferPointer

    /// Creates a decompressor.
    package init() {
        overflow = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 8)
    }

    deinit {
        overflow.deallocate()
        LZ4F_freeDecompressionContext(lz4Context)
        if let inflateStream {
            inflateEnd(inflateStream)
            inflateStream.deinitialize(count: 1)
            inflateStream.deallocate()
        }
        ZSTD_freeDCtx(zstdContext)
    }

    /// Decodes a stored payload into exactly `rawLength` bytes at the start of `destination`.
    ///
    /// - Parameters:
    ///   - codec: The codec the payload is stored with.
    ///   - stored: The payload as read from the archive.
    ///   - rawLength: The chunk's declared length in bytes.
    ///   - destination: At least `rawLength` bytes; bytes after the first `rawLength` are never
    ///     written, and the first `rawLength` may be partly written when this throws.
    /// - Throws: ``CairnError`` with code `.corrupted` when the payload is malformed, truncated,
    ///   followed by trailing bytes, or decodes to more or fewer than `rawLength` bytes;
    ///   `.invalidArgument` when `rawLength` is negative or `destination` is too small; `.io`
    ///   when a codec context cannot be allocated.
    package func decompress(
        codec: ChunkCodec, stored: UnsafeRawBufferPointer, rawLength: Int,
        into destination: UnsafeMutableRawBufferPointer
    ) throws(CairnError) {
        guard rawLength >= 0, destination.count >= rawLength else {
            throw CairnError(
                .invalidArgument,
                "cannot decode a chunk of \(rawLength) bytes into a buffer of \(destination.count) bytes")
        }
        let output = UnsafeMutableRawBufferPointer(rebasing: destination[0..<rawLength])
        switch codec {
        case .none:
            guard stored.count == rawLength else {
                throw CairnError(
                    .corrupted,
                    "stored chunk is \(stored.count) bytes but its declared length is \(rawLength) bytes")
            }
            output.copyMemory(from: stored)
        case .lz4:
            try decodeLZ4(stored, into: output)
        case .zlib:
            try decodeZlib(stored, into: output)
        case .zstd:
            try decodeZstd(stored, into: output)
        }
    }

    /// Decodes a stored payload into a new array of `rawLength` bytes.
    ///
    /// - Throws: As ``decompress(codec:stored:rawLength:into:)``.
    package func decompress(codec: ChunkCodec, stored: UnsafeRawBufferPointer, rawLength: Int) throws(CairnError)
        -> [UInt8]
    {
        guard rawLength >= 0 else {
            throw CairnError(.invalidArgument, "a chunk cannot have a negative length (\(rawLength))")
        }
        var failure: CairnError?
        let bytes = [UInt8](unsafeUninitializedCapacity: rawLength) { buffer, initializedCount in
            do throws(CairnError) {
                try decompress(
                    codec: codec, stored: stored, rawLength: rawLength,
                    into: UnsafeMutableRawBufferPointer(buffer))
                initializedCount = rawLength
            } catch {
                failure = error
                initializedCount = 0
            }
        }
        if let failure { throw failure }
        return bytes
    }

    // MARK: Errors

    private static func pastLength(_ rawLength: Int) -> CairnError {
        CairnError(.corrupted, "chunk inflates past its declared length of \(rawLength) bytes")
    }

    private static func shortOfLength(_ produced: Int, _ rawLength: Int) -> CairnError {
        CairnError(
            .corrupted, "chunk inflates to \(produced) bytes, short of its declared length of \(rawLength) bytes")
    }

    private static func trailing(_ count: Int, after codec: String) -> CairnError {
        CairnError(.corrupted, "\(count) trailing bytes after the end of the chunk's \(codec)")
    }

    // MARK: LZ4

    private func decodeLZ4(_ stored: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer)
        throws(CairnError)
    {
        let context = try makeLZ4Context()
        LZ4F_resetDecompressionContext(context)
        do throws(CairnError) {
            try decodeLZ4(stored, into: output, context: context)
        } catch {
            LZ4F_resetDecompressionContext(context)
            throw error
        }
    }

    private func decodeLZ4(
        _ stored: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer, context: OpaquePointer
    ) throws(CairnError) {
        func malformed(_ code: Int) -> CairnError {
            CairnError(.corrupted, "malformed LZ4 frame", cause: String(cString: LZ4F_getErrorName(code)))
        }
        guard let source = stored.baseAddress, !stored.isEmpty else {
            throw CairnError(.corrupted, "LZ4 chunk payload is empty")
        }
        let rawLength = output.count
        // Read the header first to reject skippable frames and a content size that disagrees.
        var info = LZ4F_frameInfo_t()
        var consumedNow = stored.count
        let header = LZ4F_getFrameInfo(context, &info, source, &consumedNow)
        guard LZ4F_isError(header) == 0 else { throw malformed(header) }
        guard info.frameType == LZ4F_frame else {
            throw CairnError(.corrupted, "LZ4 chunk payload is a skippable frame, not a data frame")
        }
        // A content size of 0 means "not recorded".
        if info.contentSize > UInt64(rawLength) { throw Self.pastLength(rawLength) }
        if info.contentSize != 0, info.contentSize < UInt64(rawLength) {
            throw CairnError(
                .corrupted,
                "LZ4 frame declares \(info.contentSize) bytes but the chunk's declared length is \(rawLength) bytes")
        }
        var consumed = consumedNow
        var produced = 0
        while true {
            // Once the destination is full, decode into `overflow`: any byte there is too many.
            let outputFull = produced == rawLength
            guard let target = outputFull ? overflow.baseAddress : output.baseAddress.map({ $0 + produced })
            else { throw Self.pastLength(rawLength) }
            var written = outputFull ? overflow.count : rawLength - produced
            consumedNow = stored.count - consumed
            let hint = LZ4F_decompress(context, target, &written, source + consumed, &consumedNow, nil)
            guard LZ4F_isError(hint) == 0 else { throw malformed(hint) }
            if outputFull, written > 0 { throw Self.pastLength(rawLength) }
            if !outputFull { produced += written }
            consumed += consumedNow
            if hint == 0 { break }  // the frame is complete
            if written == 0, consumedNow == 0 {
                throw CairnError(.corrupted, "LZ4 chunk payload ends before its frame is complete")
            }
        }
        guard consumed == stored.count else { throw Self.trailing(stored.count - consumed, after: "LZ4 frame") }
        guard produced == rawLength else { throw Self.shortOfLength(produced, rawLength) }
    }

    private func makeLZ4Context() throws(CairnError) -> OpaquePointer {
        if let lz4Context { return lz4Context }
        var context: OpaquePointer?
        let status = LZ4F_createDecompressionContext(&context, UInt32(LZ4F_VERSION))
        guard LZ4F_isError(status) == 0, let context else {
            LZ4F_freeDecompressionContext(context)
            throw CairnError(.io, "cannot allocate an LZ4 decompression context")
        }
        lz4Context = context
        return context
    }

    // MARK: zlib

    private func decodeZlib(_ stored: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer)
        throws(CairnError)
    {
        let stream = try makeInflateStream()
        guard inflateReset(stream) == Z_OK else {
            discardInflateStream()
            throw CairnError(.io, "cannot reset a zlib inflate stream")
        }
        do throws(CairnError) {
            try decodeZlib(stored, into: output, stream: stream)
        } catch {
            // Leave the stream clean for the next chunk.
            if inflateReset(stream) != Z_OK { discardInflateStream() }
            throw error
        }
    }

    private func decodeZlib(
        _ stored: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer,
        stream: UnsafeMutablePointer<z_stream>
    ) throws(CairnError) {
        let rawLength = output.count
        var consumed = 0
        var produced = 0
        loop: while true {
            let outputFull = produced == rawLength
            guard let target = outputFull ? overflow.baseAddress : output.baseAddress.map({ $0 + produced })
            else { throw Self.pastLength(rawLength) }
            // avail_in and avail_out are 32-bit: at most 4 GiB - 1 per call.
            let outputStep = outputFull ? overflow.count : min(rawLength - produced, Int(UInt32.max))
            let inputStep = min(stored.count - consumed, Int(UInt32.max))
            stream.pointee.next_in = stored.baseAddress.map {
                UnsafeMutablePointer(mutating: ($0 + consumed).assumingMemoryBound(to: Bytef.self))
            }
            stream.pointee.avail_in = uInt(truncatingIfNeeded: inputStep)
            stream.pointee.next_out = target.assumingMemoryBound(to: Bytef.self)
            stream.pointee.avail_out = uInt(truncatingIfNeeded: outputStep)
            let status = inflate(stream, Z_NO_FLUSH)
            let written = outputStep - Int(stream.pointee.avail_out)
            consumed += inputStep - Int(stream.pointee.avail_in)
            if outputFull, written > 0 { throw Self.pastLength(rawLength) }
            if !outputFull { produced += written }
            switch status {
            case Z_STREAM_END:
                break loop
            case Z_OK:
                continue
            case Z_BUF_ERROR where consumed == stored.count:
                throw CairnError(.corrupted, "zlib chunk payload ends before its stream is complete")
            case Z_NEED_DICT:
                throw CairnError(.corrupted, "zlib chunk payload asks for a preset dictionary")
            case Z_MEM_ERROR:
                throw CairnError(.io, "zlib could not allocate memory to inflate a chunk")
            default:
                let cause = stream.pointee.msg.map { String(cString: $0) } ?? "zlib status \(status)"
                throw CairnError(.corrupted, "malformed zlib stream", cause: cause)
            }
        }
        guard consumed == stored.count else { throw Self.trailing(stored.count - consumed, after: "zlib stream") }
        guard produced == rawLength else { throw Self.shortOfLength(produced, rawLength) }
    }

    private func makeInflateStream() throws(CairnError) -> UnsafeMutablePointer<z_stream> {
        if let inflateStream { return inflateStream }
        let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        stream.initialize(to: z_stream())
        guard cairn_inflateInit(stream) == Z_OK else {
            stream.deinitialize(count: 1)
            stream.deallocate()
            throw CairnError(.io, "cannot allocate a zlib inflate stream")
        }
        inflateStream = stream
        return stream
    }

    private func discardInflateStream() {
        guard let inflateStream else { return }
        inflateEnd(inflateStream)
        inflateStream.deinitialize(count: 1)
        inflateStream.deallocate()
        self.inflateStream = nil
    }

    // MARK: zstd

    /// The first four bytes of a Zstandard data frame, little-endian (RFC 8878 §3.1.1).
    private static let zstdMagic: UInt32 = 0xFD2F_B528
    /// `ZSTD_CONTENTSIZE_UNKNOWN` and `ZSTD_CONTENTSIZE_ERROR`, which are not imported.
    private static let zstdContentSizeUnknown = UInt64.max
    private static let zstdContentSizeError = UInt64.max - 1

    private func decodeZstd(_ stored: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer)
        throws(CairnError)
    {
        let rawLength = output.count
        guard let source = stored.baseAddress, stored.count >= 4,
            UInt32(littleEndian: stored.loadUnaligned(as: UInt32.self)) == Self.zstdMagic
        else {
            throw CairnError(.corrupted, "zstd chunk payload does not start with a zstd frame")
        }
        // The frame's extent and declared size, from its header and block headers, before any
        // output is written.
        let frameSize = ZSTD_findFrameCompressedSize(source, stored.count)
        guard ZSTD_isError(frameSize) == 0 else {
            throw CairnError(
                .corrupted, "malformed or truncated zstd frame", cause: String(cString: ZSTD_getErrorName(frameSize)))
        }
        let contentSize = ZSTD_getFrameContentSize(source, stored.count)
        switch contentSize {
        case Self.zstdContentSizeError:
            throw CairnError(.corrupted, "malformed zstd frame header")
        case Self.zstdContentSizeUnknown:
            throw CairnError(.corrupted, "zstd frame does not record its content size")
        case let size where size > UInt64(rawLength):
            throw Self.pastLength(rawLength)
        case let size where size < UInt64(rawLength):
            throw CairnError(
                .corrupted, "zstd frame declares \(size) bytes but the chunk's declared length is \(rawLength) bytes")
        default:
            break
        }
        guard frameSize == stored.count else { throw Self.trailing(stored.count - frameSize, after: "zstd frame") }
        let context = try makeZstdContext()
        // A zero-length destination may have no address; zstd wants one.
        guard let target = output.baseAddress ?? overflow.baseAddress else { throw Self.pastLength(rawLength) }
        // Writes at most `rawLength` bytes and checks the result against the declared size.
        let result = ZSTD_decompressDCtx(context, target, rawLength, source, frameSize)
        guard ZSTD_isError(result) == 0 else {
            ZSTD_DCtx_reset(context, ZSTD_reset_session_only)
            throw CairnError(
                .corrupted, "malformed zstd frame", cause: String(cString: ZSTD_getErrorName(result)))
        }
        guard result == rawLength else { throw Self.shortOfLength(result, rawLength) }
    }

    private func makeZstdContext() throws(CairnError) -> OpaquePointer {
        if let zstdContext { return zstdContext }
        guard let context = ZSTD_createDCtx() else {
            throw CairnError(.io, "cannot allocate a zstd decompression context")
        }
        zstdContext = context
        return context
    }
}
