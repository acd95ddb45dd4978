/// Seeded text-like lines: JSON records, log lines and prose from a small vocabulary, with
/// numbers and ids that do not repeat, so the text compresses about as well as app data.
///
/// Used by the stage benchmarks (``Buffer/textLike(count:seed:)``) and by the small-files case
/// (``SmallFiles``); the same seed always gives the same bytes.
struct TextGenerator {
    private var rng: BenchRandom
    private let words: [[UInt8]] = [
        "the", "of", "and", "user", "session", "request", "response", "error", "warning", "info", "debug", "cache",
        "archive", "chunk", "file", "directory", "index", "value", "name", "timestamp", "status", "message", "device",
        "sync", "upload", "download", "photo", "album", "contact", "note", "settings", "account", "token", "retry",
        "timeout", "connection", "database", "record", "updated", "created", "deleted", "pending", "completed",
        "failed", "because", "while", "with", "from", "into", "after", "before", "every", "some", "none",
    ].map { Array($0.utf8) }
    private static let hexDigits = Array("0123456789abcdef".utf8)

    init(seed: UInt64) { rng = BenchRandom(seed: seed) }

    /// Appends whole lines to `out` until it holds at least `count` bytes (the last line may
    /// run past `count`; callers cut it).
    mutating func append(to out: inout [UInt8], atLeast count: Int) {
        while out.count < count {
            switch rng.next() % 3 {
            case 0:
                out += Array("{\"id\":\"".utf8) + hex(16) + Array("\",\"".utf8) + word() + Array("\":".utf8) + number(100_000)
                out += Array(",\"".utf8) + word() + Array("\":\"".utf8) + word() + Array(" ".utf8) + word() + Array("\",\"ok\":true}\n".utf8)
            case 1:
                out += Array("2024-05-".utf8) + number(28) + Array("T12:".utf8) + number(60) + Array(":".utf8) + number(60)
                out += Array(" [".utf8) + word() + Array("] ".utf8)
                for _ in 0..<(3 + Int(rng.next() % 8)) { out += word() + [0x20] }
                out += Array("code=".utf8) + number(1000) + [0x0a]
            default:
                for _ in 0..<(8 + Int(rng.next() % 16)) { out += word() + [0x20] }
                out += [0x2e, 0x0a]
            }
        }
    }

    private mutating func word() -> [UInt8] { words[Int(rng.next() % UInt64(words.count))] }
    private mutating func number(_ limit: UInt64) -> [UInt8] { Array(String(rng.next() % limit).utf8) }
    private mutating func hex(_ n: Int) -> [UInt8] {
        var s: [UInt8] = []
        for _ in 0..<n { s.append(Self.hexDigits[Int(rng.next() & 15)]) }
        return s
    }
}
