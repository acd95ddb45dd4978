/// Records read front to back for an ``ArchiveScanner``: a ``RecordStream`` (one record at a
/// time, on the caller's thread), a ``CheckedRecordStream`` (CRC-32s and digests checked on every
/// core), or an input that holds records back (a resumed fetch's prefix).
protocol ScannerInput: AnyObject {
    /// What the input gives per record: the record, and what was checked of it.
    associatedtype Item
    /// The record of `item`, as the scanner consumes it.
    static func record(of item: Item) -> RecordStream.Record
    /// The next record; nil at the end of the input.
    nonisolated(nonsending) func next() async throws -> Item?
    /// Where the input stands: the end of the last record returned.
    var offset: UInt64 { get }
    /// Whether the input holds nothing after the last record returned.
    nonisolated(nonsending) func isAtEnd() async throws -> Bool
}

extension RecordStream: ScannerInput {
    static func record(of item: Record) -> Record { item }
}

extension CheckedRecordStream: ScannerInput {
    static func record(of item: Item) -> RecordStream.Record { item.record }
}

extension ArchiveScanner {
    /// Where the input of ``run(over:until:afterEach:)`` may end, and what is checked there.
    enum InputEnd {
        /// Anywhere; nothing after a footer is read (recovering an interrupted write, whose
        /// records end at a cut).
        case unchecked
        /// Anywhere, but after a footer the input must end (§13.2): a prefix of an archive, or
        /// a whole one.
        case afterFooterIfAny
        /// At a footer, and nothing after it (§13.2): `missing` is the error for input that
        /// ends before one, given the offset where it ended.
        case atFooter(missing: (_ offset: UInt64) -> CairnError)
    }

    /// The one loop that drives the scanner, for a caller on this thread (the seekable reader's
    /// walk, the recovery of a write): every record of `stream` (after ``start(_:)``) until the
    /// footer or the end of the input, then the rule `end`.
    ///
    /// - Parameters:
    ///   - afterEach: called after each record is consumed, with the record and the events it
    ///     gave; without it the scanner gives no events.
    /// - Throws: the scanner's errors, in archive order, naming offsets; what reading `stream`
    ///   throws; `end`'s errors.
    func run(
        over stream: RecordStream, until end: InputEnd, afterEach: ((RecordStream.Record, [Event]) -> Void)? = nil
    ) throws(CairnError) {
        var events: [Event] = []
        while footer == nil, let record = try stream.next() {
            if let afterEach {
                try consume(record, collecting: &events)
                afterEach(record, events)
            } else {
                try consume(record)
            }
        }
        if try mustCheckEnd(end, at: stream.offset) { try requireEnd(of: stream) }
    }

    /// The one loop that drives the scanner, for an asynchronous caller (the stream verifier
    /// and extractor, prefix verification): every record of `input` (after ``start(_:)``) until
    /// the footer or the end of the input, checking for cancellation before each, then the
    /// rule `end`.
    ///
    /// - Parameters:
    ///   - afterEach: what the caller does with each record once the scanner consumed it (queue
    ///     its content for checking, write what its events say), with the events it gave; the
    ///     next record is read when it returns.
    /// - Throws: the scanner's errors, in archive order, naming offsets; what reading `input`
    ///   or `afterEach` throws; `end`'s errors; `CancellationError`.
    nonisolated(nonsending) func run<Input: ScannerInput>(
        over input: Input, until end: InputEnd, afterEach: nonisolated(nonsending) (Input.Item, [Event]) async throws -> Void
    ) async throws {
        var events: [Event] = []
        while footer == nil, let item = try await input.next() {
            try Task.checkCancellation()
            try consume(Input.record(of: item), collecting: &events)
            try await afterEach(item, events)
        }
        if try mustCheckEnd(end, at: input.offset) {
            try requireEnd(inputEnded: try await input.isAtEnd(), at: input.offset)
        }
    }

    /// Consumes `record`, its events replacing those in `events` (whose storage is reused).
    func consume(_ record: RecordStream.Record, collecting events: inout [Event]) throws(CairnError) {
        events.removeAll(keepingCapacity: true)
        do {
            try consume(record) { events.append($0) }
        } catch let error as CairnError {
            throw error
        } catch {
            throw CairnError(.invalidArgument, "internal error: \(error)")
        }
    }

    /// After the loop, the input having ended at `offset` (or the footer read): whether `end`
    /// wants the input to end there.
    ///
    /// - Throws: `end`'s `missing` error when it wants a footer and none was read.
    private func mustCheckEnd(_ end: InputEnd, at offset: UInt64) throws(CairnError) -> Bool {
        switch end {
        case .unchecked:
            return false
        case .afterFooterIfAny:
            return footer != nil
        case .atFooter(let missing):
            guard footer != nil else { throw missing(offset) }
            return true
        }
    }
}

extension ArchiveScanner.Event {
    /// Whether the event moved ``ArchiveScanner/verifiedLength``: a commit or the footer.
    var isVerifiedEnd: Bool {
        switch self {
        case .commit, .footer: true
        default: false
        }
    }
}
