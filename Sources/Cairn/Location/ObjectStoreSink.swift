import Foundation
import Glibc
import Synchronization

/// Writes an archive straight into an S3-compatible object store with a multipart upload, while
/// it is archived (`Spec/0003-command-line.md §3.3`): no local copy, and no object at the key
/// until the whole archive is there.
///
/// - The archive is cut into parts at commit records (`Spec/0001 §10.3`): each part
///   but the last ends just after a commit record and holds at least ``partSize(number:base:)``
///   bytes, a size that grows with the part number so that any archive S3 can store fits in
///   its 10,000 parts (`PartSizeRule`). Up to `M` parts (``UploadOptions/uploadConcurrency``)
///   are uploaded at once, each on a thread of its own, while the next one fills; the archiver
///   waits only while `M` parts are in flight. Memory holds at most `(M + 1)` parts beyond the
///   archiver's own budget: about `(M + 1) × part size` (`(4 + 1) × 8 MiB` = 40 MiB by default).
/// - After every acknowledged part, in whatever order the store acknowledges them, a local state
///   file (JSON lines, mode 0600) records the upload id and the part's number, ETag, size, end
///   offset and chain digest.
/// - ``finish()`` uploads the last part (manifest and footer) and only then sends
///   `CompleteMultipartUpload`, with `If-None-Match: *` unless overwriting; the state file is
///   removed once the object exists.
/// - A new upload is started by ``startUpload(to:configuration:overwrite:statePath:sizeEstimate:options:)``,
///   which sends `HeadObject` and `CreateMultipartUpload` on a thread of its own (never on the
///   caller's executor).
/// - A resumed sink (``resumeUpload(of:configuration:overwrite:statePath:options:)``) continues the
///   recorded upload: the archiver runs again from the start, and each part it produces that the
///   store already holds (same end, same chain digest, listed by `ListParts` with the same ETag),
///   whatever its number (parts complete out of order, so the held ones may have gaps), is
///   skipped instead of sent. Unchanged sources therefore give an object byte for byte the one
///   an uninterrupted run uploads; changed ones are refused (`.notResumable`).
/// - An encrypted archive (`Spec/0004-trusted-archives.md §6.9`) is cut at sealed-block
///   boundaries, each part recording the SHA-256 of the plaintext before its end; a resume that
///   seals with the same keys skips the held parts whose end and plaintext digest match.
/// - ``finish()`` and ``recordedUpload(at:location:configuration:options:)`` decide that an object at the
///   key is this upload's by its content, never by its length alone
///   (`objectDifference(at:store:upload:length:)`).
/// - An error of the store that repeating cannot cure (a 4xx status, too many parts) aborts the
///   multipart upload (`AbortMultipartUpload`) and says so; a cut connection, a store that went
///   away, or an interruption keeps the upload and the state file for `--resume`.
///
/// Credentials sign requests only; they never appear in errors or the state file.
///
/// - Note: With glibc's default allocator settings, freed part buffers stay resident (its mmap
///   threshold rises to the size of the blocks freed): about 50 MiB more peak RSS on a 314 MiB
///   archive. The `cairn` tool calls `mallopt(M_MMAP_THRESHOLD, 4 << 20)` at start; an app that
///   uploads large archives may do the same.
public final class ObjectStoreSink: ArchiveSink, CommitAwareArchiveSink, RewindableArchiveSink, LocalFileWritingSink {
    /// Where the archive goes.
    public let location: S3Location
    /// The local state file of the upload.
    public let statePath: String
    /// Whether an existing object at the key may be replaced.
    public let overwrite: Bool
    /// Whether this sink continues an earlier upload.
    public let isResumed: Bool
    private let store: S3Client
    private let ledger: Ledger
    /// The size of the first parts, bytes.
    private let basePartSize: UInt64
    /// How the part sizes grow, and the part limit.
    private let rule: PartSizeRule

    /// Bytes of the part being filled, from archive offset `partStart` on.
    private var filling: [UInt8] = []
    private var partStart: UInt64 = 0
    /// Commit records ending inside `filling`.
    private var commits: [CommitPoint] = []
    private var nextPartNumber = 1
    /// Parts an earlier run uploaded that the store still holds, by number (gaps possible).
    private var expected: [Int: MultipartUploadState.Part]
    /// The parts being uploaded.
    private let window: PartUploadWindow
    private var finished = false

    /// The smallest part (8 MiB; S3 requires 5 MiB for every part but the last).
    public static let minimumPartSize: UInt64 = PartSizeRule.s3.smallestPartSize
    /// The largest part S3 takes (5 GiB).
    public static let maximumPartSize: UInt64 = PartSizeRule.s3.largestPartSize
    /// The most parts an upload may have.
    public static let maximumParts = PartSizeRule.s3.partLimit

    /// The upload's statistics: bytes sent in parts by this run, and bytes of parts an earlier
    /// run had sent that this run kept.
    public var uploadedBytes: UInt64 { ledger.counts.withLock { $0.uploaded } }
    /// Bytes of parts kept from the interrupted run (0 unless resumed).
    public var keptBytes: UInt64 { ledger.counts.withLock { $0.kept } }
    /// Parts made so far (sent or kept).
    package var partCount: Int { nextPartNumber - 1 }
    /// The multipart upload's id.
    public var uploadID: String { ledger.state.withLock { $0.uploadID } }

    /// The size of part `number` (1-based) when the first parts are `base` bytes, in bytes:
    /// `base` for parts 1 to 8,000, then doubling every 100 parts, never above
    /// ``maximumPartSize`` (`PartSizeRule`). With 8 MiB first parts the 10,000 parts hold
    /// about 5.7 TiB, more than S3's largest object.
    public static func partSize(number: Int, base: UInt64) -> UInt64 {
        PartSizeRule.s3.size(ofPart: number, base: base)
    }

    /// The size of the first parts for an archive of about `estimate` bytes: enough for it to
    /// fit in 7,000 parts, rounded up to a MiB, at least ``minimumPartSize``, in bytes.
    public static func basePartSize(estimate: UInt64?) -> UInt64 {
        PartSizeRule.s3.baseSize(estimate: estimate)
    }

    /// Starts a new multipart upload to `location`.
    ///
    /// - Parameters:
    ///   - location: the bucket and key the archive goes to.
    ///   - configuration: the store, region and credentials.
    ///   - overwrite: whether an existing object at the key may be replaced (by the final
    ///     `CompleteMultipartUpload` only).
    ///   - statePath: the local state file (refused when one is already there, unless
    ///     `overwrite`: then the upload it records is aborted first).
    ///   - sizeEstimate: the archive's expected size in bytes, which picks the part size.
    /// - Throws: `.alreadyExists` naming the object when it exists and `overwrite` is false, or
    ///   naming the state file when an interrupted upload is recorded there; `.httpStatus` (403
    ///   for bad credentials, 404 for a missing bucket) and `.network` naming the endpoint.
    package convenience init(
        location: S3Location, configuration: S3Configuration, overwrite: Bool = false, statePath: String,
        sizeEstimate: UInt64? = nil, options: UploadOptions = UploadOptions()
    ) throws(CairnError) {
        try self.init(
            location: location, store: options.client(for: configuration), overwrite: overwrite, statePath: statePath,
            sizeEstimate: sizeEstimate, uploadConcurrency: options.uploadConcurrency)
    }

    /// Starts a new multipart upload whose parts follow `rule` (S3's limits unless a test
    /// gives smaller ones), with up to `uploadConcurrency` parts in flight; otherwise as
    /// ``startUpload(to:configuration:overwrite:statePath:sizeEstimate:options:)``.
    package init(
        location: S3Location, store: S3Client, overwrite: Bool, statePath: String, sizeEstimate: UInt64?, rule: PartSizeRule = .s3,
        uploadConcurrency: Int = UploadOptions.defaultUploadConcurrency
    ) throws(CairnError) {
        self.location = location
        self.statePath = statePath
        self.overwrite = overwrite
        self.store = store
        isResumed = false
        expected = [:]
        window = PartUploadWindow(limit: uploadConcurrency)
        self.rule = rule
        basePartSize = rule.baseSize(estimate: sizeEstimate)
        // Locked before it is read: a second process uploading with this state file is refused
        // before anything is aborted or cut.
        let journal = try UploadJournal(path: statePath, creating: true)
        var cleared = !journal.existed
        do throws(CairnError) {
            if let old = try MultipartUploadState.load(from: statePath) {
                guard overwrite else {
                    throw CairnError(
                        .alreadyExists,
                        "an interrupted upload to s3://\(old.bucket)/\(old.key) is recorded here; use --resume to continue it or --force to start over",
                        path: statePath)
                }
                if old.bucket == location.bucket, old.key == location.key, old.endpoint == store.configuration.endpoint {
                    try? store.abortMultipartUpload(location, uploadID: old.uploadID)
                }
            }
            if !overwrite, try store.headObject(location) != nil {
                throw CairnError(.alreadyExists, "the object already exists (use --force to replace it)", path: location.description)
            }
            try journal.clear()
            cleared = true
            let id = try store.createMultipartUpload(location)
            let state = MultipartUploadState(
                endpoint: store.configuration.endpoint, bucket: location.bucket, key: location.key, uploadID: id, partSize: basePartSize,
                rule: rule)
            ledger = Ledger(state: state, journal: journal)
            do throws(CairnError) {
                try journal.begin(state)
            } catch {
                try? store.abortMultipartUpload(location, uploadID: id)
                throw error
            }
        } catch {
            journal.close()
            // A state file this run did not empty is left as it was (another upload's record).
            if cleared { unlink(statePath) }
            throw error
        }
    }

    /// Continues the upload recorded in `statePath` (the state file a new upload keeps): `ListParts`
    /// tells which recorded parts the store still holds; a store that no longer knows the upload
    /// (it was aborted, or the store restarted) gets a new one, sent whole.
    ///
    /// - Parameters:
    ///   - location: the bucket and key, as recorded.
    ///   - configuration: the store, as recorded (the same endpoint).
    ///   - overwrite: whether the final `CompleteMultipartUpload` may replace an object at the key.
    ///   - statePath: the state file the interrupted upload kept.
    /// - Throws: `.notFound` when there is no state file; `.invalidArgument` when it records
    ///   another object or store; `.corrupted` for a state file that does not parse;
    ///   `.httpStatus` and `.network` naming the endpoint.
    package init(
        resuming location: S3Location, configuration: S3Configuration, overwrite: Bool = false, statePath: String,
        options: UploadOptions = UploadOptions()
    ) throws(CairnError) {
        let store = options.client(for: configuration)
        let journal = try UploadJournal(path: statePath, creating: false)
        let loaded: MultipartUploadState?
        do throws(CairnError) {
            loaded = try MultipartUploadState.load(from: statePath)
        } catch {
            journal.close()
            throw error
        }
        guard var state = loaded else {
            journal.close()
            throw CairnError(.notFound, "no interrupted upload is recorded here", path: statePath)
        }
        guard state.bucket == location.bucket, state.key == location.key, state.endpoint == configuration.endpoint else {
            journal.close()
            throw CairnError(
                .invalidArgument, "records an upload to s3://\(state.bucket)/\(state.key) at \(state.endpoint), not to \(location) at \(configuration.endpoint)",
                path: statePath)
        }
        self.location = location
        self.statePath = statePath
        self.overwrite = overwrite
        self.store = store
        isResumed = true
        window = PartUploadWindow(limit: options.uploadConcurrency)
        basePartSize = state.partSize
        rule = state.partSizeRule
        var kept: [MultipartUploadState.Part] = []
        do throws(CairnError) {
            // Every recorded part the store holds as recorded, gaps allowed: parts in flight
            // together complete in any order, and a kill leaves the ones acknowledged.
            let listed = try Dictionary(store.listParts(location, uploadID: state.uploadID).map { ($0.number, $0) }) { first, _ in first }
            kept = state.parts.filter { part in listed[part.number].map { $0.etag == part.etag && $0.size == part.size } ?? false }
        } catch {
            guard error.httpStatusCode == 404 else { throw error }
            // The store lost the upload (aborted, expired, or a store that keeps uploads in memory
            // restarted): start a new one.
            state = MultipartUploadState(
                endpoint: state.endpoint, bucket: state.bucket, key: state.key, uploadID: try store.createMultipartUpload(location),
                partSize: state.partSize, rule: state.partSizeRule)
        }
        state.parts = kept
        expected = Dictionary(kept.map { ($0.number, $0) }) { first, _ in first }
        headerRecorded = state.header != nil || state.envelope != nil
        ledger = Ledger(state: state, journal: journal)
        do throws(CairnError) {
            try journal.begin(state)
        } catch {
            journal.close()
            throw error
        }
    }

    /// What a state file's upload has become, for deciding what a resume does before any byte
    /// is archived again.
    public enum RecordedUpload: Sendable, Equatable {
        /// No upload is recorded at the path (no file, or an empty one).
        case none
        /// The upload can be continued.
        case resumable
        /// The upload completed: the object at the key is its archive, checked by content
        /// (`objectDifference(at:store:upload:length:)`); the state file was only left behind,
        /// and is removed.
        case complete
        /// An object that is not this upload's is at the key: continuing would replace it. The
        /// text says how it differs (its length, its header, its last part's SHA-256, ...).
        case objectInTheWay(String)
    }

    /// Looks at the upload recorded in `statePath` and at the object at its key (`HeadObject`,
    /// then, for an object of the archive's length, ranged reads of its first bytes and its last
    /// part): whether a resume can continue it, has nothing to do, or would replace another
    /// object. The state file is removed only when the object is confirmed as the upload's.
    ///
    /// - Throws: `.busy` when another process is uploading with the state file; `.corrupted`
    ///   for a state file that does not parse; `.httpStatus`, `.network`, `.sourceChanged`
    ///   naming the endpoint (the state file is then kept).
    package static func recordedUpload(
        at statePath: String, location: S3Location, configuration: S3Configuration, options: UploadOptions = UploadOptions()
    ) throws(CairnError) -> RecordedUpload {
        guard access(statePath, F_OK) == 0 else { return .none }
        let journal = try UploadJournal(path: statePath, creating: false)
        defer { journal.close() }
        guard let state = try MultipartUploadState.load(from: statePath) else { return .none }
        let store = options.client(for: configuration)
        guard let head = try store.headObject(location) else { return .resumable }
        if let difference = try objectDifference(at: location, store: store, upload: state, length: head.contentLength) {
            return .objectInTheWay(difference)
        }
        unlink(statePath)
        return .complete
    }

    /// The device and inode of the state file, which the archiver leaves out of the archive
    /// when it lies inside the tree being archived.
    package var stateFileIdentity: (device: UInt64, inode: UInt64) { ledger.journal.identity }

    /// The state file: the one local file an upload writes.
    package var writtenFileIdentity: (device: UInt64, inode: UInt64)? { stateFileIdentity }

    /// Bytes without commit points (an archive copied as it is, ``ArchiveTransfer``): parts are
    /// then cut at their size exactly, and a resume compares each part's SHA-256 instead of its
    /// chain digest.
    nonisolated(nonsending) public func write(_ bytes: [UInt8]) async throws {
        cutsAtAnyOffset = true
        try await write(bytes, commits: [])
    }

    /// Whether the header record of this run's archive was recorded in the state file.
    private var headerRecorded = false

    /// Records the payload of the archive's header record (after the prelude) in the state file
    /// once the first bytes hold it whole; a resume compares its options with it.
    private func recordHeader() throws(CairnError) {
        guard filling.count >= Prelude.length + RecordFraming.headerLength else { return }
        let header = try filling.withBytes { (raw) throws(CairnError) in
            try RecordCodec.parseHeader(UnsafeRawBufferPointer(rebasing: raw[Prelude.length...]), offset: UInt64(Prelude.length))
        }
        guard header.type == .header || header.type == .envelope else {
            headerRecorded = true
            return
        }
        let start = Prelude.length + RecordFraming.headerLength
        guard filling.count >= start + header.length else { return }
        headerRecorded = true
        let payload = Array(filling[start..<(start + header.length)])
        if header.type == .envelope {
            // An encrypted archive: a resume opens this envelope's key block (`Spec/0004 §6.9`).
            ledger.state.withLock { $0.envelope = payload }
            try ledger.journal.record(envelope: payload)
            return
        }
        ledger.state.withLock { $0.header = payload }
        try ledger.journal.record(header: payload)
    }

    /// Whether parts are cut at their size, not at commit points (bytes came without them).
    private var cutsAtAnyOffset = false

    nonisolated(nonsending) package func write(_ bytes: [UInt8], commits newCommits: [CommitPoint]) async throws {
        guard !finished else { throw CairnError(.invalidArgument, "the upload is finished", path: location.description) }
        filling.append(contentsOf: bytes)
        commits.append(contentsOf: newCommits)
        if partStart == 0, !headerRecorded { try recordHeader() }
        while let cut = nextCut() {
            let count = Int(cut.end - partStart)
            // The part keeps the buffer; only the bytes after the cut are copied (a few KiB to
            // a few MiB), so a part is never held twice.
            // The next buffer gets its room first, so the bytes after the cut move once.
            var part: [UInt8] = []
            part.reserveCapacity(Int(rule.size(ofPart: nextPartNumber + 1, base: basePartSize)) + (4 << 20))
            part.append(contentsOf: filling[count...])
            swap(&part, &filling)
            part.removeSubrange(count...)
            partStart = cut.end
            commits.removeAll { $0.end <= cut.end }
            try await emit(part, end: cut.end, digest: cut.chainDigest, isLast: false)
        }
    }

    /// The first commit point at which the filling part reaches its size.
    private func nextCut() -> (end: UInt64, chainDigest: Digest?)? {
        let size = rule.size(ofPart: nextPartNumber, base: basePartSize)
        if cutsAtAnyOffset { return UInt64(filling.count) >= size ? (partStart + size, nil) : nil }
        return commits.first { $0.end - partStart >= size }.map { ($0.end, $0.chainDigest) }
    }

    /// Sends part `nextPartNumber` (or skips it when the earlier run's copy is the same).
    ///
    /// `digest` is the chain digest of the commit record the part ends with (nil for the last
    /// part) or, in an encrypted archive cut at block boundaries (`Spec/0004 §6.9`), the SHA-256
    /// of the plaintext before the part's end (the whole plaintext for the last part).
    nonisolated(nonsending) private func emit(_ part: [UInt8], end: UInt64, digest: Digest?, isLast: Bool) async throws(CairnError) {
        let number = nextPartNumber
        guard number <= rule.partLimit else {
            // Only past what the store can hold (``PartSizeRule/capacity(base:)``): a resume
            // would cut the same parts, so the parts sent are of no use and are given back.
            throw await aborting(
                CairnError(
                    .limitExceeded,
                    "the archive is larger than the \(rule.partLimit) parts of an upload hold (\(rule.capacity(base: basePartSize)) bytes "
                        + "with first parts of \(basePartSize) bytes, growing to \(rule.largestPartSize)); "
                        + "a --size-estimate of its size gives larger parts",
                    path: location.description))
        }
        nextPartNumber += 1
        let sealed = !cutsAtAnyOffset && ledger.state.withLock { $0.envelope != nil }
        let chainDigest = sealed ? nil : digest
        let plainSHA256 = sealed ? digest?.hexString : nil
        if let earlier = expected[number] {
            var same = earlier.end == end && earlier.size == UInt64(part.count)
            if same, sealed {
                // Its ciphertext differs (new nonces); its plaintext must not.
                same = plainSHA256 != nil && earlier.plainSHA256 == plainSHA256 && earlier.isLast == isLast
            } else if same, let chainDigest {
                same = earlier.chainDigest == chainDigest.hexString
            } else if same {
                same = try earlier.sha256 == SHA256.hash(part).hexString  // the last part
            }
            guard same else {
                throw CairnError(
                    .notResumable,
                    "the archive differs from the interrupted upload's from part \(number) on (at offset \(end - UInt64(part.count))): "
                        + "its sources changed; start over with --force",
                    path: location.description)
            }
            ledger.counts.withLock { $0.kept += earlier.size }
            return
        }
        // An encrypted archive's part cannot be sent again with the same bytes (a resumed write
        // seals with new nonces), and a store may refuse to replace a part it holds with other
        // bytes (rclone serve s3 does): a part acknowledged but not yet recorded when the upload
        // was killed would then block the resume. With one part in flight that window is one
        // part's record, as before parallel parts; a plain archive's parts are re-sent the same.
        if sealed { try await waitForInFlight() } else { try await waitForRoom() }
        var made = MultipartUploadState.Part(
            number: number, etag: "", size: UInt64(part.count), end: end, chainDigest: chainDigest?.hexString, sha256: "")
        if sealed {
            made.plainSHA256 = plainSHA256
            made.last = isLast ? true : nil
        }
        let (store, location, ledger, record) = (store, location, ledger, made)
        window.start { () throws(CairnError) in
            let uploadID = ledger.state.withLock { $0.uploadID }
            var acknowledged = record
            // Hashed here, off the archiver's task, once: the signature and the record use it.
            acknowledged.sha256 = try SHA256.hash(part).hexString
            acknowledged.etag = try store.uploadPart(
                location, uploadID: uploadID, number: number, bytes: part, sha256: acknowledged.sha256)
            ledger.counts.withLock { $0.uploaded += UInt64(part.count) }
            try ledger.record(acknowledged)
        }
    }

    /// Waits until fewer than `M` parts are in flight (back-pressure on the archiver). When a
    /// part failed, waits for the others to end (each recorded if acknowledged) and throws its
    /// error, after aborting the upload when repeating cannot cure it.
    nonisolated(nonsending) private func waitForRoom() async throws(CairnError) {
        if let failure = await window.waitForRoom() {
            _ = await window.drain()
            throw await aborting(failure)
        }
    }

    /// Waits for every part in flight to end; throws the first failure as ``waitForRoom()`` does.
    nonisolated(nonsending) private func waitForInFlight() async throws(CairnError) {
        if let failure = await window.drain() { throw await aborting(failure) }
    }

    /// `error`, after aborting the multipart upload when it is one repeating cannot cure (a
    /// 4xx answer of the store, too many parts); a transient one keeps the upload for a resume.
    nonisolated(nonsending) private func aborting(_ error: CairnError) async -> CairnError {
        let curable = RetryPolicy.isTransient(error) || error.code == .io || error.code == .notResumable
        guard !curable else { return error }
        // No part may still be on its way when the upload is given back.
        _ = await window.drain()
        let (store, location, uploadID, statePath) = (store, location, uploadID, statePath)
        let aborted = (try? await DedicatedThread.run { () throws(CairnError) in
            try store.abortMultipartUpload(location, uploadID: uploadID)
        }) != nil
        var reported = error
        if aborted {
            ledger.journal.close()
            unlink(statePath)
            reported.message += "; the multipart upload was aborted"
        } else {
            reported.message += "; aborting the multipart upload failed too (upload id \(uploadID))"
        }
        finished = true
        return reported
    }

    /// Uploads the last part, then completes the upload: the object appears at the key now.
    ///
    /// - Throws: `.alreadyExists` when an object appeared at the key meanwhile and ``overwrite``
    ///   is false (the upload and its state file are kept, for `--resume --force`);
    ///   `.httpStatus`, `.network`.
    nonisolated(nonsending) public func finish() async throws {
        try await finish(plaintextDigest: nil)
    }

    /// ``finish()``, for an encrypted archive cut at block boundaries: `plaintextDigest`, the
    /// SHA-256 of its whole plaintext (inner archive), is recorded with the last part and
    /// compared by a resume instead of the ciphertext's (`Spec/0004 §6.9`).
    nonisolated(nonsending) package func finish(plaintextDigest: Digest?) async throws {
        guard !finished else { return }
        if !filling.isEmpty || nextPartNumber == 1 {
            let part = filling
            filling = []
            partStart += UInt64(part.count)
            try await emit(part, end: partStart, digest: plaintextDigest, isLast: true)
        }
        try await waitForInFlight()
        if let beyond = expected.keys.max(), beyond >= nextPartNumber {
            // The interrupted run's archive went on past this one's last part: another archive.
            throw CairnError(
                .notResumable,
                "the archive ends at part \(nextPartNumber - 1), the interrupted upload's went on to part \(beyond) at least: "
                    + "its sources changed; start over with --force",
                path: location.description)
        }
        let (store, location, overwrite, ledger, statePath) = (store, location, overwrite, ledger, statePath)
        let state = ledger.state.withLock { $0 }
        let parts = state.parts.map { S3Client.Part(number: $0.number, etag: $0.etag, size: $0.size) }
        // Every part of this archive, 1 to the last, each once: anything else is a bug, and
        // completing it would publish a wrong object.
        guard parts.map(\.number) == Array(1..<nextPartNumber) else {
            throw await aborting(
                CairnError(
                    .corrupted, "internal error: the recorded parts \(parts.map(\.number)) are not 1 to \(nextPartNumber - 1)",
                    path: location.description))
        }
        do throws(CairnError) {
            try await DedicatedThread.run { () throws(CairnError) in
                // `rclone serve s3` and some other stores ignore If-None-Match: look first as well.
                if !overwrite, try store.headObject(location) != nil {
                    throw CairnError(
                        .alreadyExists,
                        "an object appeared at the key while the archive was uploaded; it was left as it is, and the upload kept (replace it with --resume --force)",
                        path: location.description)
                }
                do throws(CairnError) {
                    try store.completeMultipartUpload(location, uploadID: state.uploadID, parts: parts, ifNoneMatch: !overwrite)
                } catch {
                    // A retried Complete whose first try went through but whose answer was lost
                    // finds the upload gone: the object at the key must then be this archive,
                    // checked by content, the rule `--resume` applies too.
                    guard error.httpStatusCode == 404, let head = try store.headObject(location) else { throw error }
                    if let difference = try Self.objectDifference(at: location, store: store, upload: state, length: head.contentLength) {
                        throw CairnError(
                            .alreadyExists,
                            "CompleteMultipartUpload found the upload gone (404), and the object at the key is not this archive: "
                                + "\(difference); it was left as it is, and \(statePath) kept (replace it with --resume --force)",
                            path: location.description)
                    }
                }
            }
        } catch {
            if error.code == .alreadyExists { throw error }
            throw await aborting(error)
        }
        finished = true
        ledger.journal.close()
        unlink(statePath)
    }

    /// Waits for the part in flight (so that it is recorded) and keeps the upload and its state
    /// file for a resume.
    nonisolated(nonsending) public func abandon() async {
        guard !finished else { return }
        try? await waitForInFlight()
        finished = true
        ledger.journal.close()
    }

    /// Cuts the archive back to `offset`, possible while the bytes after it are still in the
    /// part being filled.
    ///
    /// - Throws: `.io` when bytes after `offset` were already sent.
    package func truncate(to offset: UInt64) throws(CairnError) {
        guard offset >= partStart else {
            throw CairnError(.io, "the bytes after offset \(offset) were already uploaded and cannot be cut back", path: location.description)
        }
        let keep = Int(offset - partStart)
        if keep < filling.count { filling.removeSubrange(keep...) }
        commits.removeAll { $0.end > offset }
    }

    /// The state shared with the upload threads: the durable record and the counts.
    private final class Ledger: Sendable {
        let state: Mutex<MultipartUploadState>
        let counts = Mutex<(uploaded: UInt64, kept: UInt64)>((0, 0))
        let journal: UploadJournal

        init(state: MultipartUploadState, journal: UploadJournal) {
            self.state = Mutex(state)
            self.journal = journal
        }

        /// Adds an acknowledged part and appends it to the state file; called by the part
        /// threads, in any order, one at a time (the lock also keeps their lines whole).
        func record(_ part: MultipartUploadState.Part) throws(CairnError) {
            try state.withLock { (state) throws(CairnError) in
                state.record(part)
                try journal.record(part)
            }
        }
    }
}
