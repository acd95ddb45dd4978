import Foundation
import Glibc

/// The extractor's entry points by location: what is read is labelled `at:`, and is an
/// ``ArchiveLocation`` (a local file, an `http(s)` URL or an object in an S3-compatible store).
extension Extractor {
    /// Opens the archive at `location` and reads its manifest.
    ///
    /// - A local file is opened and its manifest read.
    /// - An `http` URL is read with range requests: the footer and manifest first; extraction
    ///   then fetches only the records it needs (`Spec/0001-container-format.md §13.7`).
    /// - An object is read the same way with signed `GetObject` range requests.
    ///
    /// A remote archive is opened on a thread of its own: the caller's executor and the
    /// cooperative pool never wait on the network.
    ///
    /// With `trustedKeys`, the archive's root signature is verified from its tail before its
    /// manifest is used (`Spec/0004-trusted-archives.md §4.3`), and every later front-to-back
    /// read (``extractAll(to:options:)``, ``verify()``) checks every signature (§4.2).
    ///
    /// - Parameters:
    ///   - location: the archive.
    ///   - trustedKeys: the public keys whose signature the archive must carry (minisign keys,
    ///     ``PublicKey/readKeys(fromFile:)``); empty (the default): any archive, signed or not,
    ///     is read (`Spec/0004 §4.4`).
    ///   - decryption: identities or the passphrase that open an encrypted archive
    ///     (`Spec/0004 §6`); the archive must then be encrypted. Empty (the default): it must
    ///     be plain.
    /// - Throws: `CairnError` naming the archive: `.untrusted` when `trustedKeys` is not empty
    ///   and the archive is not signed, or signed by another key, when it is encrypted and no
    ///   identity opens it (or none was given), or when identities were given and it is plain;
    ///   `.checksumMismatch` for a sealed block that does not open; `.checksumMismatch` for a
    ///   signature that does not verify; `.notFound`, `.io`, `.corrupted`,
    ///   `.checksumMismatch`, `.unsupportedVersion`, or `.truncated` for an incomplete archive (no
    ///   valid footer); for a remote archive also `.network`, `.httpStatus` (403 for bad
    ///   credentials, 404 for a missing object), `.sourceChanged`, and `.invalidArgument` for a
    ///   server without range support.
    public convenience init(
        at location: ArchiveLocation, trustedKeys: [PublicKey] = [], decryption: ArchiveDecryption = ArchiveDecryption()
    ) async throws(CairnError) {
        try await self.init(at: location, trustedKeys: trustedKeys, decryption: decryption, keying: nil)
    }

    /// Opens the archive at `location` as ``init(at:trustedKeys:decryption:)``; a remote one is
    /// read with `remote`'s connections and timeouts: up to ``RemoteReadOptions/connections``
    /// coalesced range requests in flight while the manifest is read, entries' records are
    /// checked and their chunks fetched, so at most `connections × 8 MiB` in flight
    /// (`Spec/0001-container-format.md §13.9`). A local archive ignores `remote`.
    ///
    /// - Throws: as ``init(at:trustedKeys:decryption:)``.
    public convenience init(
        at location: ArchiveLocation, trustedKeys: [PublicKey] = [], decryption: ArchiveDecryption = ArchiveDecryption(),
        remote: RemoteReadOptions
    ) async throws(CairnError) {
        try await self.init(at: location, trustedKeys: trustedKeys, decryption: decryption, keying: nil, remote: remote)
    }

    /// ``init(at:trustedKeys:decryption:)``, and for a keyed archive read without its envelope
    /// (tests), the `keying` its chunk ids are checked under (`Spec/0004-trusted-archives.md
    /// §6.6`). An encrypted archive's keying comes from its key block, never from here.
    package convenience init(
        at location: ArchiveLocation, trustedKeys: [PublicKey] = [], decryption: ArchiveDecryption = ArchiveDecryption(),
        keying: ChunkKeying?, remote: RemoteReadOptions = RemoteReadOptions()
    ) async throws(CairnError) {
        switch location {
        case .file(let path) where decryption.isEmpty:
            try self.init(reader: ArchiveReader(path: path, trustedKeys: trustedKeys, keying: keying))
        case .file, .http, .object:
            let outer = try await location.openRandomAccess(remote: remote)
            // Opening the key block reads the envelope (a range request for a remote archive).
            let source = try await DedicatedThread.run { () throws(CairnError) in try decryption.open(outer) }
            // The reader owns the source, and closes it when opening fails.
            let reader = try await DedicatedThread.run { () throws(CairnError) in
                try ArchiveReader(source: source, trustedKeys: trustedKeys, keying: keying)
            }
            self.init(reader: reader)
        }
    }

    /// Opens the archive a `URL` names, as ``init(at:trustedKeys:decryption:)``: a `file:` URL (or
    /// a URL without a scheme), an `http:` or `https:` URL, or `s3://BUCKET/KEY` with the store
    /// and credentials from the environment (``ArchiveLocation/init(_:)``).
    ///
    /// - Throws: as ``init(at:trustedKeys:decryption:)``, and `.invalidArgument` for another scheme
    ///   or missing S3 credentials (naming the variable).
    public convenience init(at location: URL, trustedKeys: [PublicKey] = []) async throws(CairnError) {
        try await self.init(at: ArchiveLocation(location), trustedKeys: trustedKeys)
    }

    /// Opens the archive at `location` (as ``init(at:trustedKeys:decryption:)``), runs `body` with
    /// it, and closes it, also when `body` throws.
    ///
    /// - Returns: what `body` returns.
    /// - Throws: what ``init(at:trustedKeys:decryption:)`` throws, or what `body` throws, unchanged.
    nonisolated(nonsending) public static func withExtractor<R>(
        at location: ArchiveLocation, trustedKeys: [PublicKey] = [], decryption: ArchiveDecryption = ArchiveDecryption(),
        _ body: (Extractor) async throws -> R
    ) async throws -> R {
        try await withExtractor(at: location, trustedKeys: trustedKeys, decryption: decryption, keying: nil, body)
    }

    /// ``withExtractor(at:trustedKeys:decryption:_:)`` reading a remote archive with `remote`'s
    /// connections and timeouts (``init(at:trustedKeys:decryption:remote:)``).
    ///
    /// - Returns: what `body` returns.
    /// - Throws: what ``init(at:trustedKeys:decryption:remote:)`` throws, or what `body` throws.
    nonisolated(nonsending) public static func withExtractor<R>(
        at location: ArchiveLocation, trustedKeys: [PublicKey] = [], decryption: ArchiveDecryption = ArchiveDecryption(),
        remote: RemoteReadOptions, _ body: (Extractor) async throws -> R
    ) async throws -> R {
        let extractor = try await Extractor(at: location, trustedKeys: trustedKeys, decryption: decryption, remote: remote)
        defer { extractor.close() }
        return try await body(extractor)
    }

    /// ``withExtractor(at:trustedKeys:decryption:_:)`` of a keyed archive (`Spec/0004 §6.6`).
    nonisolated(nonsending) package static func withExtractor<R>(
        at location: ArchiveLocation, trustedKeys: [PublicKey] = [], decryption: ArchiveDecryption = ArchiveDecryption(),
        keying: ChunkKeying?, _ body: (Extractor) async throws -> R
    ) async throws -> R {
        let extractor = try await Extractor(at: location, trustedKeys: trustedKeys, decryption: decryption, keying: keying)
        defer { extractor.close() }
        return try await body(extractor)
    }

    /// Verifies the archive at `location` front to back without opening its manifest first, so
    /// an archive whose footer is damaged still reports the first bad offset: every record's
    /// CRC-32, every chunk's SHA-256, every commit's chain digest, every file's size and digest,
    /// the manifest and the footer. A remote archive is read with one GET (no range support
    /// needed), every byte through the same checker.
    ///
    /// - Parameters:
    ///   - location: the archive.
    ///   - trustedKeys: as in ``init(at:trustedKeys:decryption:)``: every signature is
    ///     verified as it is read, the root one at the footer (`Spec/0004 §4.2`).
    ///   - decryption: as in ``init(at:trustedKeys:decryption:)``; the sealed blocks are opened
    ///     on a thread of their own as they are read.
    /// - Returns: what was verified.
    /// - Throws: `CairnError` naming the archive: `.untrusted` (see
    ///   ``init(at:trustedKeys:decryption:)``), `.notFound`, `.io`, the first problem found
    ///   (naming its offset, the others in ``CairnError/additionalErrors``); `.network`,
    ///   `.httpStatus` for a remote archive; or `CancellationError`.
    nonisolated(nonsending) public static func verifyArchive(
        at location: ArchiveLocation, trustedKeys: [PublicKey] = [], decryption: ArchiveDecryption = ArchiveDecryption()
    ) async throws -> VerificationReport {
        try await verifyArchive(at: location, trustedKeys: trustedKeys, decryption: decryption, keying: nil)
    }

    /// ``verifyArchive(at:trustedKeys:decryption:)`` of a keyed archive (`Spec/0004 §6.6`).
    nonisolated(nonsending) package static func verifyArchive(
        at location: ArchiveLocation, trustedKeys: [PublicKey] = [], decryption: ArchiveDecryption = ArchiveDecryption(),
        keying: ChunkKeying?
    ) async throws -> VerificationReport {
        if !decryption.isEmpty {
            let outer = try await location.openSequential()
            let input = try await DedicatedThread.run { () throws(CairnError) in try decryption.open(outer, name: location.name) }
            return try await verify(input, path: location.name, trustedKeys: trustedKeys, keying: input.keying)
        }
        switch location {
        case .file(let path):
            let fd = try FileDescriptor.open(path, flags: O_RDONLY)
            defer { _ = try? fd.close() }
            return try await verify(descriptor: fd, path: path, seekToStart: false, trustedKeys: trustedKeys, keying: keying)
        case .http, .object:
            return try await verify(location.openSequential(), path: location.name, trustedKeys: trustedKeys, keying: keying)
        }
    }
}
