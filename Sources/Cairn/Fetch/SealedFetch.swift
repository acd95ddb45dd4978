import Glibc
import Synchronization

/// Where a fetch of an encrypted archive (`Spec/0004-trusted-archives.md §6.10`) continues: the
/// partial file holds outer bytes (the envelope, then sealed blocks), while the verifier counts
/// the inner archive's. A resume asks for the outer bytes from the start of the sealed block that
/// holds the inner prefix's last verified commit, and the plaintext of that block before the
/// commit's end, which the verifier has, is not passed to it again.
struct SealedResume {
    /// The envelope read back from the partial file, its key block opened.
    let envelope: OpenedEnvelope
    /// The inner archive's verified length: where the verifier continues.
    let innerOffset: UInt64

    private var layout: SealedBlockLayout {
        SealedBlockLayout(dataStart: envelope.dataStart, blockSize: UInt64(envelope.record.blockSize), innerSize: 0)
    }
    /// The sealed block holding inner offset ``innerOffset``.
    var blockIndex: UInt64 { layout.block(holding: innerOffset) }
    /// The outer offset of that block: where the partial file is cut and the download resumes.
    var outerOffset: UInt64 { envelope.dataStart + blockIndex * layout.sealedBlockSize }
    /// The plaintext bytes of that block before ``innerOffset``.
    var skipping: Int { Int(innerOffset - blockIndex * layout.blockSize) }
}

/// The inner archive of the bytes a fetch of an encrypted archive receives, opened as they arrive
/// (`SealedBlockStream`), and what ended the opening if it failed: a verifier that sees the inner
/// bytes end early reports that cause (a block that fails authentication, a key block no
/// identity opens) instead of a cut archive.
final class SealedFetchInput: Sendable {
    let bytes: SequentialArchiveBytes
    private let failure: FirstFailure

    /// Opens the blocks arriving through `channel` from block `index` on.
    init(channel: FetchChannel, envelope: OpenedEnvelope, firstBlock index: UInt64, skipping: Int, name: String) throws(CairnError) {
        let failure = FirstFailure()
        self.failure = failure
        bytes = try SealedBlockStream.open(
            arriving: channel, envelope: envelope, firstBlock: index, skipping: skipping, name: name,
            onFailure: { error in failure.record(error) })
    }

    /// What the opening failed with so far; nil while it goes on or after it ended well.
    var openingFailure: CairnError? { failure.error }

    /// The first error recorded.
    private final class FirstFailure: Sendable {
        private let first = Mutex<CairnError?>(nil)
        var error: CairnError? { first.withLock { $0 } }
        func record(_ error: CairnError) { first.withLock { $0 = $0 ?? error } }
    }

    /// Reads and opens the envelope at the start of the arriving outer bytes (prelude, envelope
    /// record, key block opened with `decryption`).
    ///
    /// - Throws: what ``OpenedEnvelope/readRecord(name:_:)`` throws (`.untrusted` for a plain
    ///   archive), `.untrusted` when no identity opens the key block, naming `name`.
    static func readEnvelope(from channel: FetchChannel, decryption: ArchiveDecryption, name: String) throws(CairnError) -> OpenedEnvelope {
        let (record, prefix) = try OpenedEnvelope.readRecord(name: name) { (count) throws(CairnError) in
            try SealedBlockStream.readBlock(channel, count)
        }
        do throws(CairnError) {
            return try OpenedEnvelope(record: record, prefix: prefix) { (record) throws(CairnError) in try decryption.openKeyBlock(record) }
        } catch {
            throw error.withPath(name)
        }
    }
}

extension ArchiveFetcher {
    /// The partial file of an encrypted archive read back: its envelope opened, its blocks opened
    /// (none as the final one: the file is partial) and the inner archive verified up to its last
    /// valid commit by `verifier` (made here, with the keys the key block held).
    ///
    /// - Returns: nil when not even the envelope reads or opens (the fetch starts from 0).
    nonisolated(nonsending) func readSealedPartial(_ input: FileDescriptor, trustingContentBelow trusted: UInt64) async throws
        -> (verifier: StreamVerifier, outcome: StreamVerifier.PrefixOutcome, envelope: OpenedEnvelope)?
    {
        let outer = SequentialArchiveBytes(descriptor: input, finish: {}, cancel: {})
        let decryption = options.decryption
        guard
            let (inner, envelope) = try? SealedBlockStream.open(
                outer, name: url, partial: true, openKeyBlock: { (record) throws(CairnError) in try decryption.openKeyBlock(record) })
        else { return nil }
        defer { inner.cancel() }
        let verifier = StreamVerifier(path: url, trustingContentBelow: trusted, trustedKeys: options.trustedKeys, keying: inner.keying)
        defer { partialReads.add(verifier.prefixBytesRead, ordering: .relaxed) }
        return (verifier, try await verifier.readPrefix(from: inner.descriptor), envelope)
    }

    /// The length of the partial file's prefix that a rerun keeps: for a plain archive its last
    /// valid commit; for an encrypted one the start of the sealed block holding it.
    nonisolated(nonsending) func resumableLength(ofPartial partialPath: String) async -> UInt64 {
        let (trustedKeys, keying, decryption, url) = (options.trustedKeys, options.keying, options.decryption, url)
        // Measured in a task of its own: a cancelled fetch must not stop this count halfway (and
        // discard what verified).
        return await Task.detached { () async -> UInt64 in
            guard !decryption.isEmpty else {
                return (try? await Extractor.verifyPrefix(at: .file(path: partialPath), trustedKeys: trustedKeys, keying: keying))?
                    .resumableLength ?? 0
            }
            guard let input = try? FileDescriptor.open(partialPath, flags: O_RDONLY | O_NOFOLLOW) else { return 0 }
            defer { _ = try? input.close() }
            let outer = SequentialArchiveBytes(descriptor: input, finish: {}, cancel: {})
            guard
                let (inner, envelope) = try? SealedBlockStream.open(
                    outer, name: url, partial: true, openKeyBlock: { (record) throws(CairnError) in try decryption.openKeyBlock(record) })
            else { return 0 }
            defer { inner.cancel() }
            let verified =
                (try? await Extractor.verifyPrefix(reading: inner.descriptor, path: url, trustedKeys: trustedKeys, keying: inner.keying))?
                .resumableLength ?? 0
            return verified == 0 ? 0 : SealedResume(envelope: envelope, innerOffset: verified).outerOffset
        }.value
    }
}
