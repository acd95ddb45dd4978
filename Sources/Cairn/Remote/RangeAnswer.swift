/// The one check of an answer to a range request (RFC 9110 §14.4, §15.3.7) and the one bounded
/// range download, for every reader of a remote archive: the HTTP archive source, the seeded
/// fetch's manifest and a fetch's look-ahead.
package enum RangeAnswer {
    /// How every error about a server that ignores range requests begins.
    package static let noRangesMessage = "the server does not support range requests"

    /// Checks the head of the answer to a request for `start ..< end` (`end` nil: to the end):
    /// a 206 (or a 200 that carries a Content-Range, as `rclone serve s3` answers ranges) whose
    /// Content-Range starts exactly at `start`, ends at `end` when bounded, has the
    /// `total` expected, and carries the same validator (ETag or Last-Modified, compared with
    /// the field of its kind) when one was sent as `If-Range`.
    ///
    /// - Throws: `.sourceChanged` naming the URL, the offset and what the server sent instead;
    ///   its message starts with ``RangeAnswer/noRangesMessage`` when the server answered
    ///   200 with the same validator (it ignores ranges).
    package static func check(
        _ head: HTTPResponseHead, url: String, start: UInt64, end: UInt64?, total: UInt64?, validator: String?
    ) throws(CairnError) {
        let asked = "bytes \(start)-\(end.map { String($0 - 1) } ?? "")/\(total.map(String.init) ?? "*")"
        func changed(_ detail: String) -> CairnError {
            CairnError(.sourceChanged, "the archive at the URL changed while it was read (\(detail))", path: url, offset: start)
        }
        guard head.isRangeAnswer else {
            if head.status == 200, validator == nil || head.etag == validator || head.lastModified == validator {
                throw CairnError(
                    .sourceChanged, RangeAnswer.noRangesMessage + " (it answered 200 to a request for \(asked))", path: url,
                    offset: start)
            }
            throw changed("asked for \(asked) with If-Range, the server answered \(head.status) with the whole resource")
        }
        guard let range = head.contentRange else { throw changed("the \(head.status) for \(asked) has no usable Content-Range") }
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
        guard head.isRangeAnswer, let range = head.contentRange, let total = range.total, range.last + 1 == total,
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
    /// - Parameter acceptingWholeObject: also accept a 200 without Content-Range that carries
    ///   the whole resource (`total` bytes, the same validator), as some object stores answer a
    ///   range: the bytes before the range are read and dropped, and the transfer is stopped
    ///   once the range is in.
    /// - Throws: as ``check(_:url:start:end:total:validator:)``; `.network` when the body ends
    ///   early or the connection fails; `.httpStatus`.
    package static func download(
        client: HTTPClient, url: String, range: Range<UInt64>, validator: String?, total: UInt64?,
        acceptingWholeObject: Bool = false
    ) throws(CairnError) -> (head: HTTPResponseHead, body: [UInt8]) {
        let count = range.upperBound - range.lowerBound
        guard count > 0, count <= 1 << 30 else { throw CairnError(.invalidArgument, "bad range \(range)", path: url) }
        var body: [UInt8] = []
        body.reserveCapacity(Int(count))
        // Bytes of a whole-object answer still to drop before the range; nil for a range answer.
        var skipping: UInt64? = nil
        let request = HTTPRequest(url: url, range: .bounded(range.lowerBound, range.upperBound - 1), ifRange: validator)
        var rangeIsIn = false
        var head: HTTPResponseHead?
        do throws(CairnError) {
            head = try client.perform(
                request,
                onHead: { (answer) throws(CairnError) in
                    head = answer
                    if acceptingWholeObject, isWholeObject(answer, total: total, validator: validator) {
                        skipping = range.lowerBound
                        return
                    }
                    try RangeAnswer.check(answer, url: url, start: range.lowerBound, end: range.upperBound, total: total, validator: validator)
                },
                onBody: { (piece) throws(CairnError) in
                    var piece = piece
                    if let left = skipping {
                        let dropped = Int(min(UInt64(piece.count), left))
                        piece = UnsafeRawBufferPointer(rebasing: piece[dropped...])
                        skipping = left - UInt64(dropped)
                        if skipping ?? 0 > 0 { return }
                        let wanted = Int(count) - body.count
                        body.append(contentsOf: piece.prefix(wanted))
                        if body.count == Int(count) {
                            // Stop the transfer: the rest of the object is not needed.
                            rangeIsIn = true
                            throw CairnError(.network, "the range is in")
                        }
                        return
                    }
                    guard UInt64(body.count + piece.count) <= count else {
                        throw CairnError(.sourceChanged, "the server sent more bytes than the range asked for", path: url, offset: range.upperBound)
                    }
                    body.append(contentsOf: piece)
                })
        } catch {
            guard rangeIsIn, let head else { throw error }
            return (head, body)
        }
        guard UInt64(body.count) == count, let head else {
            throw CairnError(.network, "the server ended the range early", path: url, offset: range.lowerBound + UInt64(body.count))
        }
        return (head, body)
    }

    /// Whether `head` answers a range request with the whole resource: a 200 without
    /// Content-Range whose length is `total` and whose validator (when both are known) is
    /// `validator`.
    package static func isWholeObject(_ head: HTTPResponseHead, total: UInt64?, validator: String?) -> Bool {
        guard head.status == 200, head.contentRange == nil, let length = head.contentLength, total.map({ $0 == length }) ?? true else {
            return false
        }
        if let validator, let now = validator.hasPrefix("\"") || validator.hasPrefix("W/") ? head.etag : head.lastModified {
            return now == validator
        }
        return true
    }
}
