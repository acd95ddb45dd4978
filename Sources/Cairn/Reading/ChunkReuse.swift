/// Which chunk references of a seekable extraction decode their chunk from the archive and which
/// read it back from the staged file an earlier reference wrote it to (`Spec/0001 §13.7`): a
/// chunk that several files use (or one file several times) is read from the archive, and over
/// HTTP fetched, once per run; a resumed run reads back the chunks that the files an earlier run
/// completed hold.
///
/// The rule is applied twice, in the same order, by the same conditions: when the prefetch order
/// is planned (``planSkipped(_:)``, ``planDecodes(_:)``) and when the files are written
/// (``recordSkipped(_:path:)``, ``kept(_:)``, ``recordDecoded(_:bytes:path:offset:)``). A reference
/// decodes its chunk unless a location of it is kept; a location is kept for the first use of
/// every chunk used more than once (a packed chunk only when this run wrote it: the manifest
/// holds no id for it, so its id is computed, by the archive's rule, as it is written).
///
/// - Complexity: memory is one row per chunk used more than once, and one bit per distinct chunk
///   while the plan is made.
struct ChunkReuse {
    /// Where a kept chunk lies in a staged file, and the id its bytes must have there.
    struct Kept {
        var location: ChunkLocations.Location
        var id: Digest
        /// All zeros: a later reference is written as a hole, not read back.
        var isZero: Bool
    }

    private let chunks: [Manifest.ChunkRow]
    /// The archive's chunk id rule.
    private let idFunction: ChunkIDFunction
    /// Chunk-table indices used more than once by the files of the extraction (those to write and
    /// those an earlier run completed).
    private let repeated: Set<UInt32>
    /// The plan's view of ``kept``: chunks whose location will be kept by the time a reference
    /// comes.
    private var planned: Set<UInt32> = []
    private var kept: [UInt32: Kept] = [:]

    /// - Parameters:
    ///   - chunks: the manifest's chunk table.
    ///   - ids: the archive's chunk id rule.
    ///   - references: the chunk references of every file of the extraction, in any order.
    init(chunks: [Manifest.ChunkRow], ids: ChunkIDFunction, references: [ArraySlice<UInt32>]) {
        self.chunks = chunks
        self.idFunction = ids
        var seen = Set<UInt32>()
        var repeated = Set<UInt32>()
        for file in references {
            for reference in file where !seen.insert(reference).inserted { repeated.insert(reference) }
        }
        self.repeated = repeated
    }

    /// Whether the location of `reference`'s chunk in a file an earlier run completed can be kept.
    private func keepsSkipped(_ reference: UInt32) -> Bool {
        repeated.contains(reference) && Int(reference) < chunks.count && chunks[Int(reference)].pack == nil
    }

    // MARK: - Planning

    /// Plans a file an earlier run completed: its repeated chunks are read back from it.
    mutating func planSkipped(_ references: ArraySlice<UInt32>) {
        for reference in references where keepsSkipped(reference) { planned.insert(reference) }
    }

    /// Whether the reference to chunk `reference` decodes its chunk from the archive (else it is
    /// read back from where an earlier reference wrote it).
    mutating func planDecodes(_ reference: UInt32) -> Bool {
        guard !planned.contains(reference) else { return false }
        if repeated.contains(reference) { planned.insert(reference) }
        return true
    }

    // MARK: - Writing

    /// Keeps the locations of the repeated chunks of a file an earlier run completed, at `path`
    /// in the staging directory.
    mutating func recordSkipped(_ references: ArraySlice<UInt32>, path: [UInt8]) {
        var offset: UInt64 = 0
        for reference in references {
            guard Int(reference) < chunks.count else { return }
            let row = chunks[Int(reference)]
            if keepsSkipped(reference), kept[reference] == nil {
                kept[reference] = Kept(
                    location: ChunkLocations.Location(path: path, scratch: nil, offset: offset, length: Int(row.rawLength)),
                    id: row.id, isZero: false)
            }
            offset += UInt64(row.rawLength)
        }
    }

    /// Where chunk `reference` was kept, if it was: the reference is served from there.
    func kept(_ reference: UInt32) -> Kept? { kept[reference] }

    /// Keeps where chunk `reference`, just decoded and verified as `bytes`, was written: at
    /// `offset` of the staged file `path`, if the chunk is used again.
    mutating func recordDecoded(_ reference: UInt32, bytes: [UInt8], path: [UInt8], offset: UInt64) throws(CairnError) {
        guard repeated.contains(reference), kept[reference] == nil else { return }
        let row = chunks[Int(reference)]
        let id = row.pack == nil ? row.id : try idFunction.id(of: bytes)
        kept[reference] = Kept(
            location: ChunkLocations.Location(path: path, scratch: nil, offset: offset, length: bytes.count), id: id,
            isZero: SparseWriter.isZero(bytes))
    }
}
