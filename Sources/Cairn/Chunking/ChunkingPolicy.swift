/// How a file's bytes are cut into chunks: content-defined (FastCDC) or fixed-size.
///
/// Content-defined chunking places cut points where a rolling gear hash of the data matches a
/// mask, so an insertion or deletion moves only the boundaries near it and the rest of the
/// chunks deduplicate. The exact algorithm is the format's contract: `Spec/0002-chunking.md`.
///
/// Values are not validated when created; call ``validate()`` before use (the archiver does).
/// Chunks never span files: every file is chunked from its own start, and an empty file has no
/// chunks.
public struct ChunkingPolicy: Hashable, Sendable, CustomStringConvertible {
    private enum Kind: Hashable, Sendable {
        case contentDefined
        case fixed
    }

    private let kind: Kind
    private let storedMinimum: Int
    private let storedAverage: Int
    private let storedMaximum: Int

    private init(kind: Kind, minimum: Int, average: Int, maximum: Int) {
        self.kind = kind
        self.storedMinimum = minimum
        self.storedAverage = average
        self.storedMaximum = maximum
    }

    /// The largest chunk any policy may produce: 8 MiB (8,388,608 bytes).
    package static let maximumChunkLength = 8 * 1024 * 1024

    /// Content-defined chunking, FastCDC with normalized chunking level 2
    /// (Xia et al., "FastCDC", USENIX ATC 2016; `Spec/0002-chunking.md §4`).
    ///
    /// - Parameters:
    ///   - minimum: The smallest chunk in bytes (except a file's last chunk);
    ///     64 ≤ `minimum` ≤ `average`. The first `minimum` bytes of a chunk are not hashed.
    ///   - average: The target chunk size in bytes; a power of two, at least 256.
    ///   - maximum: The largest chunk in bytes; `average` ≤ `maximum` ≤ 8 MiB.
    /// - Returns: The policy; call ``validate()`` to check the values.
    public static func contentDefined(minimum: Int, average: Int, maximum: Int) -> ChunkingPolicy {
        ChunkingPolicy(kind: .contentDefined, minimum: minimum, average: average, maximum: maximum)
    }

    /// Fixed-size chunking: every chunk is `size` bytes except the last one of each file.
    ///
    /// - Parameter size: The chunk size in bytes, 1 ≤ `size` ≤ 8 MiB.
    /// - Returns: The policy; ``minimum``, ``average`` and ``maximum`` all equal `size`.
    public static func fixed(size: Int) -> ChunkingPolicy {
        ChunkingPolicy(kind: .fixed, minimum: size, average: size, maximum: size)
    }

    /// FastCDC with a 16 KiB minimum, 64 KiB average and 256 KiB maximum.
    public static let `default` = contentDefined(minimum: 16384, average: 65536, maximum: 262144)

    /// Whether chunk boundaries depend on the content (`true`) or only on offsets (`false`).
    public var isContentDefined: Bool { kind == .contentDefined }
    /// The smallest chunk in bytes, except a file's last chunk.
    public var minimum: Int { storedMinimum }
    /// The target (content-defined) or exact (fixed) chunk size in bytes.
    public var average: Int { storedAverage }
    /// The largest chunk in bytes.
    public var maximum: Int { storedMaximum }

    /// Checks the limits of `Spec/0002-chunking.md §2`.
    ///
    /// - Throws: ``CairnError`` with code `.invalidArgument` and a message naming the bad value.
    public func validate() throws(CairnError) {
        let limit = Self.maximumChunkLength
        switch kind {
        case .fixed:
            guard storedAverage >= 1, storedAverage <= limit else {
                throw CairnError(
                    .invalidArgument,
                    "fixed chunk size \(storedAverage) is outside 1...\(limit)")
            }
        case .contentDefined:
            guard storedAverage >= 256, storedAverage.nonzeroBitCount == 1 else {
                throw CairnError(
                    .invalidArgument,
                    "average chunk size \(storedAverage) is not a power of two of at least 256")
            }
            guard storedMinimum >= 64, storedMinimum <= storedAverage else {
                throw CairnError(
                    .invalidArgument,
                    "minimum chunk size \(storedMinimum) is outside 64...\(storedAverage)")
            }
            guard storedMaximum >= storedAverage, storedMaximum <= limit else {
                throw CairnError(
                    .invalidArgument,
                    "maximum chunk size \(storedMaximum) is outside \(storedAverage)...\(limit)")
            }
        }
    }

    /// `"cdc:16k:64k:256k"` or `"fixed:64k"`: the form ``init(name:)`` parses.
    public var description: String {
        switch kind {
        case .contentDefined:
            let sizes = [storedMinimum, storedAverage, storedMaximum].map(Self.format)
            return "cdc:" + sizes.joined(separator: ":")
        case .fixed:
            return "fixed:\(Self.format(storedAverage))"
        }
    }

    /// Parses a policy name as given on the command line.
    ///
    /// Accepted forms: `"cdc"` (``default``), `"cdc:<minimum>:<average>:<maximum>"`, `"fixed"`
    /// (64 KiB) and `"fixed:<size>"`. A size is a decimal byte count with an optional suffix
    /// `k` (× 1024) or `m` (× 1048576), case-insensitive: `"cdc:16k:64k:256k"`, `"fixed:1m"`.
    ///
    /// - Parameter name: The policy name.
    /// - Returns: `nil` when the name is malformed or the policy fails ``validate()``.
    public init?(name: String) {
        let parts = name.lowercased().split(separator: ":", omittingEmptySubsequences: false)
        let policy: ChunkingPolicy
        switch (parts.first, parts.count) {
        case ("cdc", 1):
            policy = .default
        case ("cdc", 4):
            guard let minimum = Self.parseSize(parts[1]), let average = Self.parseSize(parts[2]),
                let maximum = Self.parseSize(parts[3])
            else { return nil }
            policy = .contentDefined(minimum: minimum, average: average, maximum: maximum)
        case ("fixed", 1):
            policy = .fixed(size: 65536)
        case ("fixed", 2):
            guard let size = Self.parseSize(parts[1]) else { return nil }
            policy = .fixed(size: size)
        default:
            return nil
        }
        do {
            try policy.validate()
        } catch {
            return nil
        }
        self = policy
    }

    private static func parseSize(_ text: Substring) -> Int? {
        var digits = text
        var multiplier = 1
        if digits.hasSuffix("k") {
            multiplier = 1024
            digits = digits.dropLast()
        } else if digits.hasSuffix("m") {
            multiplier = 1024 * 1024
            digits = digits.dropLast()
        }
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }),
            let value = Int(digits)
        else { return nil }
        let (product, overflow) = value.multipliedReportingOverflow(by: multiplier)
        return overflow ? nil : product
    }

    private static func format(_ value: Int) -> String {
        if value > 0, value % (1024 * 1024) == 0 { return "\(value / (1024 * 1024))m" }
        if value > 0, value % 1024 == 0 { return "\(value / 1024)k" }
        return "\(value)"
    }
}
