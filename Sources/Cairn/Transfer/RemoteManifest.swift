/// The footer and manifest of an archive at a URL, read through the seekable reader over an
/// ``HTTPArchiveSource`` (a suffix range request, then what the manifest needs): what a seeded
/// fetch plans from (`Spec/0001-container-format.md §13.6`).
package struct RemoteManifest: Sendable {
    /// Bytes of the archive (Content-Range's complete length).
    package var length: UInt64
    /// The strong validator the server gave (ETag or Last-Modified), if any.
    package var validator: String?
    package var version: FormatVersion
    package var footer: Footer
    package var manifest: Manifest
    /// The archive's bytes from the manifest's offset to its end (manifest records and footer),
    /// appended as they are once everything before them is rebuilt.
    package var tail: [UInt8]
    /// The archive's prelude and header record (from the opening read of its first block).
    package var head: [UInt8]

    /// Reads the footer and manifest of the archive at `url`, with the checks of the seekable
    /// reader (`Spec/0001 §11.5`, §12.3).
    ///
    /// - Parameters:
    ///   - validator: when resuming, the validator recorded for the partial file;
    ///   - length: when resuming, the archive length recorded for it. The archive must still
    ///     have both, or it changed.
    /// - Throws: `.sourceChanged` naming the URL when the archive is not the one `validator` and
    ///   `length` name, or a range answer does not match its request; `.invalidArgument` whose
    ///   message starts with ``HTTPArchiveSource/noRangesMessage`` when the server ignores
    ///   ranges; what ``ArchiveReader/init(source:verifyingStructure:)`` throws for a footer or
    ///   manifest that fails its checks; `.network` and `.httpStatus` (transient ones retried).
    package static func fetch(
        client: HTTPClient, url: String, validator: String?, length: UInt64?
    ) throws(CairnError) -> RemoteManifest {
        let source = try HTTPArchiveSource(url: url, client: client)
        if let validator, let now = source.validator, now != validator {
            source.close()
            throw CairnError(.sourceChanged, "the archive at the URL changed (its validator is now \(now), was \(validator))", path: url)
        }
        if let length, source.size != length {
            source.close()
            throw CairnError(.sourceChanged, "the archive at the URL changed (it is now \(source.size) bytes, was \(length))", path: url)
        }
        let reader = try ArchiveReader(source: source, keepingManifestRegion: true)
        defer { reader.close() }
        let footer = reader.footer
        // The manifest as the reader read it, and the footer from the opening suffix request:
        // nothing is asked for twice.
        var footerBytes = [UInt8](repeating: 0, count: Footer.framedLength)
        let got = try footerBytes.withMutableBytes { (raw) throws(CairnError) in
            try source.read(fromAbsoluteOffset: source.size - UInt64(Footer.framedLength), into: raw)
        }
        guard let region = reader.manifestRegion, got == Footer.framedLength else {
            throw CairnError(.truncated, "the manifest and footer could not be read whole", path: url, offset: footer.manifestOffset)
        }
        let tail = region + footerBytes
        // The reader read the prelude and header through the block cache: no request.
        var head = [UInt8](repeating: 0, count: Int(clamping: reader.bodyOffset))
        let gotHead = try head.withMutableBytes { (raw) throws(CairnError) in try source.read(fromAbsoluteOffset: 0, into: raw) }
        guard gotHead == head.count else {
            throw CairnError(.truncated, "the header could not be read whole", path: url, offset: UInt64(gotHead))
        }
        return RemoteManifest(
            length: source.size, validator: source.validator, version: reader.version, footer: footer, manifest: reader.manifest,
            tail: tail, head: head)
    }
}
