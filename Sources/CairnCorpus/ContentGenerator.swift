/// Writes the content of each kind of sample file into a ``CorpusWriter``: every generator fills
/// exactly the size given to ``CorpusWriter/beginFile(_:size:mode:modificationTime:)``.
final class ContentGenerator {
    let writer: CorpusWriter
    let vocabulary = Vocabulary()
    /// Milliseconds since the Unix epoch of the last timestamp written.
    private var clock: Int64

    init(writer: CorpusWriter, startSeconds: Int64) {
        self.writer = writer
        clock = startSeconds * 1000
    }

    /// Sets the clock of the timestamps in the next file (seconds since the Unix epoch).
    func setClock(_ seconds: Int64) { clock = seconds * 1000 }

    // MARK: - Text

    /// One sentence: a capitalised first word, 6 to 17 words, a full stop.
    private func sentence(_ rng: inout SplitMix64) {
        var bits = rng.next()
        let count = 6 + Int(bits & 0xF) % 12
        bits >>= 4
        for i in 0..<count {
            if i % 4 == 3 { bits = rng.next() }
            if i > 0 { writer.append(byte: 0x20) }
            writer.append(word: vocabulary.word(Vocabulary.skewedIndex(bits), capitalised: i == 0))
            bits >>= 14
        }
        writer.append(". ")
    }

    /// `count` words separated by spaces, none capitalised.
    private func words(_ count: Int, _ rng: inout SplitMix64, separator: UInt8 = 0x20) {
        var bits = rng.next()
        for i in 0..<count {
            if i % 4 == 3 { bits = rng.next() }
            if i > 0 { writer.append(byte: separator) }
            writer.append(word: vocabulary.word(Vocabulary.skewedIndex(bits)))
            bits >>= 14
        }
    }

    /// A Markdown-ish document: a title, then paragraphs of word salad.
    func document(_ rng: inout SplitMix64) {
        writer.append("# ")
        words(3 + rng.below(5), &rng)
        writer.append("\n\n")
        while writer.remaining > 0 {
            let sentences = 2 + rng.below(6)
            for _ in 0..<sentences { sentence(&rng) }
            writer.append("\n\n")
            if rng.below(8) == 0 {
                writer.append("## ")
                words(2 + rng.below(4), &rng)
                writer.append("\n\n")
            }
        }
    }

    // MARK: - JSON

    /// A JSON array of records, valid JSON whatever the size (padded with whitespace before the
    /// closing bracket).
    func jsonRecords(_ rng: inout SplitMix64, kind: StaticString) {
        // A record is at most about 640 bytes; stop adding them when fewer than this remain.
        let reserve = 720
        guard writer.remaining >= reserve else {
            writer.append(byte: UInt8(ascii: "["))
            writer.append(repeating: 0x20, count: writer.remaining - 2)
            writer.append("]\n")
            return
        }
        writer.append("[\n")
        var first = true
        var id = UInt64(rng.int(in: 1000...90_000))
        while writer.remaining > reserve {
            if !first { writer.append(",\n") }
            first = false
            id += UInt64(1 + rng.below(7))
            record(&rng, id: id, kind: kind)
        }
        writer.append(repeating: 0x20, count: writer.remaining - 3)
        writer.append("\n]\n")
    }

    private func record(_ rng: inout SplitMix64, id: UInt64, kind: StaticString) {
        writer.append("  {\"id\": ")
        writer.append(decimal: id)
        writer.append(", \"uuid\": \"")
        writer.append(hexDigits: 8, using: &rng)
        writer.append(byte: UInt8(ascii: "-"))
        writer.append(hexDigits: 4, using: &rng)
        writer.append("-4")
        writer.append(hexDigits: 3, using: &rng)
        writer.append("-a")
        writer.append(hexDigits: 3, using: &rng)
        writer.append(byte: UInt8(ascii: "-"))
        writer.append(hexDigits: 12, using: &rng)
        writer.append("\", \"type\": \"")
        writer.append(kind)
        writer.append("\", \"title\": \"")
        words(2 + rng.below(6), &rng)
        writer.append("\", \"created\": \"")
        timestamp(advanceMilliseconds: Int64(rng.below(3_600_000)))
        writer.append("\", \"owner\": {\"name\": \"")
        writer.append(word: vocabulary.word(rng.below(Vocabulary.size), capitalised: true))
        writer.append(byte: 0x20)
        writer.append(word: vocabulary.word(rng.below(Vocabulary.size), capitalised: true))
        writer.append("\", \"email\": \"")
        writer.append(word: vocabulary.word(rng.below(Vocabulary.size)))
        writer.append(byte: UInt8(ascii: "."))
        writer.append(word: vocabulary.word(rng.below(Vocabulary.size)))
        writer.append("@example.com\"}, \"tags\": [")
        let tags = rng.below(4)
        for t in 0..<tags {
            writer.append(t == 0 ? "\"" : ", \"")
            writer.append(word: vocabulary.word(Vocabulary.skewedIndex(rng.next())))
            writer.append("\"")
        }
        writer.append("], \"score\": 0.")
        writer.append(decimal: UInt64(rng.below(10_000)), width: 4)
        writer.append(", \"count\": ")
        writer.append(decimal: UInt64(rng.below(500)))
        writer.append(rng.below(3) == 0 ? ", \"done\": false" : ", \"done\": true")
        if rng.below(3) == 0 {
            writer.append(", \"note\": \"")
            sentence(&rng)
            writer.append("\"")
        }
        writer.append("}")
    }

    // MARK: - Logs

    private static let levels: [StaticString] = ["DEBUG", "INFO ", "INFO ", "INFO ", "INFO ", "WARN ", "INFO ", "ERROR"]
    private static let components: [StaticString] = [
        "sync.engine", "net.http", "db.store", "ui.main", "export", "auth", "media.scan", "scheduler",
    ]

    /// Timestamped log lines, ending with a complete line.
    func logLines(_ rng: inout SplitMix64) {
        while writer.remaining > 0 {
            if writer.remaining < 320 {
                writer.append(repeating: UInt8(ascii: "-"), count: writer.remaining - 1)
                writer.append(byte: 0x0A)
                return
            }
            let bits = rng.next()
            timestamp(advanceMilliseconds: Int64((bits >> 44) & 0xFFF))
            writer.append(byte: 0x20)
            writer.append(Self.levels[Int((bits >> 2) & 7)])
            writer.append(" [")
            writer.append(Self.components[Int((bits >> 5) & 7)])
            writer.append("] ")
            words(3 + Int((bits >> 8) & 7), &rng)
            writer.append(" id=")
            writer.append(decimal: (bits >> 12) & 0xFFFFF)
            writer.append(" duration_ms=")
            writer.append(decimal: (bits >> 32) & 0x3FF)
            writer.append(byte: 0x0A)
        }
    }

    /// An ISO 8601 UTC timestamp with milliseconds (`2023-11-14T22:13:20.123Z`); the clock moves
    /// forward first.
    private func timestamp(advanceMilliseconds: Int64) {
        clock += advanceMilliseconds
        let seconds = clock / 1000
        let days = seconds / 86_400
        let secondOfDay = seconds % 86_400
        let (year, month, day) = Self.civil(fromDays: days)
        writer.append(decimal: UInt64(year), width: 4)
        writer.append(byte: UInt8(ascii: "-"))
        writer.append(decimal: UInt64(month), width: 2)
        writer.append(byte: UInt8(ascii: "-"))
        writer.append(decimal: UInt64(day), width: 2)
        writer.append(byte: UInt8(ascii: "T"))
        writer.append(decimal: UInt64(secondOfDay / 3600), width: 2)
        writer.append(byte: UInt8(ascii: ":"))
        writer.append(decimal: UInt64(secondOfDay / 60 % 60), width: 2)
        writer.append(byte: UInt8(ascii: ":"))
        writer.append(decimal: UInt64(secondOfDay % 60), width: 2)
        writer.append(byte: UInt8(ascii: "."))
        writer.append(decimal: UInt64(clock % 1000), width: 3)
        writer.append(byte: UInt8(ascii: "Z"))
    }

    /// Year, month, day of a day count since 1970-01-01 (H. Hinnant, "chrono-compatible low-level
    /// date algorithms", `civil_from_days`).
    static func civil(fromDays z0: Int64) -> (Int64, Int64, Int64) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }

    // MARK: - Small files

    /// A small settings file: a JSON object of key/value pairs, padded to the exact size.
    func preferences(_ rng: inout SplitMix64) {
        guard writer.remaining >= 96 else {
            writer.append(byte: UInt8(ascii: "{"))
            writer.append(repeating: 0x20, count: writer.remaining - 2)
            writer.append("}\n")
            return
        }
        writer.append("{\n")
        var first = true
        while writer.remaining > 96 {
            if !first { writer.append(",\n") }
            first = false
            writer.append("  \"")
            words(2, &rng, separator: UInt8(ascii: "."))
            writer.append("\": ")
            switch rng.below(3) {
            case 0: writer.append(rng.below(2) == 0 ? "true" : "false")
            case 1: writer.append(decimal: UInt64(rng.below(100_000)))
            default:
                writer.append("\"")
                words(1 + rng.below(3), &rng)
                writer.append("\"")
            }
        }
        writer.append(repeating: 0x20, count: writer.remaining - 3)
        writer.append("\n}\n")
    }

    // MARK: - Binary

    /// Media-like content: a format's magic bytes, then random (incompressible) bytes.
    func media(_ rng: inout SplitMix64, magic: [UInt8]) {
        magic.withUnsafeBytes { writer.append($0) }
        writer.append(randomBytes: writer.remaining, using: &rng)
    }

    /// Alternating 256 KiB runs of log text and random bytes (a backup of mixed content).
    func mixed(_ rng: inout SplitMix64) {
        var text = true
        while writer.remaining > 0 {
            let run = min(writer.remaining, 256 * 1024)
            if text {
                let stop = writer.remaining - run
                while writer.remaining > stop {
                    let bits = rng.next()
                    timestamp(advanceMilliseconds: Int64((bits >> 44) & 0xFFF))
                    writer.append(" INFO  [backup] ")
                    words(4 + Int((bits >> 2) & 7), &rng)
                    writer.append(byte: 0x0A)
                }
            } else {
                writer.append(randomBytes: run, using: &rng)
            }
            text.toggle()
        }
    }
}
