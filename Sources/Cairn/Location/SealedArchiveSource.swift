import Synchronization

/// The inner archive of an encrypted archive (`Spec/0004-trusted-archives.md §6`), read at
/// random through its sealed blocks: what every reader sees instead of the outer file once the
/// key block has been opened. Offsets and ``size`` are the inner archive's; the readers check it
/// as any 2.x archive, and its records mean exactly what they mean in a plain one.
///
/// A read opens (authenticates and decrypts) every block it touches, fetching the missing ones in
/// one call to the outer source (contiguous blocks in one range), and keeps the last few opened
/// blocks for the small reads of a record walk. No byte of a block is returned before its tag
/// verified.
package final class SealedArchiveSource: ArchiveSource, PositionalInput {
    package let base: any ArchiveSource
    package let layout: SealedBlockLayout
    package let secrets: ArchiveSecrets
    /// The envelope record (block size, archive id, key block), as read.
    package let envelope: EnvelopeRecord
    /// The inner archive's chunk id and chunker keys, from ``secrets``.
    package let keying: ChunkKeying
    private let sealer: BlockSealer
    /// The outer bytes before block 0.
    private let prefix: [UInt8]
    private let cache = Mutex(OpenedBlocks())
    /// The last block counts as final only in a complete archive; a partial one (being written,
    /// or cut) has none.
    private let partial: Bool

    /// Blocks kept for small reads: 16 × 16 KiB at the default block size.
    private static let cachedBlocks = 16

    package var name: String { base.name }
    package var size: UInt64 { layout.innerSize }
    package var isRemote: Bool { base.isRemote }
    package var connections: Int { base.connections }

    /// The inner archive behind the envelope `envelope` of `base`, with the keys its key block
    /// held.
    ///
    /// - Parameter partial: `base` is a partial file (a write or fetch under way): a torn last
    ///   block is left out and no block is taken as the final one.
    /// - Throws: `.truncated` naming the offset of a last block too short to be one.
    package init(base: any ArchiveSource, envelope: OpenedEnvelope, partial: Bool = false) throws(CairnError) {
        self.base = base
        self.secrets = envelope.secrets
        self.envelope = envelope.record
        keying = try envelope.secrets.chunkKeying()
        self.partial = partial
        prefix = envelope.prefix
        sealer = try BlockSealer(key: envelope.secrets.blockKey, archiveID: envelope.record.archiveID)
        do throws(CairnError) {
            layout = try SealedBlockLayout(
                dataStart: envelope.dataStart, blockSize: UInt64(envelope.record.blockSize), outerSize: base.size, partial: partial)
        } catch {
            throw error.withPath(base.name)
        }
    }

    /// Reads the envelope of the encrypted archive `base` serves, opens its key block with
    /// `openKeyBlock`, and returns its inner archive.
    ///
    /// - Throws: what ``OpenedEnvelope/readRecord(name:_:)`` throws (`.untrusted` for a plain
    ///   archive), what `openKeyBlock` throws, naming `base`'s name.
    package static func open(
        _ base: any ArchiveSource, partial: Bool = false, openKeyBlock: (EnvelopeRecord) throws(CairnError) -> [UInt8]
    ) throws(CairnError) -> SealedArchiveSource {
        let (record, prefix) = try OpenedEnvelope.readRecord(from: base)
        do throws(CairnError) {
            let envelope = try OpenedEnvelope(record: record, prefix: prefix, openKeyBlock: openKeyBlock)
            return try SealedArchiveSource(base: base, envelope: envelope, partial: partial)
        } catch {
            throw error.withPath(base.name)
        }
    }

    /// A partial file read as a complete archive when its last block opens as the final one (a
    /// write finished but not yet renamed into place, a copy that reached the end); else itself
    /// (`Spec/0004-trusted-archives.md §6.9`). The result shares ``base``: close only one.
    package func completedIfFinal() -> SealedArchiveSource {
        guard partial else { return self }
        let secrets = self.secrets
        guard let opened = try? OpenedEnvelope(record: envelope, prefix: prefix, openKeyBlock: { _ in secrets.encoded() }),
            let complete = try? SealedArchiveSource(base: base, envelope: opened, partial: false), complete.size > 0
        else { return self }
        var byte: [UInt8] = [0]
        let read = try? byte.withUnsafeMutableBytes { (raw) throws(CairnError) in
            try complete.read(fromAbsoluteOffset: complete.size - 1, into: raw)
        }
        return read == 1 ? complete : self
    }

    package func read(fromAbsoluteOffset offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws(CairnError) -> Int {
        guard offset < size, buffer.count > 0 else { return 0 }
        let range = offset..<min(offset + UInt64(buffer.count), size)
        let blocks = try openBlocks(layout.blocks(covering: range))
        copy(range, from: blocks, into: buffer)
        return range.count
    }

    package func read(ranges: [Range<UInt64>]) throws(CairnError) -> [[UInt8]] {
        var wanted = Set<UInt64>()
        for range in ranges {
            guard range.upperBound <= size else {
                throw CairnError(.truncated, "a read of \(range.count) bytes runs past the archive's end", path: name, offset: range.lowerBound)
            }
            for index in layout.blocks(covering: range) { wanted.insert(index) }
        }
        let blocks = try openBlocks(wanted.sorted())
        return ranges.map { range in
            var bytes = [UInt8](repeating: 0, count: range.count)
            bytes.withUnsafeMutableBytes { copy(range, from: blocks, into: $0) }
            return bytes
        }
    }

    /// The inner archive front to back: the outer source's sequential bytes opened block by
    /// block on a thread of their own (``SealedBlockStream``).
    package func openSequential() throws(CairnError) -> SequentialArchiveBytes {
        let outer = try base.openSequential()
        do throws(CairnError) {
            return try SealedBlockStream.open(
                outer, expectedPrefix: prefix, keying: keying, sealer: sealer, blockSize: layout.blockSize, partial: partial, name: name)
        } catch {
            outer.cancel()
            throw error
        }
    }

    package func close() {
        cache.withLock { $0 = OpenedBlocks() }
        base.close()
    }

    /// The plaintext of `indices`, from the cache or opened now.
    private func openBlocks<S: Sequence<UInt64>>(_ indices: S) throws(CairnError) -> [UInt64: [UInt8]] {
        var found: [UInt64: [UInt8]] = [:]
        var missing: [UInt64] = []
        cache.withLock { cache in
            for index in indices {
                if let bytes = cache.blocks[index] { found[index] = bytes } else { missing.append(index) }
            }
        }
        guard !missing.isEmpty else { return found }
        let runs = Self.runs(of: missing)
        let outer = try base.read(ranges: runs.map { layout.outerRange(of: $0.lowerBound).lowerBound..<layout.outerRange(of: $0.upperBound - 1).upperBound })
        for (run, bytes) in zip(runs, outer) {
            var position = 0
            for index in run {
                let length = layout.outerRange(of: index).count
                guard position + length <= bytes.count else {
                    throw CairnError(.truncated, "sealed block \(index) is cut off", path: name, offset: layout.outerRange(of: index).lowerBound)
                }
                found[index] = try open(bytes[position..<(position + length)], index: index)
                position += length
            }
        }
        cache.withLock { cache in
            for index in missing { if let bytes = found[index] { cache.insert(bytes, at: index, keeping: Self.cachedBlocks) } }
        }
        return found
    }

    /// Opens block `index` from its sealed bytes (``SealedBlockStream/open(_:index:isLast:partial:sealer:into:)``).
    private func open(_ sealed: ArraySlice<UInt8>, index: UInt64) throws(CairnError) -> [UInt8] {
        var plaintext = [UInt8](repeating: 0, count: sealed.count - BlockSealer.overhead)
        let isLast = index + 1 == layout.blockCount
        let opening = sealed.withUnsafeBytes { input in
            plaintext.withUnsafeMutableBytes {
                SealedBlockStream.open(input, index: index, isLast: isLast, partial: partial, sealer: sealer, into: $0)
            }
        }
        switch opening {
        case .opened: return plaintext
        case .cut: throw SealedBlockStream.cutError(index: index, end: layout.outerRange(of: index).upperBound, name: name)
        case .failed:
            let mayBeCut =
                isLast && !partial && sealed.count < Int(layout.sealedBlockSize)
                && !sealed.withUnsafeBytes { SealedBlockStream.endsWithFooter($0, sealer: sealer) }
            throw SealedBlockStream.failure(index: index, outerOffset: layout.outerRange(of: index).lowerBound, mayBeCut: mayBeCut, name: name)
        }
    }

    /// Copies the bytes of `range` out of opened `blocks` into `buffer`.
    private func copy(_ range: Range<UInt64>, from blocks: [UInt64: [UInt8]], into buffer: UnsafeMutableRawBufferPointer) {
        var written = 0
        for index in layout.blocks(covering: range) {
            guard let block = blocks[index] else { continue }
            let inner = layout.innerRange(of: index)
            let from = max(range.lowerBound, inner.lowerBound) - inner.lowerBound
            let to = min(range.upperBound, inner.upperBound) - inner.lowerBound
            block.withUnsafeBytes { source in
                let piece = UnsafeRawBufferPointer(rebasing: source[Int(from)..<Int(to)])
                UnsafeMutableRawBufferPointer(rebasing: buffer[written..<(written + piece.count)]).copyMemory(from: piece)
            }
            written += Int(to - from)
        }
    }

    /// Sorted block indices grouped into runs of consecutive ones.
    private static func runs(of sorted: [UInt64]) -> [Range<UInt64>] {
        var runs: [Range<UInt64>] = []
        for index in sorted {
            if let last = runs.last, last.upperBound == index {
                runs[runs.count - 1] = last.lowerBound..<(index + 1)
            } else {
                runs.append(index..<(index + 1))
            }
        }
        return runs
    }
}

/// Opened blocks by index, the oldest dropped first.
private struct OpenedBlocks {
    var blocks: [UInt64: [UInt8]] = [:]
    var order: [UInt64] = []

    mutating func insert(_ bytes: [UInt8], at index: UInt64, keeping capacity: Int) {
        if blocks.updateValue(bytes, forKey: index) == nil { order.append(index) }
        while order.count > capacity { blocks[order.removeFirst()] = nil }
    }
}
