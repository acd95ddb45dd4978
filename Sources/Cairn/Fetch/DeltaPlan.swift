/// How a seeded fetch rebuilds a remote archive by copying (`Spec/0001-container-format.md
/// §13.6.2`): which byte ranges are copied from seeds and which are downloaded. Used when
/// rebuilding by writing (``ArchiveRebuilder``) does not apply or failed, and to resume.
///
/// The remote manifest names where every chunk record, pack record and entry record starts; a
/// chunk record's length follows from its row. A range is copied when a seed has a record that
/// should have the same bytes:
/// - a chunk record with the same id, codec and framed length;
/// - a pack record whose inline chunks have the same ids (content digest) and whose length fills
///   the space up to the next known record less one commit record (the whole record is copied);
/// - failing that, a pack with the same content digest: only its stored content section is
///   copied, and the pack's framing, prefix, item table and CRC are downloaded.
///
/// Everything else (the prelude, header, commits, entry, chunk-references and file-end records,
/// and records no seed has) is downloaded, in ranges. The plan trusts the manifest only for
/// where to look: the rebuilt bytes are verified as a whole (every CRC, chunk id and chain
/// digest), and a copied range that fails is downloaded on the next attempt
/// (``distrusted``).
package struct DeltaPlan: Sendable {
    /// One contiguous piece of the archive, in order.
    package enum Segment: Sendable, Equatable {
        /// Download these archive bytes.
        case fetch(Range<UInt64>)
        /// Copy these archive bytes from seed `seed`, starting at `from` in it.
        case copy(seed: Int, from: UInt64, to: Range<UInt64>)
        /// Copy one whole record (a chunk record) from seed `seed` at `from`, when its framing
        /// and CRC-32 hold there (``SeedIndex/checkedRecord(seed:at:framedLength:)``); a seed
        /// record that fails them is downloaded instead, before anything is written.
        case copyRecord(seed: Int, from: UInt64, to: Range<UInt64>)
        /// Copy records from seed `seed` but the last one's CRC-32, which the next segment (a
        /// download) starts with: the writer reads that first and copies only when it equals
        /// the seed's own CRC (the 4 bytes after `to` in the seed). Otherwise, for a pack, the
        /// item tables differ (metadata, or dedup references by chunk index, changed): the
        /// first `contentStart` bytes (framing, prefix, item table) are downloaded and the
        /// content section is still copied; when `contentStart` is the whole length, all of
        /// `to` is downloaded.
        case copyCheckingCRC(seed: Int, from: UInt64, to: Range<UInt64>, contentStart: UInt64)

        /// The archive bytes this segment produces.
        package var range: Range<UInt64> {
            switch self {
            case .fetch(let range): return range
            case .copy(_, _, let range), .copyRecord(_, _, let range), .copyCheckingCRC(_, _, let range, _): return range
            }
        }

        /// Whether bytes come from a seed.
        package var isCopy: Bool {
            if case .fetch = self { return false }
            return true
        }
    }

    /// Segments covering `start ..< end` without gaps, in order.
    package var segments: [Segment]
    private let knownStarts: KnownStarts
    private let manifestOffset: UInt64

    /// The copies to distrust when the rebuilt bytes after `start` failed verification at the
    /// record at `offset`: every copy from `start` up to the end of that record (the next known
    /// start), so that a copy of a pack's content section, which starts inside the record whose
    /// CRC-32 fails, is among them.
    package func suspects(after start: UInt64, failingAt offset: UInt64) -> [Segment] {
        let limit = knownStarts.next(after: offset) ?? manifestOffset
        return segments.filter { $0.isCopy && $0.range.lowerBound >= start && $0.range.lowerBound < max(limit, offset + 1) }
    }

    /// Bytes the plan downloads.
    package var fetchBytes: UInt64 {
        segments.reduce(0) { if case .fetch(let r) = $1 { return $0 + (r.upperBound - r.lowerBound) } else { return $0 } }
    }
    /// Bytes the plan copies from seeds.
    package var seedBytes: UInt64 {
        segments.reduce(0) { $1.isCopy ? $0 + ($1.range.upperBound - $1.range.lowerBound) : $0 }
    }
    /// Range requests the plan sends.
    package var requestCount: Int { segments.filter { if case .fetch = $0 { return true } else { return false } }.count }

    /// Plans `start ..< manifest offset` of the remote archive.
    ///
    /// - Parameters:
    ///   - manifest: the remote archive's manifest (decoded and checked against its footer).
    ///   - manifestOffset: where the remote manifest starts (the footer's field).
    ///   - manifestIndexLength: the framed length of its manifest index (format 2.1, §11.8), 0
    ///     when it has none, nil when it is not known (the last pack is then downloaded).
    ///   - start: where the rebuilt prefix ends (a commit boundary of the partial file).
    ///   - seeds: the local seeds.
    ///   - distrusted: archive offsets of copies that failed verification before; they are
    ///     downloaded instead.
    ///   - mergeBelow: a copy shorter than this many bytes between two downloads is downloaded
    ///     with them (a range request costs a few hundred bytes of headers and a round trip).
    ///   - signed: the archive is signed (format 2.2, `Spec/0004-trusted-archives.md §3.3`): a
    ///     pack's commit may be followed by a prefix signature record, and the last record
    ///     before the final commit by the root signature, so the space after a pack is its
    ///     record, a commit and perhaps a signature record.
    package init(
        manifest: Manifest, manifestOffset: UInt64, manifestIndexLength: UInt64?, start: UInt64, seeds: SeedIndex,
        distrusted: Set<UInt64> = [], mergeBelow: UInt64 = 1024, signed: Bool = false
    ) {
        let starts = KnownStarts(manifest, manifestOffset: manifestOffset, manifestIndexLength: manifestIndexLength)
        knownStarts = starts
        self.manifestOffset = manifestOffset

        var copies: [Segment] = []
        var chunkCopies: Set<UInt64> = []
        for chunk in manifest.chunks where chunk.pack == nil && chunk.offset >= start && !distrusted.contains(chunk.offset) {
            let framed = RecordFraming.overhead + ChunkRecordPrefix.length + Int(chunk.storedLength)
            guard let found = seeds.chunk(id: chunk.id, codec: chunk.codec, framedLength: framed) else { continue }
            copies.append(.copyRecord(seed: found.seed, from: found.offset, to: chunk.offset..<(chunk.offset + UInt64(framed))))
            chunkCopies.insert(chunk.offset)
        }
        for pack in manifest.packs where pack.offset >= start {
            let candidates = seeds.packs(contentDigest: pack.contentDigest, contentLength: pack.contentLength)
            guard !candidates.isEmpty else { continue }
            guard let next = starts.next(after: pack.offset), next > pack.offset + UInt64(CommitRecord.framedLength) else { continue }
            let span = next - pack.offset
            let recordLength = span - UInt64(CommitRecord.framedLength)
            // In a signed archive a signature record may follow the commit: the record is one of
            // two lengths, and a seed's pack of either length is the whole record.
            let signature = UInt64(SignatureRecord.framedLength)
            let lengths = signed && recordLength > signature ? [recordLength, recordLength - signature] : [recordLength]
            if !distrusted.contains(pack.offset), let whole = candidates.first(where: { lengths.contains(UInt64($0.framedLength)) }) {
                // All but the CRC: the download that follows (the commit) starts with the remote's
                // CRC, which tells before anything is written whether the item tables agree.
                let body = UInt64(whole.framedLength) - UInt64(RecordFraming.trailerLength)
                copies.append(
                    .copyCheckingCRC(
                        seed: whole.seed, from: whole.offset, to: pack.offset..<(pack.offset + body),
                        contentStart: UInt64(whole.contentStart)))
                continue
            }
            // The item table differs (metadata changed): copy only the content section, whose
            // stored bytes follow from the same chunks, if the lengths leave room for a table.
            // Where it starts depends on the record's length, which a possible signature record
            // leaves unknown in a signed archive: its content is then downloaded, not misplaced.
            guard !signed else { continue }
            for candidate in candidates {
                let content = UInt64(candidate.contentStoredLength)
                let fixed = UInt64(RecordFraming.overhead + PackRecordPrefix.length)
                guard content > 0, recordLength > fixed + content else { continue }
                let contentStart = pack.offset + recordLength - UInt64(RecordFraming.trailerLength) - content
                guard !distrusted.contains(contentStart) else { continue }
                copies.append(
                    .copy(
                        seed: candidate.seed, from: candidate.offset + UInt64(candidate.contentStart),
                        to: contentStart..<(contentStart + content)))
                break
            }
        }
        copies.sort { $0.range.lowerBound < $1.range.lowerBound }

        var planned: [Segment] = []
        var position = start
        for copy in copies {
            let range = copy.range
            // A forged manifest can make rows overlap or point past the manifest: such a copy is
            // dropped, and the bytes are downloaded (and verified) instead.
            guard range.lowerBound >= position, range.upperBound <= manifestOffset else { continue }
            if range.lowerBound > position { planned.append(.fetch(position..<range.lowerBound)) }
            planned.append(copy)
            position = range.upperBound
        }
        if position < manifestOffset { planned.append(.fetch(position..<manifestOffset)) }

        // A gap after a chunk record copied from a seed, ending in a commit, probably holds what
        // follows that record in the seed (a file's chunk references, its file end) if the
        // same number of bytes on, the seed has a commit too: copy those, all but the last
        // record's CRC and the commit, which are downloaded first and tell (copyCheckingCRC).
        let tailLength = UInt64(RecordFraming.trailerLength + CommitRecord.framedLength)
        var bridged: [Segment] = []
        for (index, segment) in planned.enumerated() {
            guard case .fetch(let gap) = segment, index > 0, case .copyRecord(let seed, let before, let previous) = planned[index - 1],
                chunkCopies.contains(previous.lowerBound)
            else {
                bridged.append(segment)
                continue
            }
            let seedGap = before + (previous.upperBound - previous.lowerBound)
            let length = gap.upperBound - gap.lowerBound
            // In the seed: only chunk-references and file-end records, then the commit.
            guard length > tailLength, length <= 1 << 20, !distrusted.contains(gap.lowerBound),
                let types = seeds.recordTypes(seed: seed, in: seedGap..<(seedGap + length)),
                types.last == RecordType.commit.rawValue,
                types.dropLast().allSatisfy({ $0 == RecordType.chunkReferences.rawValue || $0 == RecordType.fileEnd.rawValue })
            else {
                bridged.append(segment)
                continue
            }
            let body = gap.lowerBound..<(gap.upperBound - tailLength)
            bridged.append(.copyCheckingCRC(seed: seed, from: seedGap, to: body, contentStart: body.upperBound - body.lowerBound))
            bridged.append(.fetch(body.upperBound..<gap.upperBound))
        }
        planned = bridged

        // Download short copies together with their neighbours, then join adjacent downloads.
        var merged: [Segment] = []
        for (index, segment) in planned.enumerated() {
            var segment = segment
            let range = segment.range
            if segment.isCopy, range.upperBound - range.lowerBound < mergeBelow {
                let fetchBefore = index > 0 && { if case .fetch = planned[index - 1] { return true } else { return false } }()
                let fetchAfter = index + 1 < planned.count && { if case .fetch = planned[index + 1] { return true } else { return false } }()
                if fetchBefore || fetchAfter { segment = .fetch(range) }
            }
            if case .fetch(let range) = segment, case .fetch(let previous)? = merged.last, previous.upperBound == range.lowerBound {
                merged[merged.count - 1] = .fetch(previous.lowerBound..<range.upperBound)
            } else {
                merged.append(segment)
            }
        }
        segments = merged
    }
}
