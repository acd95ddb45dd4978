import Foundation
import Synchronization

/// An archive on an HTTP(S) server read at random with single-range requests
/// (`Spec/0001-container-format.md §13.7`, RFC 9110 §14): the seekable reader's source for
/// `cairn list|info|extract|cat URL`.
///
/// Opening sends one suffix range request for the footer and ``tailSlack`` bytes before it
/// (`Range: bytes=-N`), which learns the archive's size (Content-Range's total) and its strong
/// validator (ETag, else Last-Modified) and usually holds the whole manifest too. Every later
/// request carries `If-Range: <validator>` and must come back as a 206 whose Content-Range starts
/// exactly where asked, ends where asked and has the same total; anything else (a 200: the
/// archive changed, or the server stopped honouring ranges) is `.sourceChanged` naming the URL and
/// the offset. Multi-range requests are never sent.
///
/// Small reads (record headers, entry records: at most ``smallRead`` bytes) go through a cache of
/// ``blockSize`` blocks so the reader's many little reads do not each become a request.
/// ``read(ranges:)`` coalesces neighbours (gaps up to ``coalescingGap``) into ranges of at most
/// ``maximumRange`` bytes and runs at most ``connections`` at once (for the whole source, however
/// many tasks call it): the bytes in flight are at most `connections × maximumRange`
/// (`Spec/0001-container-format.md §13.9`). A read that would make fewer requests than
/// ``connections`` is cut into as many requests of at least ``minimumSplit`` bytes, so that one
/// large read (a manifest, `cat`'s blocks, a file's run of chunk records) uses every connection.
/// Transient failures are retried with the ``RetryPolicy``.
package final class HTTPArchiveSource: ArchiveSource {
    /// Bytes fetched before the footer when opening (the manifest of a small archive, often all of it).
    package static let tailSlack: UInt64 = 64 << 10
    /// Neighbouring ranges this close are fetched as one.
    package static let coalescingGap: UInt64 = 64 << 10
    /// The largest range one request asks for.
    package static let maximumRange: UInt64 = 8 << 20
    /// The shortest request a large read is cut into to spread it over ``connections``: below
    /// this, a request's round trip costs more than the bytes it carries.
    package static let minimumSplit: UInt64 = 1 << 20
    /// The block size of the small-read cache: the prelude and header, say, cost one 8 KiB
    /// request (a seeded fetch counts every byte; 32 KiB blocks cost it 2% more).
    package static let blockSize: UInt64 = 8 << 10
    /// Reads at most this long go through the block cache.
    package static let smallRead = 8 << 10
    /// Blocks the cache keeps (2 MiB).
    private static let cachedBlocks = 256

    /// The URL, as given (errors name it).
    package let url: String
    package let size: UInt64
    /// The strong validator sent as `If-Range`, or nil when the server gave none (then only the
    /// total size in each Content-Range, and the content ids and digests, tell a change).
    package let validator: String?
    /// The client every request goes through (its ``HTTPClient/bytesReceived`` counts them all).
    package let client: HTTPClient
    private let retry: RetryPolicy
    /// The archive's last bytes, from the opening request.
    private let tailOffset: UInt64
    private let tail: [UInt8]
    private let cache = Mutex(BlockCache())
    /// Requests in flight at once, for the whole source (1 to
    /// ``RemoteReadOptions/maximumConnections``).
    package let connections: Int
    private let slots: DispatchSemaphore
    /// Requests in flight now and the most there ever were (for tests and reports).
    private let inFlight = Mutex<(now: Int, peak: Int)>((0, 0))

    /// The most requests this source ever had in flight at once (at most ``connections``).
    package var peakRequestsInFlight: Int { inFlight.withLock { $0.peak } }

    package var name: String { url }
    package var isRemote: Bool { true }

    /// Opens the archive at `url`: one suffix range request for its footer and the bytes before it.
    ///
    /// - Throws: `.httpStatus` (404, ...) and `.network` naming the URL; `.invalidArgument` when
    ///   the server does not honour range requests (it answered 200), saying which commands work
    ///   without them; `.truncated` for a resource too short to be an archive.
    ///
    /// - Parameter acceptingWholeObject: accept answers to range requests that carry the whole
    ///   resource (a 200 without Content-Range), as some object stores send: the bytes around
    ///   the range are read and dropped (``RangeAnswer/download(client:url:range:validator:total:acceptingWholeObject:)``).
    ///   Off for plain HTTP, where such a server gets the error that names the commands that
    ///   need no ranges.
    /// - Parameter tailSlack: bytes asked for before the footer (a seeded fetch, which finds the
    ///   manifest records it lacks from the manifest index, asks for the footer alone).
    /// - Parameter connections: requests kept in flight at once (clamped to 1...64).
    package init(
        url: String, client: HTTPClient = HTTPClient(), retry: RetryPolicy = RetryPolicy(), acceptingWholeObject: Bool = false,
        tailSlack: UInt64 = HTTPArchiveSource.tailSlack, connections: Int = RemoteReadOptions.defaultConnections
    ) throws(CairnError) {
        self.url = url
        self.connections = min(RemoteReadOptions.maximumConnections, max(1, connections))
        slots = DispatchSemaphore(value: self.connections)
        self.client = client
        self.retry = retry
        self.acceptsWholeObject = acceptingWholeObject
        let asked = UInt64(Footer.framedLength) + tailSlack
        var body: [UInt8] = []
        var dropped: UInt64 = 0
        var whole = false
        var head: HTTPResponseHead?
        var request = HTTPRequest(url: url, range: .suffix(asked))
        do throws(CairnError) {
            try retry.run { () throws(CairnError) in
                (body, dropped, whole) = ([], 0, false)
                do throws(CairnError) {
                    head = try openingRequest()
                } catch where error.httpStatusCode == 416 && request.range == .suffix(asked) {
                    // A suffix longer than the object is satisfiable (RFC 9110 §14.1.2: the whole
                    // object), but some stores answer 416 (rclone serve s3): ask from offset 0.
                    request.range = .bounded(0, asked - 1)
                    (body, dropped, whole) = ([], 0, false)
                    head = try openingRequest()
                }
            }
        } catch {
            throw error.withPath(url)
        }
        func openingRequest() throws(CairnError) -> HTTPResponseHead {
                try client.perform(
                    request,
                    onHead: { (answer) throws(CairnError) in
                        if acceptingWholeObject, RangeAnswer.isWholeObject(answer, total: nil, validator: nil) {
                            whole = true
                            return
                        }
                        guard answer.isRangeAnswer else { throw Self.noRanges(url, status: answer.status) }
                    },
                    onBody: { (piece) throws(CairnError) in
                        if whole {
                            // Keep the last `asked` bytes of the whole object, in bounded memory.
                            body.append(contentsOf: piece)
                            if body.count > 2 * Int(asked) {
                                let excess = body.count - Int(asked)
                                body.removeFirst(excess)
                                dropped += UInt64(excess)
                            }
                            return
                        }
                        guard UInt64(body.count + piece.count) <= asked else {
                            throw CairnError(.sourceChanged, "the server sent more than the \(asked) bytes asked for", path: url)
                        }
                        body.append(contentsOf: piece)
                    })
        }
        guard let head else { throw CairnError(.network, "no answer", path: url) }
        if whole {
            let total = dropped + UInt64(body.count)
            guard head.contentLength == total else {
                throw CairnError(.network, "the server ended the object early", path: url, offset: total)
            }
            let keep = Int(min(asked, UInt64(body.count)))
            tail = Array(body.suffix(keep))
            tailOffset = total - UInt64(keep)
            size = total
        } else {
            let (first, total) = try RangeAnswer.checkSuffix(head, url: url, length: asked, received: body.count)
            size = total
            tailOffset = first
            tail = body
        }
        validator = head.strongValidator
    }

    /// Whether answers with the whole resource are accepted for range requests.
    private let acceptsWholeObject: Bool

    private static func noRanges(_ url: String, status: Int) -> CairnError {
        CairnError(
            .invalidArgument,
            RangeAnswer.noRangesMessage + " (it answered \(status) to 'Range: bytes=-N'), which reading an archive "
                + "at random needs; 'cairn extract URL -C DEST' (without PATHs), 'cairn verify URL' and 'cairn fetch URL -o FILE' "
                + "read it front to back and work without them",
            path: url)
    }

    /// One range request for `range` (inside `0..<size`), checked (``RangeAnswer``) and retried.
    private func fetch(_ range: Range<UInt64>) throws(CairnError) -> [UInt8] {
        guard !range.isEmpty else { return [] }
        slots.wait()
        inFlight.withLock { state in
            state.now += 1
            state.peak = max(state.peak, state.now)
        }
        defer {
            inFlight.withLock { $0.now -= 1 }
            slots.signal()
        }
        do throws(CairnError) {
            return try retry.run { () throws(CairnError) in
                try RangeAnswer.download(
                    client: client, url: url, range: range, validator: validator, total: size, acceptingWholeObject: acceptsWholeObject
                ).body
            }
        } catch {
            var named = error.withPath(url)
            if named.offset == nil { named.offset = range.lowerBound }
            throw named
        }
    }

    package func read(fromAbsoluteOffset offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws(CairnError) -> Int {
        guard offset < size, buffer.count > 0 else { return 0 }
        let end = offset + min(UInt64(buffer.count), size - offset)
        let count = Int(end - offset)
        // The tail fetched when opening.
        if offset >= tailOffset {
            copy(tail, from: Int(offset - tailOffset), count: count, into: buffer, at: 0)
            return count
        }
        if count <= Self.smallRead {
            var position = offset
            while position < end {
                let block = position / Self.blockSize
                let bytes = try cachedBlock(block)
                let start = Int(position - block * Self.blockSize)
                let n = min(bytes.count - start, Int(end - position))
                guard n > 0 else { throw CairnError(.truncated, "the archive ends inside a read", path: url, offset: position) }
                copy(bytes, from: start, count: n, into: buffer, at: Int(position - offset))
                position += UInt64(n)
            }
            return count
        }
        // A large read: what precedes the tail by requests (spread over the connections), the
        // rest from the tail.
        let fetchedEnd = min(end, tailOffset)
        var position = 0
        if offset < fetchedEnd {
            let requests = requests(covering: [offset..<fetchedEnd], gap: 0)
            for bytes in try fetchAll(requests) {
                copy(bytes, from: 0, count: bytes.count, into: buffer, at: position)
                position += bytes.count
            }
        }
        if end > fetchedEnd { copy(tail, from: 0, count: Int(end - fetchedEnd), into: buffer, at: position) }
        return count
    }

    private func copy(_ bytes: [UInt8], from start: Int, count: Int, into buffer: UnsafeMutableRawBufferPointer, at position: Int) {
        bytes.withUnsafeBytes { raw in
            UnsafeMutableRawBufferPointer(rebasing: buffer[position..<(position + count)])
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[start..<(start + count)]))
        }
    }

    private func cachedBlock(_ block: UInt64) throws(CairnError) -> [UInt8] {
        if let bytes = cache.withLock({ $0.blocks[block] }) { return bytes }
        let start = block * Self.blockSize
        let bytes = try fetch(start..<min(size, start + Self.blockSize))
        cache.withLock { $0.insert(bytes, at: block, keeping: Self.cachedBlocks) }
        return bytes
    }

    /// Coalesces `ranges` into at most ``maximumRange``-byte requests (gaps up to
    /// ``coalescingGap`` are fetched and dropped), at most ``connections`` at once.
    package func read(ranges: [Range<UInt64>]) throws(CairnError) -> [[UInt8]] { try read(ranges: ranges, gap: Self.coalescingGap) }

    /// ``read(ranges:)`` merging only neighbours at most `gap` bytes apart (a seeded fetch, which
    /// counts every byte).
    package func read(ranges: [Range<UInt64>], gap: UInt64) throws(CairnError) -> [[UInt8]] {
        for range in ranges where range.upperBound > size {
            throw CairnError(.truncated, "a read runs past the archive's end (\(size) bytes)", path: url, offset: range.lowerBound)
        }
        // What the tail does not hold (a range straddling its start is fetched up to it).
        let wanted = ranges.compactMap { $0.lowerBound < tailOffset ? $0.lowerBound..<min($0.upperBound, tailOffset) : nil }
        let requests = requests(covering: wanted, gap: gap)
        let fetched = try fetchAll(requests)
        if requests == ranges {
            // Each range is its own request: hand the bytes over without a copy.
            return fetched
        }
        return ranges.map { range in
            if range.isEmpty { return [] }
            if range.lowerBound >= tailOffset {
                let start = Int(range.lowerBound - tailOffset)
                return Array(tail[start..<(start + range.count)])
            }
            if range.upperBound > tailOffset {
                // Straddles the tail: the part before it was requested.
                let head = Self.slice(range.lowerBound..<tailOffset, of: requests, fetched)
                return head + tail[0..<Int(range.upperBound - tailOffset)]
            }
            return Self.slice(range, of: requests, fetched)
        }
    }

    /// The bytes of `range` out of the coalesced requests that cover it (one, or consecutive ones
    /// where a range was split at the size cap).
    private static func slice(_ range: Range<UInt64>, of requests: [Range<UInt64>], _ fetched: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(range.count)
        var low = 0
        var high = requests.count
        while low < high {
            let middle = (low + high) / 2
            if requests[middle].upperBound <= range.lowerBound { low = middle + 1 } else { high = middle }
        }
        var index = low
        while index < requests.count, out.count < range.count {
            let request = requests[index]
            let start = max(range.lowerBound, request.lowerBound)
            let end = min(range.upperBound, request.upperBound)
            if start < end {
                out += fetched[index][Int(start - request.lowerBound)..<Int(end - request.lowerBound)]
            }
            index += 1
        }
        return out
    }

    /// The requests that fetch `wanted` (`Spec/0001-container-format.md §13.9`): neighbours at
    /// most `gap` apart merged into requests of at most ``maximumRange`` bytes; when that makes
    /// fewer requests than ``connections``, each is cut into pieces of
    /// `max(minimumSplit, total / connections)` bytes (rounded up), so that the connections share
    /// the read. With one connection, the coalesced requests as they are.
    package func requests(covering wanted: [Range<UInt64>], gap: UInt64) -> [Range<UInt64>] {
        let merged = RangeCoalescer.coalesce(wanted, gap: gap, maximum: Self.maximumRange)
        guard connections > 1, merged.count < connections else { return merged }
        let total = merged.reduce(UInt64(0)) { $0 + ($1.upperBound - $1.lowerBound) }
        let piece = max(Self.minimumSplit, (total + UInt64(connections) - 1) / UInt64(connections))
        return merged.flatMap { RangeCoalescer.coalesce([$0], gap: 0, maximum: piece) }
    }

    /// Runs `requests` on up to ``connections`` threads (blocking transfers stay off the
    /// cooperative pool's two threads).
    private func fetchAll(_ requests: [Range<UInt64>]) throws(CairnError) -> [[UInt8]] {
        if requests.count <= 1 { return try requests.map { (range) throws(CairnError) in try fetch(range) } }
        let results = Mutex<(next: Int, bytes: [[UInt8]?], failure: CairnError?)>(
            (0, Array(repeating: nil, count: requests.count), nil))
        let group = DispatchGroup()
        for _ in 0..<min(connections, requests.count) {
            group.enter()
            let thread = Thread { [self] in
                defer { group.leave() }
                while true {
                    let index: Int? = results.withLock { state in
                        guard state.failure == nil, state.next < requests.count else { return nil }
                        defer { state.next += 1 }
                        return state.next
                    }
                    guard let index else { return }
                    do throws(CairnError) {
                        let bytes = try fetch(requests[index])
                        results.withLock { $0.bytes[index] = bytes }
                    } catch {
                        results.withLock { state in
                            if state.failure == nil { state.failure = error }
                        }
                        return
                    }
                }
            }
            thread.start()
        }
        group.wait()
        let (bytes, failure) = results.withLock { ($0.bytes, $0.failure) }
        if let failure { throw failure }
        return bytes.map { $0 ?? [] }
    }

    /// One GET of the whole archive (no range), its body in a pipe; its validator and size must be
    /// those learned when opening.
    package func openSequential() throws(CairnError) -> SequentialArchiveBytes {
        try Self.openSequential(url: url, client: client, expectingValidator: validator, size: size)
    }

    /// One GET of the whole archive at `url`, for the readers that read every byte once (`verify
    /// URL`, `extract URL -C DEST`): needs no range support.
    ///
    /// - Parameters:
    ///   - expectingValidator, size: when known (a source opened before), the response's validator
    ///     and length must be these, else `.sourceChanged`.
    /// - Throws: `.httpStatus`, `.network` naming the URL; `.sourceChanged`.
    package static func openSequential(
        url: String, client: HTTPClient = HTTPClient(), expectingValidator: String? = nil, size: UInt64? = nil
    ) throws(CairnError) -> SequentialArchiveBytes {
        let stream = try HTTPBodyStream(client: client, request: HTTPRequest(url: url))
        do throws(CairnError) {
            let head = try stream.head()
            if let expectingValidator, head.strongValidator != expectingValidator {
                throw CairnError(.sourceChanged, "the archive at \(url) changed while it was read (its validator differs)", path: url, offset: 0)
            }
            if let size, let length = head.resourceLength, length != size {
                throw CairnError(
                    .sourceChanged, "the archive at \(url) changed while it was read (it is \(length) bytes, was \(size))", path: url,
                    offset: 0)
            }
        } catch {
            stream.cancel()
            throw error.withPath(url)
        }
        return SequentialArchiveBytes(
            descriptor: FileDescriptor(rawValue: stream.body.rawValue, path: url),
            finish: { () throws(CairnError) in
                do throws(CairnError) { try stream.finish() } catch { throw error.withPath(url) }
            },
            cancel: { stream.cancel() })
    }

    /// Drops the cached blocks (connections belong to the client).
    package func close() {
        cache.withLock { $0 = BlockCache() }
    }
}

/// The small-read cache: blocks by index, the oldest dropped first.
private struct BlockCache {
    var blocks: [UInt64: [UInt8]] = [:]
    var order: [UInt64] = []

    mutating func insert(_ bytes: [UInt8], at block: UInt64, keeping capacity: Int) {
        guard blocks[block] == nil else { return }
        blocks[block] = bytes
        order.append(block)
        if order.count > capacity { blocks[order.removeFirst()] = nil }
    }
}
