import Glibc

/// An interrupted archive, `<path>.partial`, read for a resume: where the write continues
/// (`Spec/0001-container-format.md §10.4`) and, for an encrypted archive, how its sealing
/// continues (`Spec/0004-trusted-archives.md §6.9`).
///
/// A plain partial file is scanned as it is. An encrypted one is opened with the caller's
/// identity or passphrase (its own key block holds the archive's secrets, which are never
/// written anywhere else), its whole blocks are opened as blocks of a partial archive (none
/// final, a torn tail left out), and the inner archive they hold is scanned by the same
/// ``ArchiveRecovery`` that scans a plain one, so one rule finds the resume point of both.
package struct PartialArchive {
    package let recovery: ArchiveRecovery
    /// The commit the write continues from (``ArchiveRecovery/resumePoint(reading:)``).
    package let point: ArchiveRecovery.Checkpoint
    /// The writer's state at ``point``.
    package let state: ArchiveWriter.RecoveredState
    /// How an encrypted archive's sealing continues; nil for a plain one.
    package let sealed: SealedContinuation?

    /// The sealing of an encrypted partial archive from its resume point on.
    package struct SealedContinuation {
        /// The archive's own envelope and the secrets its key block held.
        package let sealing: ArchiveSealing
        /// The block holding the writer's first byte: it is sealed again, with a new nonce.
        package let blockIndex: UInt64
        /// The outer offset the file is cut back to: the start of ``blockIndex``.
        package let outerCut: UInt64
        /// The plaintext of ``blockIndex`` before the writer's first byte.
        package let pending: [UInt8]
    }

    /// The outer offset the partial file is cut back to.
    package var cut: UInt64 { sealed?.outerCut ?? state.offset }
    /// Where the sink's first byte goes in the outer file (nil: at ``cut``).
    package var writingFrom: UInt64? { sealed == nil ? state.writerStart : nil }

    /// Reads `partialPath` and finds where its write continues. Nothing is written.
    ///
    /// - Parameters:
    ///   - signingKey: the resuming writer's key (`Spec/0004 §3.5`).
    ///   - keying: the resuming writer's chunk keys for a plain archive (an encrypted one's come
    ///     from its key block).
    ///   - decryption: what opens an encrypted archive's key block; must be empty for a plain one.
    /// - Throws: `.untrusted` naming the file when an encrypted archive is given no identity
    ///   (or none that opens it), or a plain one is given one; `.checksumMismatch` naming a
    ///   sealed block that fails authentication (nothing is continued after an altered block);
    ///   `.notResumable` (for an encrypted archive with nothing committed, with itself in
    ///   ``CairnError/additionalErrors``: it is refused, never started over as a plain one);
    ///   what ``ArchiveRecovery/scan(_:path:signingKey:keying:)`` throws.
    package static func read(
        _ partialPath: String, signingKey: SigningKey?, keying: ChunkKeying?, decryption: ArchiveDecryption
    ) throws -> PartialArchive {
        let input = try FileDescriptor.open(partialPath, flags: O_RDONLY | O_NOFOLLOW)
        defer { _ = try? input.close() }
        let local = LocalArchiveSource(descriptor: input, size: try input.status().size)
        var prelude = [UInt8](repeating: 0, count: Prelude.length)
        let got = try prelude.withUnsafeMutableBytes { (raw) throws(CairnError) in try input.read(fromAbsoluteOffset: 0, into: raw) }
        let isSealed = OpenedEnvelope.isSealed(prelude: Array(prelude[0..<got]))
        switch (isSealed, decryption.isEmpty) {
        case (false, true):
            let recovery = try ArchiveRecovery.scan(input, path: partialPath, signingKey: signingKey, keying: keying)
            let point = recovery.resumePoint(reading: local)
            return PartialArchive(recovery: recovery, point: point, state: recovery.writerState(at: point), sealed: nil)
        case (false, false):
            throw CairnError(
                .untrusted, "the archive is not encrypted, but an identity or passphrase was given to resume it: resume it without one",
                path: partialPath, offset: 0)
        case (true, true):
            throw CairnError(
                .untrusted,
                "the archive is encrypted (format 3.0): give the identity (--identity) or the passphrase that opens its key block to resume it",
                path: partialPath, offset: 8)
        case (true, false):
            return try readSealed(local, path: partialPath, signingKey: signingKey, decryption: decryption)
        }
    }

    /// ``read(_:signingKey:keying:decryption:)`` of an encrypted partial archive.
    private static func readSealed(
        _ local: LocalArchiveSource, path: String, signingKey: SigningKey?, decryption: ArchiveDecryption
    ) throws -> PartialArchive {
        // A write finished but not renamed into place: its last block opens only as the final one.
        let inner = try SealedArchiveSource.open(local, partial: true) { (record) throws(CairnError) in
            try decryption.openKeyBlock(record)
        }.completedIfFinal()
        let blocks = FailureKeepingInput(PositionalByteInput(inner))
        let recovery: ArchiveRecovery
        do {
            recovery = try ArchiveRecovery.scan(blocks, path: path, signingKey: signingKey, keying: inner.keying)
        } catch let error as CairnError {
            if let failure = blocks.failure { throw failure }
            guard error.code == .notResumable, error.additionalErrors.isEmpty else { throw error }
            var refusal = CairnError(
                .notResumable,
                "\(error.message); an encrypted archive is not started over by a resume: make it again with its recipients (without --resume)",
                path: path)
            refusal.additionalErrors = [refusal]
            throw refusal
        }
        // A block that fails authentication ends the scan as a torn record would; here it is
        // refused: an altered block is not a cut (`Spec/0004 §6.9`).
        if let failure = blocks.failure { throw failure }
        let point = recovery.resumePoint(reading: inner)
        let state = recovery.writerState(at: point)
        let index = inner.layout.block(holding: state.writerStart)
        let blockStart = index * inner.layout.blockSize
        var pending = [UInt8](repeating: 0, count: Int(state.writerStart - blockStart))
        let read = try pending.withUnsafeMutableBytes { (raw) throws(CairnError) in
            try inner.read(fromAbsoluteOffset: blockStart, into: raw)
        }
        guard read == pending.count else {
            throw CairnError(.truncated, "the sealed block holding the resume point is cut off", path: path, offset: blockStart)
        }
        let continuation = SealedContinuation(
            sealing: ArchiveSealing(envelope: inner.envelope, secrets: inner.secrets), blockIndex: index,
            outerCut: inner.layout.dataStart + index * inner.layout.sealedBlockSize, pending: pending)
        return PartialArchive(recovery: recovery, point: point, state: state, sealed: continuation)
    }
}

/// A ``ByteInput`` that keeps the error its base threw: the scan of an encrypted partial archive
/// stops at the first error as at a torn record, and this tells a block that failed
/// authentication from a cut.
private final class FailureKeepingInput: ByteInput {
    private let base: any ByteInput
    private(set) var failure: CairnError?

    init(_ base: any ByteInput) { self.base = base }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws(CairnError) -> Int {
        do throws(CairnError) {
            return try base.read(into: buffer)
        } catch {
            failure = failure ?? error
            throw error
        }
    }
}
