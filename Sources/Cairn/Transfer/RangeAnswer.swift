/// The one check of an answer to a range request (RFC 9110 §14.4, §15.3.7) and the one bounded
/// range download, for every reader of a remote archive: the HTTP archive source, the seeded
/// fetch's manifest and a fetch's look-ahead.
package enum RangeAnswer {
    /// Checks the head of the answer to a request for `start ..< end` (`end` nil: to the end):
    /// a 206 whose Content-Range starts exactly at `start`, ends at `end` when bounded, has the
    /// `total` expected, and carries the same validator (ETag or Last-Modified, compared with
    /// the field of its kind) when one was sent as `If-Range`.
    ///
    /// - Throws: `.sourceChanged` naming the URL, the offset and what the server sent instead;
    ///   its message starts with ``HTTPArchiveSource/noRangesMessage`` when the server answered
    ///   200 with the same validator (it ignores ranges).
    package static func check(
        _ head: HTTPResponseHead, url: String, start: UInt64, end: UInt64?, total: UInt64?, validator: String?
    ) throws(CairnError) {
        let asked = "bytes \(start)-\(end.map { String($0 - 1) } ?? "")/\(total.map(String.init) ?? "*")"
        func changed(_ detail: String) -> CairnError {
            CairnError(.sourceChanged, "the archive at the URL changed while it was read (\(detail))", path: url, offset: start)
        }
        guard head.status == 206 else {
            if head.status == 200, validator == nil || head.etag == validator || head.lastModified == validator {
                throw CairnError(
                    .sourceChanged, HTTPArchiveSource.noRangesMessage + " (it answered 200 to a request for \(asked))", path: url,
                    offset: start)
            }
            throw changed("asked for \(asked) with If-Range, the server answered \(head.status) with the whole resource")
        }
        guard let range = head.contentRange else { throw changed("the 206 for \(asked) has no usable Content-Range") }
        let got = "bytes \(range.first)-\(range.last)/\(range.total.map(String.init) ?? "*")"
        guard range.first == start, end.map({ range.last + 1 == $0 }) ?? true else { throw changed("asked for \(asked), got \(got)") }
        if let total, let length = range.total, length != total { throw changed("asked for \(asked), got \(got)") }
        // Compare like with like: an entity tag with the ETag, a date with Last-Modified.
        if let validator, let now = validator.hasPrefix("\"") || validator.hasPrefix("W/") ? head.etag : head.lastModified,
            now != validator
        {
            throw changed("its validator is now \(now), was \(validator)")
        }
    }

    /// Checks the answer to a suffix request for the last `length` bytes (`Range: bytes=-N`,
    /// RFC 9110 §14.1.2) that delivered `received` body bytes: a Content-Range ending at the
    /// resource's last byte, of `min(length, total)` bytes, all received.
    ///
    /// - Returns: the first byte's offset and the resource's length.
    /// - Throws: `.sourceChanged` naming the URL and what the server sent instead.
    package static func checkSuffix(
        _ head: HTTPResponseHead, url: String, length: UInt64, received: Int
    ) throws(CairnError) -> (first: UInt64, total: UInt64) {
        guard head.status == 206, let range = head.contentRange, let total = range.total, range.last + 1 == total,
            range.last - range.first + 1 == min(length, total), UInt64(received) == range.last - range.first + 1
        else {
            let got = head.contentRange.map { "bytes \($0.first)-\($0.last)/\($0.total.map(String.init) ?? "*")" } ?? "no Content-Range"
            throw CairnError(
                .sourceChanged, "asked for the last \(length) bytes, the server answered \(head.status) with \(got) and \(received) bytes",
                path: url)
        }
        return (range.first, total)
    }

    /// Downloads `range` (at most 1 GiB) into memory with one request that must be answered
    /// with exactly that range (``check(_:url:start:end:total:validator:)``, before any body
    /// byte is kept).
    ///
    /// - Throws: as ``check(_:url:start:end:total:validator:)``; `.network` when the body ends
    ///   early or the connection fails; `.httpStatus`.
    package static func download(
        client: HTTPClient, url: String, range: Range<UInt64>, validator: String?, total: UInt64?
    ) throws(CairnError) -> (head: HTTPResponseHead, body: [UInt8]) {
        let count = range.upperBound - range.lowerBound
        guard count > 0, count <= 1 << 30 else { throw CairnError(.invalidArgument, "bad range \(range)", path: url) }
        var body: [UInt8] = []
        body.reserveCapacity(Int(count))
        let request = HTTPRequest(url: url, range: .bounded(range.lowerBound, range.upperBound - 1), ifRange: validator)
        let head = try client.perform(
            request,
            onHead: { (head) throws(CairnError) in
                try RangeAnswer.check(head, url: url, start: range.lowerBound, end: range.upperBound, total: total, validator: validator)
            },
            onBody: { (piece) throws(CairnError) in
                guard UInt64(body.count + piece.count) <= count else {
                    throw CairnError(.sourceChanged, "the server sent more bytes than the range asked for", path: url, offset: range.upperBound)
                }
                body.append(contentsOf: piece)
            })
        guard UInt64(body.count) == count else {
            throw CairnError(.network, "the server ended the range early", path: url, offset: range.lowerBound + UInt64(body.count))
        }
        return (head, body)
    }

}
