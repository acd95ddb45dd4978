import Synchronization

/// An encrypted archive read once, front to back (standard input, one GET, a file read whole):
/// its sealed blocks opened in order on a thread of their own, the inner archive's bytes handed
/// to the reader through a pipe (`Spec/0004-trusted-archives.md §6.3`).
///
/// Which block is the last is learned by reading one block ahead: a block followed by the end of
/// the input must open as the final one. A block that does not open ends the stream with an
/// error naming its index and outer offset, and nothing of it reaches the reader; so does an
/// input cut at a block boundary (after the bytes before the cut, which are authentic, so the
/// reader reports the cut as it reports a cut plain archive).
package enum SealedBlockStream {
    /// The inner archive of the outer sequential bytes `outer`, whose first `envelopeLength`
    /// bytes (prelude and envelope record) were read and opened already.
    ///
    /// - Parameter expectedPrefix: the outer bytes before block 0 as read at random; the
    ///   sequential read must see the same.
    package static func open(
        _ outer: SequentialArchiveBytes, expectedPrefix: [UInt8], keying: ChunkKeying, sealer: BlockSealer, blockSize: UInt64,
        partial: Bool, name: String
    ) throws(CairnError) -> SequentialArchiveBytes {
        let outer = OuterBytes(outer)
        let producer = try PipeProducer(name: name) { (writer) throws(CairnError) in
            do throws(CairnError) {
                var seen = [UInt8](repeating: 0, count: expectedPrefix.count)
                let got = try seen.withMutableBytes { (raw) throws(CairnError) in try outer.bytes.descriptor.readFully(into: raw) }
                guard got == seen.count, seen == expectedPrefix else {
                    throw CairnError(.sourceChanged, "the encrypted archive's envelope changed between two reads", path: name, offset: 0)
                }
                try pump(
                    outer.bytes.descriptor, firstBlockAt: UInt64(expectedPrefix.count), sealer: sealer, blockSize: blockSize, partial: partial,
                    name: name, into: writer)
            } catch {
                throw ending(outer, after: error)
            }
            try outer.finish()
        }
        return SequentialArchiveBytes(
            descriptor: producer.output,
            finish: { () throws(CairnError) in try producer.finish() },
            cancel: {
                producer.cancel()
                outer.cancel()
            }, keying: keying)
    }

    /// The inner archive of the encrypted archive read once from `outer` (standard input, one
    /// GET): reads its envelope record here, opens its key block with `openKeyBlock`, then opens
    /// its blocks on a thread of their own; `outer` is finished (or cancelled) with the result.
    ///
    /// - Throws: what ``OpenedEnvelope/readRecord(name:_:)`` and `openKeyBlock` throw, naming
    ///   `name`.
    ///
    /// - Parameter partial: `outer` is a partial file (a fetch under way): no block is final.
    package static func open(
        _ outer: SequentialArchiveBytes, name: String, partial: Bool = false, openKeyBlock: (EnvelopeRecord) throws(CairnError) -> [UInt8]
    ) throws(CairnError) -> (bytes: SequentialArchiveBytes, envelope: OpenedEnvelope) {
        let input = outer.descriptor
        let outer = OuterBytes(outer)
        let (record, prefix) = try OpenedEnvelope.readRecord(name: name) { (count) throws(CairnError) in
            var bytes = [UInt8](repeating: 0, count: count)
            let got = try bytes.withMutableBytes { (raw) throws(CairnError) in try input.readFully(into: raw) }
            return Array(bytes[0..<got])
        }
        let envelope: OpenedEnvelope
        do throws(CairnError) {
            envelope = try OpenedEnvelope(record: record, prefix: prefix, openKeyBlock: openKeyBlock)
        } catch {
            throw error.withPath(name)
        }
        let sealer = try BlockSealer(key: envelope.secrets.blockKey, archiveID: record.archiveID)
        let keying = try envelope.secrets.chunkKeying()
        let producer = try PipeProducer(name: name) { (writer) throws(CairnError) in
            do throws(CairnError) {
                try pump(
                    input, firstBlockAt: envelope.dataStart, sealer: sealer, blockSize: UInt64(record.blockSize), partial: partial,
                    name: name, into: writer)
            } catch {
                throw ending(outer, after: error)
            }
            try outer.finish()
        }
        let bytes = SequentialArchiveBytes(
            descriptor: producer.output, finish: { () throws(CairnError) in try producer.finish() },
            cancel: {
                producer.cancel()
                outer.cancel()
            }, keying: keying)
        return (bytes, envelope)
    }

    /// The inner archive of outer bytes arriving through `input` from the start of sealed block
    /// `index` on (a fetch's bytes as they are appended to its partial file), opened block by
    /// block on a thread of their own, by the same rule as every other reader; the last block
    /// is the one the end of `input` follows.
    ///
    /// - Parameters:
    ///   - envelope: the archive's opened envelope (read from `input` first, or from the partial
    ///     file a fetch continues).
    ///   - skipping: leading plaintext bytes of block `index` not passed on (the reader has them).
    ///   - onFailure: told what ended the opening thread, before the inner bytes end: a reader
    ///     that sees them end early names this cause rather than a cut inner archive.
    /// - Throws: `.io` when the pipe or its thread cannot be made.
    package static func open(
        arriving input: any ByteInput & Sendable, envelope: OpenedEnvelope, firstBlock index: UInt64, skipping: Int, name: String,
        onFailure: @escaping @Sendable (CairnError) -> Void
    ) throws(CairnError) -> SequentialArchiveBytes {
        let blockSize = UInt64(envelope.record.blockSize)
        let sealer = try BlockSealer(key: envelope.secrets.blockKey, archiveID: envelope.record.archiveID)
        let layout = SealedBlockLayout(dataStart: envelope.dataStart, blockSize: blockSize, innerSize: 0)
        let keying = try envelope.secrets.chunkKeying()
        let producer = try PipeProducer(name: name) { (writer) throws(CairnError) in
            do throws(CairnError) {
                try pump(
                    input, firstBlockAt: envelope.dataStart + index * layout.sealedBlockSize, firstIndex: index, skipping: skipping,
                    sealer: sealer, blockSize: blockSize, partial: false, name: name, into: writer)
            } catch {
                onFailure(error)
                throw error
            }
        }
        return SequentialArchiveBytes(
            descriptor: producer.output, finish: { () throws(CairnError) in try producer.finish() }, cancel: { producer.cancel() },
            keying: keying)
    }

    /// What to throw when opening `outer`'s blocks failed with `error`: after a short read (the
    /// input is at its end, so waiting for its transfer cannot block) the transfer's own failure
    /// (a cut connection) when there is one; `outer` is released either way.
    private static func ending(_ outer: OuterBytes, after error: CairnError) -> CairnError {
        guard error.code == .truncated else {
            outer.cancel()
            return error
        }
        do throws(CairnError) { try outer.finish() } catch { return error }
        return error
    }

    /// The error for block `index` (at `outerOffset`) whose tag does not verify
    /// (`Spec/0004-trusted-archives.md §6.3` "Opening" item 1): damage, reported alone and never
    /// as a cut to resume, unless `mayBeCut`.
    ///
    /// - Parameter mayBeCut: the block is the last one read, shorter than a whole sealed block, in
    ///   an archive that should be complete, and it does not end with a footer
    ///   (``endsWithFooter(_:sealer:)``): its bytes may end where the archive was cut inside it,
    ///   which the reader's account of the cut then follows.
    package static func failure(index: UInt64, outerOffset: UInt64, mayBeCut: Bool, name: String) -> CairnError {
        CairnError(
            .checksumMismatch,
            "sealed block \(index) fails authentication: "
                + (mayBeCut ? "it was altered, or the archive was cut inside it\(cutInside)" : "it was altered, or comes from another archive or another position"),
            path: name, offset: outerOffset)
    }

    /// What ``failure(index:outerOffset:mayBeCut:name:)`` adds when the block may be cut.
    private static let cutInside = " (its last block)"

    /// Whether `error`, which ended a stream of sealed blocks, is damage rather than a possible
    /// cut (`Spec/0004-trusted-archives.md §6.3` "Opening" item 1): a block that fails
    /// authentication (``failure(index:outerOffset:mayBeCut:name:)``, a whole last block
    /// included), an envelope that changed, a corrupt record. A last block cut short and a lost
    /// connection are cuts: for those the reader's account of the cut stays useful.
    package static func isDamage(_ error: CairnError) -> Bool {
        switch error.code {
        case .corrupted, .sourceChanged: return true
        case .checksumMismatch: return !error.message.hasSuffix(cutInside)
        default: return false
        }
    }

    /// Whether the last block read, `sealed` (`nonce ‖ ciphertext ‖ tag`), which fails
    /// authentication, was written whole as the archive's last block: its plaintext, decrypted
    /// without the tag for this diagnosis only (nothing of it is released or used), ends with a
    /// well-formed footer record (its type, length and CRC-32). A block cut short ends inside the
    /// archive and almost never does; an altered last block whose footer bytes are intact does.
    /// A last block whose plaintext is shorter than a footer gives false.
    package static func endsWithFooter(_ sealed: UnsafeRawBufferPointer, sealer: BlockSealer) -> Bool {
        let length = sealed.count - BlockSealer.overhead
        guard length >= Footer.framedLength else { return false }
        let from = (length - Footer.framedLength) / BlockSealer.keystreamBlock * BlockSealer.keystreamBlock
        let nonce = UnsafeRawBufferPointer(rebasing: sealed[0..<BlockSealer.nonceByteCount])
        let ciphertext = UnsafeRawBufferPointer(rebasing: sealed[(BlockSealer.nonceByteCount + from)..<(BlockSealer.nonceByteCount + length)])
        guard let plaintext = sealer.decryptUnauthenticated(ciphertext, nonce: nonce, at: from) else { return false }
        let footer = Array(plaintext.suffix(Footer.framedLength))
        let wellFormed = try? footer.withBytes { (raw) throws(CairnError) -> Bool in
            let header = try RecordCodec.parseHeader(raw, offset: 0)
            guard header.typeByte == RecordType.footer.rawValue, header.framedLength == Footer.framedLength else { return false }
            try RecordCodec.checkCRC(raw, offset: 0)
            return true
        }
        return wellFormed ?? false
    }

    /// Opens the blocks read from `input` in order and writes their plaintext through `writer`.
    ///
    /// - Parameters:
    ///   - firstIndex: the index of the first block `input` gives (0 unless resuming).
    ///   - skipping: leading plaintext bytes of that first block not written (the reader has them).
    private static func pump(
        _ input: any ByteInput, firstBlockAt start: UInt64, firstIndex: UInt64 = 0, skipping: Int = 0, sealer: BlockSealer,
        blockSize: UInt64, partial: Bool, name: String, into writer: PipeProducer.Writer
    ) throws(CairnError) {
        let sealedSize = Int(blockSize) + BlockSealer.overhead
        var current = try readBlock(input, sealedSize)
        var next = [UInt8](repeating: 0, count: sealedSize)
        var plaintext = [UInt8](repeating: 0, count: Int(blockSize))
        var index = firstIndex
        var skip = skipping
        var offset = start
        guard !current.isEmpty else { throw CairnError(.truncated, "the encrypted archive has no sealed block", path: name, offset: start) }
        while !writer.isCancelled {
            let atEnd: Bool
            if current.count == sealedSize {
                next = try readBlock(input, sealedSize)
                atEnd = next.isEmpty
            } else {
                atEnd = true
            }
            guard current.count > BlockSealer.overhead else {
                throw CairnError(
                    .truncated, "the last sealed block has \(current.count) bytes, too few for a nonce, a tag and one byte", path: name,
                    offset: offset)
            }
            let length = current.count - BlockSealer.overhead
            let opening = current.withUnsafeBytes { sealed in
                plaintext.withUnsafeMutableBytes { out in
                    Self.open(
                        sealed, index: index, isLast: atEnd, partial: partial, sealer: sealer,
                        into: UnsafeMutableRawBufferPointer(rebasing: out[0..<length]))
                }
            }
            guard opening != .failed else {
                let mayBeCut =
                    atEnd && !partial && current.count < sealedSize
                    && !current.withUnsafeBytes { Self.endsWithFooter($0, sealer: sealer) }
                throw failure(index: index, outerOffset: offset, mayBeCut: mayBeCut, name: name)
            }
            let from = min(skip, length)
            skip = 0
            try plaintext.withBytes { (raw) throws(CairnError) in try writer.write(UnsafeRawBufferPointer(rebasing: raw[from..<length])) }
            // A cut at a block boundary: the bytes before it are authentic, so the reader gets
            // them and reports the inner archive cut as it would a plain one.
            if opening == .cut { throw cutError(index: index, end: offset + UInt64(current.count), name: name) }
            if atEnd { return }
            swap(&current, &next)
            index += 1
            offset += UInt64(sealedSize)
        }
    }

    /// How a block opened.
    package enum Opening: Equatable {
        case opened
        /// The last block read opened only as a middle block: the archive was cut after it.
        case cut
        case failed
    }

    /// Opens one block: the one rule both readers follow. The last block of a complete archive
    /// must open as final; when it does not but opens as a middle block, the archive was cut at
    /// a block boundary (``Opening/cut``). In a partial archive no block is final.
    ///
    /// - Parameter isLast: no block follows this one in what was read.
    package static func open(
        _ sealed: UnsafeRawBufferPointer, index: UInt64, isLast: Bool, partial: Bool, sealer: BlockSealer,
        into plaintext: UnsafeMutableRawBufferPointer
    ) -> Opening {
        let final = isLast && !partial
        if sealer.open(sealed, index: index, isFinal: final, into: plaintext) { return .opened }
        if final, sealer.open(sealed, index: index, isFinal: false, into: plaintext) { return .cut }
        return .failed
    }

    /// The error for an archive cut after block `index`, whose bytes end at outer offset `end`.
    package static func cutError(index: UInt64, end: UInt64, name: String) -> CairnError {
        CairnError(
            .truncated, "the encrypted archive ends after sealed block \(index), which its writer did not mark as the last", path: name,
            offset: end)
    }

    /// Up to `count` bytes: fewer only at the end of the input.
    package static func readBlock(_ input: any ByteInput, _ count: Int) throws(CairnError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = try bytes.withMutableBytes { (raw) throws(CairnError) in
                try input.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[got...]))
            }
            if n == 0 { break }
            got += n
        }
        if got < count { bytes.removeSubrange(got...) }
        return bytes
    }
}

/// The outer bytes under a sealed stream, ended exactly once: the opening thread finishes them
/// when it reaches their end, the reader may cancel afterwards, and a descriptor closed twice could
/// close another file that reused its number.
private final class OuterBytes: Sendable {
    let bytes: SequentialArchiveBytes
    private let ended = Atomic<Bool>(false)

    init(_ bytes: SequentialArchiveBytes) { self.bytes = bytes }

    var descriptor: FileDescriptor { bytes.descriptor }

    func finish() throws(CairnError) {
        guard !ended.exchange(true, ordering: .acquiringAndReleasing) else { return }
        try bytes.finish()
    }

    func cancel() {
        guard !ended.exchange(true, ordering: .acquiringAndReleasing) else { return }
        bytes.cancel()
    }
}
