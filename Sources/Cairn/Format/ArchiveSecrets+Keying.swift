extension ArchiveSecrets {
    /// The chunk keys of the inner archive (`Spec/0004-trusted-archives.md §6.6–§6.7`): its
    /// `idKey` and `chunkerKey`, for `Archiver.Configuration.keying` and every reader's `keying`.
    ///
    /// - Throws: ``CairnError`` with code `.invalidArgument` when a key is not 32 bytes (a
    ///   decoded key block always has 32), `.io` when libsodium cannot initialize.
    package func chunkKeying() throws(CairnError) -> ChunkKeying {
        try ChunkKeying(idKey: idKey, chunkerKey: chunkerKey)
    }
}
