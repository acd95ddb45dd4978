import Foundation
import Glibc

/// Reads a Cairn archive: lists it, verifies it, and extracts it safely.
///
/// ```swift
/// let extractor = try await Extractor(at: .file(path: "/tmp/export.cairn"))
/// defer { extractor.close() }
/// for entry in extractor.entries { print(entry.path) }
/// try await extractor.extractAll(to: URL(filePath: "/tmp/restored"))
/// ```
///
/// Extraction is all-or-nothing: entries are written into a staging directory beside (or, when
/// the destination exists, inside) the destination and renamed into place only when every chunk
/// has been verified; on failure the staging directory is removed and nothing that was there
/// before is touched. Nothing is written outside the destination: paths with `..`, absolute
/// paths and paths through symlinks are refused, symlinks are created last, and every file is
/// opened with `O_NOFOLLOW | O_EXCL`.
///
/// - Throws: Every method throws only ``CairnError`` or `CancellationError`.
public final class Extractor {
    package let reader: ArchiveReader

    /// The archive's header: options and the creator's metadata.
    public var header: ArchiveHeader { reader.header }
    /// The archive's format version (`Spec/0001 §2`).
    public var formatVersion: FormatVersion { reader.version }
    /// Every entry, in archive order.
    ///
    /// - Complexity: O(*n*): each access builds the array from the manifest's packed entry
    ///   table (so opening an archive to extract it holds no second copy of its entries); keep
    ///   the result when reading it more than once.
    public var entries: [ArchiveEntry] { reader.manifest.entries.map(\.entry) }
    /// Import progress in content bytes, updated during ``extractAll(to:options:)``.
    public let progress = Progress(totalUnitCount: 0)

    /// Takes over `reader`, an open archive whose manifest is read; ``close()`` closes it. The
    /// public way in is ``init(at:trustedKeys:decryption:)``.
    package init(reader: ArchiveReader) {
        self.reader = reader
    }

    /// Opens the archive `source` serves (a local file or a remote one, ``HTTPArchiveSource``)
    /// and reads its manifest; the extractor owns the source and closes it in ``close()``.
    ///
    /// - Throws: as ``init(at:trustedKeys:decryption:)``, naming the source's path or URL.
    package init(source: any ArchiveSource, trustedKeys: [PublicKey] = [], keying: ChunkKeying?) throws(CairnError) {
        reader = try ArchiveReader(source: source, trustedKeys: trustedKeys, keying: keying)
    }

    /// The archive's chunk keys, as it was opened with (`Spec/0004-trusted-archives.md §6.6`):
    /// `diff` cuts and hashes local files with them. Nil for a plain archive.
    package var keying: ChunkKeying? { reader.keying }

    /// Closes the archive file.
    public func close() {
        reader.close()
    }

    /// The key id of the archive's signatures (`Spec/0004-trusted-archives.md §3.3`: the
    /// prefix signature right after commit 0), or nil for an unsigned archive.
    ///
    /// Opened with trusted keys, this is the key whose root signature verified; without, it is
    /// what the archive says, which proves nothing (§4.4).
    ///
    /// - Throws: what reading the archive throws (one small read; a range request when remote).
    public func signingKeyID() throws(CairnError) -> SigningKeyID? {
        if let verified = reader.verifiedSigner { return verified }
        return try ArchiveReader.signerAfterCommitZero(of: reader.source, headerEnd: reader.bodyOffset)?.keyID
    }

    /// The entry stored under `path`, if any.
    public func entry(atPathInArchive path: String) -> ArchiveEntry? {
        let bytes = Array(path.utf8)
        return reader.manifest.entries.first { $0.entry.pathBytes == bytes }?.entry
    }

    /// ``entries`` with every file's content digest (`Spec/0001 §8.3`: SHA-256 over its chunk
    /// ids), including packed files, whose digest the manifest does not hold: their packs are
    /// read, decompressed and checked (each once) to hash their chunks. For `diff` and
    /// `list --json`.
    ///
    /// - Throws: `CairnError` when a pack cannot be read or fails its checks.
    package func entriesWithContentDigests() throws(CairnError) -> [ArchiveEntry] {
        let manifest = reader.manifest
        let source = ChunkPrefetcher.Source(reader: reader)
        let decompressor = ChunkDecompressor()
        var cache: ChunkPrefetcher.Source.PackCache?
        var result = entries
        for (index, row) in manifest.entries.enumerated() where row.entry.kind == .file && row.pack != nil {
            let hasher = SHA256()
            for reference in reader.references(ofEntry: index) {
                let chunk = manifest.chunks[Int(reference)]
                let id =
                    chunk.pack == nil
                    ? chunk.id : try reader.idFunction.id(of: try source.decode(Int(reference), using: decompressor, cache: &cache))
                id.withUnsafeBytes { hasher.update($0) }
            }
            result[index].contentDigest = try hasher.finalize()
        }
        return result
    }

    /// Totals from the footer.
    public var summary: ArchiveSummary {
        let footer = reader.footer
        let unique = reader.manifest.chunks.reduce(UInt64(0)) { $0 + UInt64($1.rawLength) }
        return ArchiveSummary(
            archiveBytes: reader.fileSize, entryCount: Int(footer.entryCount),
            fileCount: reader.manifest.entries.count { $0.entry.kind == .file }, chunkCount: Int(footer.chunkCount),
            referenceCount: Int(footer.referenceCount), contentBytes: footer.contentBytes,
            storedBytes: footer.storedBytes, uniqueBytes: unique)
    }

    /// Extracts every entry into `destination`.
    ///
    /// If `destination` does not exist it is created (atomically, by renaming a staging
    /// directory); if it exists, the archive's top-level names must not exist in it yet.
    ///
    /// - Throws: `.unsafePath` for names that would escape or collide, `.limitExceeded` when the
    ///   declared output exceeds ``ExtractionOptions/maximumOutputBytes`` or the free space,
    ///   `.alreadyExists`, `.checksumMismatch` / `.corrupted` for damaged data, `.io`.
    nonisolated(nonsending) public func extractAll(to destination: URL, options: ExtractionOptions = ExtractionOptions()) async throws {
        try await extract(selection: nil, to: PathBytes.fileSystemPath(destination), options: options)
    }

    /// Extracts the entry at `path` (and, for a directory, everything below it) into
    /// `destination`, keeping its path: `extractItem(atPathInArchive: "a/b", to: d)` writes `d/a/b`.
    ///
    /// - Throws: `.notFound` when no entry has that path; otherwise as ``extractAll(to:options:)``.
    nonisolated(nonsending) public func extractItem(
        atPathInArchive path: String, to destination: URL, options: ExtractionOptions = ExtractionOptions()
    ) async throws {
        try await extract(selection: [Array(path.utf8)], to: PathBytes.fileSystemPath(destination), options: options)
    }

    /// Verifies the whole archive front to back: every record's CRC, every chunk's SHA-256,
    /// every commit's chain digest, every file's size and digest, the manifest and the footer.
    ///
    /// - Returns: what was verified.
    /// - Throws: the first problem found, naming its offset.
    nonisolated(nonsending) public func verify() async throws -> VerificationReport {
        try await Extractor.verify(
            reader.source.openSequential(), path: reader.path, trustedKeys: reader.trustedKeys, keying: reader.keying)
    }

    /// Verifies the archive read once from `input` front to back, then tells a clean end of its
    /// bytes from a cut one (a remote transfer's error explains a truncation).
    nonisolated(nonsending) package static func verify(
        _ input: SequentialArchiveBytes, path: String, trustedKeys: [PublicKey] = [], keying: ChunkKeying?
    ) async throws -> VerificationReport {
        let report: VerificationReport
        do {
            // The inner archive of an encrypted one carries its own keys.
            report = try await verify(
                descriptor: input.descriptor, path: path, seekToStart: false, trustedKeys: trustedKeys, keying: input.keying ?? keying)
        } catch {
            throw Extractor.ending(input, after: error, path: path)
        }
        try input.finish()
        return report
    }

    /// What to throw when reading `input` failed with `error`: the transfer's own error when the
    /// bytes ended early because it failed (the input is at its end, so waiting for the transfer
    /// cannot block), else `error`; `input` is released either way.
    ///
    /// A transfer that was cut (a connection lost, an I/O error) is followed by the reader's account
    /// of where the bytes ended, which says what verified and how to resume. A transfer that
    /// failed on damage (a sealed block that fails authentication, an envelope that changed,
    /// `Spec/0004-trusted-archives.md §6.3`) is reported alone: the reader saw its bytes end only
    /// because of it, and tampering is not a cut to resume.
    package static func ending(_ input: SequentialArchiveBytes, after error: any Error, path: String) -> any Error {
        guard let failure = error as? CairnError, failure.code == .truncated else {
            input.cancel()
            return error
        }
        do throws(CairnError) {
            try input.finish()
        } catch {
            var cut = error.withPath(path)
            if !SealedBlockStream.isDamage(error) { cut.message += " (\(failure.message))" }
            return cut
        }
        return error
    }

    /// Verifies the archive read from `descriptor` front to back (a file or a pipe).
    nonisolated(nonsending) package static func verify(
        descriptor: FileDescriptor, path: String, seekToStart: Bool, trustedKeys: [PublicKey] = [], keying: ChunkKeying?
    ) async throws -> VerificationReport {
        if seekToStart { try descriptor.seek(to: 0) }
        return try await verify(input: descriptor, path: path, trustedKeys: trustedKeys, keying: keying)
    }

    /// Verifies the archive read from `input` front to back (a descriptor, or a fetch's
    /// in-memory channel), with ``StreamVerifier``.
    ///
    /// - Returns: what was verified.
    /// - Throws: the first problem found, naming `path` and its offset.
    nonisolated(nonsending) package static func verify(
        input: any ByteInput, path: String, trustedKeys: [PublicKey] = [], keying: ChunkKeying?
    ) async throws -> VerificationReport {
        try await StreamVerifier(path: path, trustedKeys: trustedKeys, keying: keying).verify(input)
    }
}

extension Extractor {
    /// What `verify` reports when something failed: the first problem in archive order, with
    /// the others (every damaged chunk, up to `limit`, then a structural problem) in
    /// ``CairnError/additionalErrors``; each damaged chunk names the entries that use it.
    static func verificationProblem(
        chunkFailures: [CairnError], structural: CairnError?, manifest: Manifest, limit: Int
    ) -> CairnError? {
        let users = manifest.entryPaths(usingChunksAt: Set(chunkFailures.compactMap(\.offset)))
        var problems = chunkFailures.map { failure -> CairnError in
            var named = failure
            if let offset = failure.offset, let paths = users[offset] { named.message += Manifest.usersClause(paths) }
            return named
        }
        // A chunk after a structural failure was not read in order: only what precedes it counts.
        if let structural {
            problems = problems.filter { ($0.offset ?? 0) < (structural.offset ?? .max) }
            problems.append(structural)
        }
        guard var first = problems.first else { return nil }
        first.additionalErrors = Array(problems.dropFirst())
        if chunkFailures.count >= limit {
            first.additionalErrors.append(CairnError(.checksumMismatch, "more damaged chunks not listed (the limit is \(limit))"))
        }
        return first
    }
}

/// Totals of an archive, from its footer and manifest.
public struct ArchiveSummary: Sendable, Equatable {
    public var archiveBytes: UInt64
    public var entryCount: Int
    public var fileCount: Int
    public var chunkCount: Int
    public var referenceCount: Int
    /// Sum of file content bytes.
    public var contentBytes: UInt64
    /// Sum of stored (compressed) chunk bytes.
    public var storedBytes: UInt64
    /// Sum of the distinct chunks' raw bytes.
    public var uniqueBytes: UInt64
}

/// What ``Extractor/verify()`` checked.
public struct VerificationReport: Sendable, Equatable {
    public var archiveBytes: UInt64
    public var entryCount: Int
    public var fileCount: Int
    public var chunkCount: Int
    public var referenceCount: Int
    public var contentBytes: UInt64
    public var storedBytes: UInt64
    public var commitCount: Int
}

/// Options for extraction.
public struct ExtractionOptions: Sendable {
    /// Refuse archives whose files total more than this many bytes (a deduplicated archive can
    /// declare far more output than its size). Default 1 TiB.
    public var maximumOutputBytes: UInt64 = 1 << 40
    /// Refuse when the declared output exceeds the free space at the destination.
    public var checkFreeSpace = true
    /// Continue an interrupted extraction into the same destination from its staging
    /// directory's journal: entries already written and verified are skipped. Without it, a
    /// staging directory left by an interrupted extraction makes extraction fail with
    /// `.alreadyExists` (it is never deleted silently).
    public var resume = false
    /// Remove the staging directory an interrupted extraction into the same destination left
    /// (Cairn's own directory beside or inside it, with what it staged) and extract afresh,
    /// instead of failing with `.alreadyExists` (`cairn extract --force`). Nothing that exists
    /// in the destination is touched; ignored with ``resume``. Default false.
    public var discardsInterruptedExtraction = false
    /// What to do when DEST exists and an extracted name already exists in it. Default
    /// ``ExistingFilePolicy/refuse``: nothing is moved into place if any top-level name exists.
    public var existingFiles: ExistingFilePolicy = .refuse
    /// Leading path components to drop from every entry's path, as tar's `--strip-components`;
    /// entries with no component left are not extracted.
    public var stripComponents = 0
    /// Called once per entry as it is extracted (for `-v`), on the extracting task.
    public var onEntry: (@Sendable (ArchiveEntry) -> Void)?

    /// What the journal's first line records of these options, so that `--resume` uses the same
    /// ones (`Spec/0003 §4.1`): the options that change where entries go.
    var journalSuffix: String { stripComponents > 0 ? " strip \(stripComponents)" : "" }
    /// Whether entries' extended attributes are set on what is extracted (default true;
    /// `Spec/0001-container-format.md §6.5`). `security.capability` is set only when running as
    /// root.
    public var restoresExtendedAttributes = true
    /// Called, on the extracting task, for each problem that does not stop the extraction: an
    /// extended attribute the destination refuses (`.io`, naming the path and the attribute); a
    /// replaced SQLite database's sidecar moved aside (`.alreadyExists`, naming it and where it
    /// went).
    public var onWarning: (@Sendable (CairnError) -> Void)?

    public init() {}
}

/// What extraction does with names that already exist in an existing destination.
public struct ExistingFilePolicy: Hashable, Sendable, CustomStringConvertible {
    private enum Value: String { case refuse, overwrite, keepOld, skipOld }
    private let value: Value
    private init(_ value: Value) { self.value = value }

    /// All or nothing: if any top-level name of the archive exists in the destination, nothing
    /// is moved into place (`.alreadyExists`). The default.
    public static let refuse = ExistingFilePolicy(.refuse)
    /// Existing files and symlinks are replaced (each by an atomic rename); existing
    /// directories are merged into. tar's `--overwrite`. An SQLite database's sidecars in the
    /// destination (`-wal`, `-journal`, `-shm`) are moved aside to `NAME.cairn-aside` when the
    /// database is replaced, each reported to ``ExtractionOptions/onWarning``
    /// (`Spec/0003-command-line.md §4` item 12).
    public static let overwrite = ExistingFilePolicy(.overwrite)
    /// Existing names are kept and reported as an error (`.alreadyExists`) after everything
    /// else was moved in. tar's `--keep-old-files`. An SQLite database is kept with all of its
    /// files: none of the archive's is written beside it.
    public static let keepOld = ExistingFilePolicy(.keepOld)
    /// Existing names are kept silently. tar's `--skip-old-files`.
    public static let skipOld = ExistingFilePolicy(.skipOld)

    public var description: String { value.rawValue }
}
