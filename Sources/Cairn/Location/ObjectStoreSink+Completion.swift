extension ObjectStoreSink {
    /// How the object at `location` differs from the archive that `upload` sent, read back with
    /// ranged `GetObject` requests (`Spec/0003-command-line.md §3.3`, item 4): the one rule by
    /// which a finished upload, or a state file left behind by one, counts as complete.
    ///
    /// Checked, in this order: the upload's last recorded part is its last part (no chain
    /// digest); the object is as long as the archive (that part's end); it starts with a Cairn
    /// prelude and, when the state file recorded it, the same header record; it ends with a
    /// footer whose manifest ends where the footer starts; and its bytes in the last part's
    /// range have the SHA-256 recorded for that part. The last part holds the manifest and the
    /// footer, whose chain digest covers every record before it. Not checked: the bytes between
    /// the header record and the last part (`cairn verify s3://…` reads them all).
    ///
    /// - Parameters:
    ///   - location: the object.
    ///   - store: the store holding it.
    ///   - upload: the upload's state, with its parts (the last one's SHA-256) and header.
    ///   - length: the object's length from `HeadObject`, bytes (nil when the store gave none).
    /// - Returns: nil when the object is the archive as far as these checks go; otherwise what
    ///   differs, for a message.
    /// - Throws: `.network`, `.httpStatus`, `.sourceChanged` naming the endpoint when the object
    ///   cannot be read: nothing is decided then. Reads at most the last part's size plus a few
    ///   KiB; memory holds at most 8 MiB of it.
    package static func objectDifference(
        at location: S3Location, store: S3Client, upload: MultipartUploadState, length: UInt64?
    ) throws(CairnError) -> String? {
        guard let last = upload.parts.last, last.isLast, last.size > 0 else {
            return "the interrupted upload had not sent its last part"
        }
        let lengths = "the upload's archive is \(last.end) bytes"
        guard let length, length == last.end else { return "it is \(length.map { "\($0) bytes" } ?? "of unknown length"); \(lengths)" }
        let source = try HTTPArchiveSource(url: store.objectURL(location), client: store.client, acceptingWholeObject: true, tailSlack: 0)
        defer { source.close() }
        guard source.size == last.end else { return "it is now \(source.size) bytes; \(lengths)" }
        if let difference = try decided("its first bytes", { () throws(CairnError) in try headerDifference(source, upload: upload) }) {
            return difference
        }
        // An encrypted archive's footer is sealed: its last part's SHA-256 (of the ciphertext
        // sent, whose final block authenticates the end) is what is checked there.
        if upload.envelope == nil, let difference = try decided("its last bytes", { () throws(CairnError) -> String? in
            let footer = try source.readFooter(fileSize: source.size)
            let (manifestEnd, overflow) = footer.manifestOffset.addingReportingOverflow(footer.manifestLength)
            return !overflow && manifestEnd == source.size - UInt64(Footer.framedLength)
                ? nil : "the footer points at a manifest that does not end where the footer starts"
        }) {
            return difference
        }
        let digest = try sha256(of: source, range: (last.end - last.size)..<last.end)
        guard digest == last.sha256 else {
            return "its last \(last.size) bytes (part \(last.number), from offset \(last.end - last.size)) have SHA-256 "
                + "\(digest.prefix(16))…, the part the upload sent \(last.sha256.prefix(16))…"
        }
        return nil
    }

    /// The difference `body` finds in the bytes named by `what`, or what it throws about them
    /// (`.corrupted`, `.truncated`, a bad version) as a difference; errors of reading (the
    /// network, the store, an object that changed meanwhile) are thrown.
    private static func decided(_ what: String, _ body: () throws(CairnError) -> String?) throws(CairnError) -> String? {
        do {
            return try body().map { "\(what): \($0)" }
        } catch {
            if [.network, .httpStatus, .sourceChanged, .io].contains(error.code) { throw error }
            return "\(what): " + (error.offset.map { "\(error.message) at offset \($0)" } ?? error.message)
        }
    }

    /// How the object's first bytes differ from a Cairn prelude followed by the header record
    /// whose payload is the recorded header (when recorded), or, for an encrypted archive, from
    /// the 3.0 prelude and the recorded envelope record.
    private static func headerDifference(_ source: HTTPArchiveSource, upload: MultipartUploadState) throws(CairnError) -> String? {
        if let envelope = upload.envelope {
            let record = try EnvelopeRecord.decode(payload: envelope, offset: UInt64(Prelude.length))
            let expected = EnvelopeRecord.prelude + record.framed()
            guard source.size >= UInt64(expected.count) else { return "shorter than the envelope the upload sent" }
            let first = try source.read(ranges: [0..<UInt64(expected.count)])[0]
            return first == expected ? nil : "the prelude and envelope record are not the ones the upload sent"
        }
        let header = upload.header
        let prelude = try source.read(ranges: [0..<UInt64(Prelude.length)])[0]
        _ = try Prelude.parse(prelude)
        guard let header else { return nil }
        let (record, _) = try source.readRecord(at: UInt64(Prelude.length), fileSize: source.size)
        return record.type == .header && record.payload == header ? nil : "the header record is not the one the upload sent"
    }

    /// The SHA-256 (lowercase hex) of `range` of `source`, read in ranges of at most 8 MiB.
    private static func sha256(of source: HTTPArchiveSource, range: Range<UInt64>) throws(CairnError) -> String {
        let hasher = SHA256()
        var buffer = [UInt8](repeating: 0, count: Int(min(range.upperBound - range.lowerBound, HTTPArchiveSource.maximumRange)))
        var offset = range.lowerBound
        while offset < range.upperBound {
            let count = Int(min(UInt64(buffer.count), range.upperBound - offset))
            let got = try buffer.withMutableBytes { (raw) throws(CairnError) in
                try source.read(fromAbsoluteOffset: offset, into: UnsafeMutableRawBufferPointer(rebasing: raw[..<count]))
            }
            guard got == count else {
                throw CairnError(.network, "the object ended early", path: source.name, offset: offset + UInt64(got))
            }
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
            offset += UInt64(count)
        }
        return try hasher.finalize().hexString
    }
}
