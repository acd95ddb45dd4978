import Cairn
import Foundation
import Glibc

/// What issue 10's targets are measured against, read from the two archives with the library:
/// the delta yardstick, the largest commit interval, and the remote extract's stored bytes.
struct TransferLayout {
    var oldArchiveBytes: UInt64
    var newArchiveBytes: UInt64
    /// The new archive's manifest length plus its footer record (`Footer.framedLength`).
    var manifestAndFooterBytes: UInt64
    /// Chunk records (outside packs) of the new archive whose id the old archive has no chunk
    /// record of, and their framed bytes (12 + 40 + stored length each).
    var newChunkRecords: Int
    var newChunkRecordBytes: UInt64
    /// Pack records of the new archive whose content digest no pack of the old archive has, and
    /// their framed bytes.
    var newPackRecords: Int
    var newPackRecordBytes: UInt64
    /// Commit records of the new archive.
    var commitCount: Int
    /// The largest gap between the ends of consecutive commit records of the new archive (from
    /// offset 0 before the first, to the end of the file after the last).
    var largestCommitInterval: UInt64
    /// The remote extract's file: its chunk records (or the packs holding it), framed.
    var extractStoredBytes: UInt64

    /// Issue 10's delta yardstick: manifest + footer + the records no seed has.
    var deltaYardstick: UInt64 { manifestAndFooterBytes + newChunkRecordBytes + newPackRecordBytes }
    /// Issue 10's resume allowance: one commit interval plus 1 MiB.
    var resumeAllowance: UInt64 { largestCommitInterval + (1 << 20) }
    /// Issue 10's remote-extract yardstick: the file's stored bytes plus manifest and footer.
    var extractYardstick: UInt64 { extractStoredBytes + manifestAndFooterBytes }

    /// Opens both archives (`Extractor(reader:)`, synchronously) and walks the new one's records.
    ///
    /// - Parameter extractPath: the remote extract's file, relative to the tree's root.
    /// - Throws: `CairnError` when an archive cannot be read; ``BenchError`` when the new one has
    ///   no entry for `extractPath`.
    static func analyse(old oldPath: String, new newPath: String, extractPath: String) throws -> TransferLayout {
        let old = try Extractor(reader: ArchiveReader(path: oldPath))
        defer { old.close() }
        let new = try Extractor(reader: ArchiveReader(path: newPath))
        defer { new.close() }
        let oldManifest = old.reader.manifest
        let manifest = new.reader.manifest
        let oldChunkIDs = Set(oldManifest.chunks.filter { $0.pack == nil }.map(\.id))
        let oldPackDigests = Set(oldManifest.packs.map(\.contentDigest))

        // One walk of the new archive, chunk payloads skipped: commit ends and pack lengths.
        let descriptor = try FileDescriptor.open(newPath, flags: O_RDONLY)
        defer { try? descriptor.close() }
        let size = new.reader.fileSize
        let stream = RecordStream(skippingChunkPayloadsOf: descriptor, fileSize: size)
        _ = try stream.readBytes(Prelude.length)
        var commitEnds: [UInt64] = []
        var packLengths: [UInt64: UInt64] = [:]
        while let record = try stream.next() {
            let end = record.offset + UInt64(record.header.framedLength)
            if record.header.type == .commit { commitEnds.append(end) }
            if record.header.type == .pack { packLengths[record.offset] = UInt64(record.header.framedLength) }
        }
        var largest: UInt64 = 0
        var previous: UInt64 = 0
        for end in commitEnds + [size] {
            largest = max(largest, end - min(end, previous))
            previous = end
        }

        func chunkFramed(_ chunk: Manifest.ChunkRow) -> UInt64 {
            UInt64(RecordFraming.overhead + ChunkRecordPrefix.length) + UInt64(chunk.storedLength)
        }
        let newChunks = manifest.chunks.filter { $0.pack == nil && !oldChunkIDs.contains($0.id) }
        let newPacks = manifest.packs.filter { !oldPackDigests.contains($0.contentDigest) }

        let wanted = Array(extractPath.utf8)
        guard let entryIndex = manifest.entries.firstIndex(where: { $0.entry.pathBytes == wanted }) else {
            throw BenchError("\(newPath) has no entry \(extractPath)")
        }
        var extractBytes: UInt64 = 0
        var packsCounted: Set<Int> = []
        for reference in new.reader.references(ofEntry: entryIndex) {
            let chunk = manifest.chunks[Int(reference)]
            if let pack = chunk.pack {
                if packsCounted.insert(pack).inserted { extractBytes += packLengths[manifest.packs[pack].offset] ?? 0 }
            } else {
                extractBytes += chunkFramed(chunk)
            }
        }
        return TransferLayout(
            oldArchiveBytes: old.reader.fileSize, newArchiveBytes: size,
            manifestAndFooterBytes: new.reader.footer.manifestLength + UInt64(Footer.framedLength),
            newChunkRecords: newChunks.count, newChunkRecordBytes: newChunks.reduce(0) { $0 + chunkFramed($1) },
            newPackRecords: newPacks.count, newPackRecordBytes: newPacks.reduce(0) { $0 + (packLengths[$1.offset] ?? 0) },
            commitCount: commitEnds.count, largestCommitInterval: largest, extractStoredBytes: extractBytes)
    }
}
