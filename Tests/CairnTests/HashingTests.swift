import CairnTestSupport
import Testing

@testable import Cairn

private func randomBytes(_ count: Int, seed: UInt64) -> [UInt8] {
    var rng = SeededGenerator(seed: seed)
    return (0..<count).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
}

@Suite("SHA-256 (FIPS 180-4)")
struct SHA256Tests {
    /// Known answers from FIPS 180-4's examples (NIST CSRC "SHA256.pdf") and FIPS 180-2 App. B.
    static let vectors: [(message: String, digest: String)] = [
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        (
            "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        ),
    ]

    @Test("one-shot hash matches the NIST vectors", arguments: vectors)
    func oneShot(message: String, digest: String) throws {
        #expect(try SHA256.hash(Array(message.utf8)).hexString == digest)
    }

    @Test("streaming hash matches the NIST vectors", arguments: vectors)
    func streaming(message: String, digest: String) throws {
        let hasher = SHA256()
        for byte in message.utf8 { hasher.update([byte]) }
        #expect(try hasher.finalize().hexString == digest)
    }

    @Test("one million 'a' hashes to the NIST answer, whole and in pieces")
    func millionA() throws {
        let expected = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
        let message = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        #expect(try SHA256.hash(message).hexString == expected)
        let hasher = SHA256()
        message.withUnsafeBytes { bytes in
            for start in stride(from: 0, to: bytes.count, by: 999) {
                hasher.update(UnsafeRawBufferPointer(rebasing: bytes[start..<min(start + 999, bytes.count)]))
            }
        }
        #expect(try hasher.finalize().hexString == expected)
    }

    @Test("updates in random slices give the one-shot digest", arguments: [0 as UInt64, 1, 2, 3])
    func randomSlices(seed: UInt64) throws {
        let data = randomBytes(200_000, seed: seed)
        let expected = try data.withUnsafeBytes { bytes throws(CairnError) in try SHA256.hash(bytes) }
        var rng = SeededGenerator(seed: seed &+ 100)
        let hasher = SHA256()
        data.withUnsafeBytes { bytes in
            var start = 0
            while start < bytes.count {
                let length = Int(rng.next() % 5000)
                let end = min(start + length, bytes.count)
                hasher.update(UnsafeRawBufferPointer(rebasing: bytes[start..<end]))
                start = end
            }
        }
        #expect(try hasher.finalize() == expected)
    }

    @Test("finalize resets the hasher for the next message")
    func reuse() throws {
        let hasher = SHA256()
        hasher.update(Array("garbage".utf8))
        _ = try hasher.finalize()
        hasher.update(Array("abc".utf8))
        #expect(try hasher.finalize().hexString == Self.vectors[0].digest)
        #expect(try hasher.finalize().hexString == Self.vectors[1].digest)
    }
}

@Suite("Digest")
struct DigestTests {
    static let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

    @Test("hex string round-trips, lowercase out, either case in")
    func hexRoundTrip() throws {
        let digest = try #require(Digest(hexString: Self.abc))
        #expect(digest.hexString == Self.abc)
        #expect(digest.description == Self.abc)
        #expect(Digest(hexString: Self.abc.uppercased()) == digest)
        #expect(Digest.zero.hexString == String(repeating: "0", count: 64))
    }

    @Test(
        "malformed hex strings are rejected",
        arguments: [
            "", String(abc.dropLast()), abc + "0", abc + "00", "g" + abc.dropFirst(), " " + abc.dropFirst(),
            String(abc.dropLast(2)) + "é",
        ])
    func badHex(text: String) {
        #expect(Digest(hexString: text) == nil)
    }

    @Test("bytes in, bytes out, in order")
    func bytes() throws {
        let bytes = (0..<32).map { UInt8($0 * 7 + 1) }
        let digest = try #require(Digest(bytes: bytes))
        var out: [UInt8] = [0xEE]
        digest.append(to: &out)
        #expect(out == [0xEE] + bytes)
        #expect(digest.withUnsafeBytes { Array($0) } == bytes)
        #expect(digest.hexString == bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined())
        #expect(Digest(bytes: Array(bytes.dropLast())) == nil)
        #expect(Digest(bytes: bytes + [0]) == nil)
    }

    @Test("ordering is lexicographic over the bytes, like the hex strings")
    func ordering() throws {
        var rng = SeededGenerator(seed: 42)
        var digests: [Digest] = []
        for index in 0..<200 {
            var bytes = (0..<32).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            // Share long prefixes so that later words decide some comparisons.
            if index % 3 == 0 { bytes.replaceSubrange(0..<20, with: repeatElement(7, count: 20)) }
            if index % 5 == 0 { bytes.replaceSubrange(0..<31, with: repeatElement(9, count: 31)) }
            digests.append(try #require(Digest(bytes: bytes)))
        }
        #expect(digests.sorted().map(\.hexString) == digests.map(\.hexString).sorted())
        let one = try #require(Digest(bytes: [1] + [UInt8](repeating: 0, count: 31)))
        let last = try #require(Digest(bytes: [UInt8](repeating: 0, count: 31) + [0xFF]))
        #expect(last < one)
        #expect(Digest.zero < last)
        #expect(Set([one, last, one]).count == 2)
    }
}

@Suite("CRC-32")
struct CRC32Tests {
    @Test("CRC-32 of \"123456789\" is the catalogue check value 0xCBF43926")
    func checkValue() {
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(CRC32.checksum([UInt8]()) == 0)
    }

    @Test("continuing from a prefix's CRC gives the CRC of the whole, at every split")
    func continuing() {
        let message = Array("123456789".utf8)
        for split in 0...message.count {
            let head = CRC32.checksum(Array(message[..<split]))
            #expect(CRC32.checksum(Array(message[split...]), continuing: head) == 0xCBF4_3926)
        }
        let data = randomBytes(100_000, seed: 9)
        let whole = CRC32.checksum(data)
        let head = CRC32.checksum(Array(data[..<33_333]))
        #expect(CRC32.checksum(Array(data[33_333...]), continuing: head) == whole)
    }

    @Test("an empty buffer leaves the running CRC unchanged")
    func emptyContinuation() {
        #expect(CRC32.checksum(UnsafeRawBufferPointer(start: nil, count: 0), continuing: 0x1234_5678) == 0x1234_5678)
    }
}
