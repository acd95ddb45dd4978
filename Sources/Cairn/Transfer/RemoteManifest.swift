/// The prelude, footer and manifest of an archive at a URL, read with three range requests
/// (RFC 9110 §14): what a seeded fetch plans from (`Spec/0001-container-format.md §14`).
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

    /// The largest manifest region a fetch reads into memory.
    package static let maximumManifestLength: UInt64 = 1 << 30

    /// Thrown (as `.sourceChanged` with this message prefix) when the server answers a range
    /// request with the whole resource: ranges are not supported there.
    package static let noRangesMessage = "the server does not support range requests"

    /// Reads the prelude, the footer and the manifest of the archive at `url`.
    ///
    /// - Parameter validator: when resuming, the validator recorded for the partial file; it is
    ///   sent as `If-Range`, so a changed archive answers 200 and is refused.
    /// - Throws: `.sourceChanged` naming the URL when the archive is not the one `validator`
    ///   names or a range answer does not match the request (message ``noRangesMessage`` when the
    ///   server ignores ranges); `.corrupted`/`.checksumMismatch`/`.unsupportedVersion`/
    ///   `.limitExceeded` for a footer or manifest that fails its checks; `.network` and
    ///   `.httpStatus` from the requests (transient ones are retried by `retry`).
    package static func fetch(
        client: HTTPClient, url: String, validator: String?, retry: RetryPolicy = RetryPolicy()
    ) throws(CairnError) -> RemoteManifest {
        let first = try rangeRequest(client, url, .bounded(0, UInt64(Prelude.length) - 1), validator: validator, retry: retry)
        guard let length = first.head.contentRange?.total else {
            throw CairnError(.sourceChanged, "the server did not say how long the archive is (Content-Range bytes 0-11/*)", path: url)
        }
        let version = try Prelude.parse(first.body)
        let currentValidator = first.head.strongValidator ?? validator
        guard length >= UInt64(Prelude.length + Footer.framedLength) else {
            throw CairnError(.truncated, "the archive at the URL is \(length) bytes: too short to have a footer", path: url)
        }
        let footerOffset = length - UInt64(Footer.framedLength)
        let footerBytes = try rangeRequest(
            client, url, .bounded(footerOffset, length - 1), validator: currentValidator, retry: retry, total: length
        ).body
        let footer = try decodeFooter(footerBytes, offset: footerOffset, url: url)
        let (manifestEnd, overflow) = footer.manifestOffset.addingReportingOverflow(footer.manifestLength)
        guard !overflow, manifestEnd == footerOffset, footer.manifestOffset >= UInt64(Prelude.length), footer.manifestLength > 0
        else {
            throw CairnError(.corrupted, "the footer points at a manifest outside the archive", path: url, offset: footerOffset)
        }
        guard footer.manifestLength <= maximumManifestLength else {
            throw CairnError(
                .limitExceeded, "the manifest is \(footer.manifestLength) bytes, over the limit of \(maximumManifestLength)", path: url,
                offset: footer.manifestOffset)
        }
        let region = try rangeRequest(
            client, url, .bounded(footer.manifestOffset, footerOffset - 1), validator: currentValidator, retry: retry, total: length
        ).body
        let (manifest, digest) = try Manifest.decode(region: region, offset: footer.manifestOffset, version: version)
        guard digest == footer.manifestDigest else {
            throw CairnError(
                .checksumMismatch, "the manifest does not match the footer's SHA-256", path: url, offset: footer.manifestOffset)
        }
        guard UInt64(manifest.chunks.count) == footer.chunkCount, UInt64(manifest.entries.count) == footer.entryCount else {
            throw CairnError(.corrupted, "the footer's counts do not match the manifest's tables", path: url, offset: footerOffset)
        }
        return RemoteManifest(
            length: length, validator: currentValidator, version: version, footer: footer, manifest: manifest,
            tail: region + footerBytes)
    }

    private static func decodeFooter(_ bytes: [UInt8], offset: UInt64, url: String) throws(CairnError) -> Footer {
        try bytes.withBytes { (raw) throws(CairnError) -> Footer in
            let header = try RecordCodec.parseHeader(raw, offset: offset)
            guard header.type == .footer, header.framedLength == bytes.count else {
                throw CairnError(.truncated, "the archive at the URL does not end with a footer (is it complete?)", path: url, offset: offset)
            }
            try RecordCodec.checkCRC(raw, offset: offset)
            var r = ByteReader(
                Array(bytes[RecordFraming.headerLength..<(bytes.count - RecordFraming.trailerLength)]),
                baseOffset: offset + UInt64(RecordFraming.headerLength), what: "footer")
            return try Footer.decode(&r)
        }
    }

    /// One bounded range request that must come back as exactly that range (206, Content-Range
    /// starting where asked, of the expected total).
    private static func rangeRequest(
        _ client: HTTPClient, _ url: String, _ range: HTTPByteRange, validator: String?, retry: RetryPolicy, total: UInt64? = nil
    ) throws(CairnError) -> (head: HTTPResponseHead, body: [UInt8]) {
        guard case .bounded(let first, let last) = range, last >= first, last - first < maximumManifestLength else {
            throw CairnError(.invalidArgument, "bad range", path: url)
        }
        return try retry.run { () throws(CairnError) in
            try FetchWriter.download(client: client, url: url, range: first..<(last + 1), validator: validator, total: total)
        }
    }
}
