/// The fixed 128-word vocabulary of the generated text, stored once in memory owned by this
/// class (a global table read in a hot loop pays lazy-initialisation checks; see TOOLCHAIN.md).
final class Vocabulary {
    static let size = 128

    private static let text = """
        the of and to in is for on with as account sync export import archive record message \
        photo album note draft folder device backup restore update version release build user \
        profile settings session token cache index query table column value string number date \
        time zone region country city street email phone contact calendar event reminder task \
        project team meeting report summary invoice payment order item price total status \
        pending complete failed retry queue worker thread process memory storage disk network \
        request response server client upload download share link access permission owner \
        group member role policy rule filter search result page view window screen layout \
        theme color font image video audio track playlist library history bookmark tab \
        migration schema field key attribute metadata checksum chunk stream buffer offset \
        length
        """

    /// Words, then the same words capitalised, back to back.
    private let storage: UnsafeMutableRawPointer
    private let offsets: UnsafeMutablePointer<Int32>
    private let lengths: UnsafeMutablePointer<Int32>

    init() {
        let words = Vocabulary.text.split(whereSeparator: { $0 == " " || $0 == "\n" }).map { Array($0.utf8) }
        precondition(words.count == Vocabulary.size, "the vocabulary has \(words.count) words")
        let total = words.reduce(0) { $0 + $1.count } * 2
        // 16 bytes of padding: ``CorpusWriter/append(word:)`` reads 16 bytes from any word.
        storage = UnsafeMutableRawPointer.allocate(byteCount: total + 16, alignment: 16)
        storage.initializeMemory(as: UInt8.self, repeating: 0, count: total + 16)
        offsets = UnsafeMutablePointer<Int32>.allocate(capacity: 2 * Vocabulary.size)
        lengths = UnsafeMutablePointer<Int32>.allocate(capacity: 2 * Vocabulary.size)
        var position = 0
        for (capital, list) in [(false, words), (true, words)] {
            for (i, word) in list.enumerated() {
                var bytes = word
                if capital, let first = bytes.first, first >= 0x61, first <= 0x7A { bytes[0] = first - 0x20 }
                bytes.withUnsafeBytes { storage.advanced(by: position).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
                let slot = (capital ? Vocabulary.size : 0) + i
                offsets[slot] = Int32(position)
                lengths[slot] = Int32(bytes.count)
                position += bytes.count
            }
        }
    }

    deinit {
        storage.deallocate()
        offsets.deallocate()
        lengths.deallocate()
    }

    /// Word `index` (0..<128), capitalised if asked.
    @inline(__always)
    func word(_ index: Int, capitalised: Bool = false) -> UnsafeRawBufferPointer {
        let slot = (capitalised ? Vocabulary.size : 0) + (index & (Vocabulary.size - 1))
        return UnsafeRawBufferPointer(start: storage + Int(offsets[slot]), count: Int(lengths[slot]))
    }

    /// A word index skewed towards the front of the list (the minimum of two draws), so that some
    /// words are frequent, as in real text. Uses 14 bits of `bits`.
    @inline(__always)
    static func skewedIndex(_ bits: UInt64) -> Int {
        let a = Int(truncatingIfNeeded: bits & 0x7F)
        let b = Int(truncatingIfNeeded: (bits >> 7) & 0x7F)
        return min(a, b)
    }
}
