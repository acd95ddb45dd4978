internal import CSodium

/// The header of an age v1 file (age-encryption.org/v1, C2SP `age.md`), as
/// `Spec/0004-trusted-archives.md §6.4.1` states it: the version line, one or more recipient
/// stanzas, and the HMAC-SHA-256 of everything before it.
///
/// Parsing is strict, because a header is bytes from outside: every line ends in LF, stanza
/// bodies are canonical unpadded base64 in lines of exactly 64 characters and a final shorter
/// one, and the sizes below are hard limits.
package struct AgeHeader: Sendable {
    /// The first line of a v1 header, without its LF.
    package static let versionLine = "age-encryption.org/v1"
    /// The characters of every body line but the last.
    package static let bodyLineLength = 64
    /// The most bytes a header may take, through the MAC line's LF.
    package static let maximumByteCount = 256 << 10
    /// The most stanzas a header may hold.
    package static let maximumStanzaCount = 1024
    /// The most arguments a stanza may have (its type included).
    package static let maximumArgumentCount = 64
    /// The most bytes a stanza's body may decode to.
    package static let maximumBodyByteCount = 16 << 10
    /// The number of bytes in the header MAC.
    package static let macByteCount = 32
    /// Stanza types that must be the only stanza of their header: age's `scrypt` and Cairn's
    /// passphrase stanza (a passphrase also authenticates its sender only when alone).
    package static let loneStanzaTypes: Set<String> = ["scrypt", AgePassphrase.stanzaType]

    /// Where a stanza starts: its 1-based line number and byte offset in the header.
    package struct Location: Hashable, Sendable {
        package var line: Int
        package var offset: Int
    }

    /// The stanzas, in header order.
    package private(set) var stanzas: [AgeStanza]
    /// Where each stanza starts, in the same order.
    package private(set) var stanzaLocations: [Location]
    /// The header MAC, 32 bytes.
    package private(set) var mac: [UInt8]
    /// Where the MAC line starts.
    package private(set) var macLocation: Location
    /// The header's bytes, through the LF that ends the MAC line.
    package private(set) var encoded: [UInt8]

    /// The number of bytes the header takes: the offset of the payload.
    package var byteCount: Int { encoded.count }

    /// The header at the start of `bytes` (an age file); the payload follows at ``byteCount``.
    ///
    /// Nothing is checked against a file key here: see `verifyMAC(fileKey:)` and `fileKey(with:)`.
    ///
    /// - Throws: ``CairnError`` naming the line (in the message) and its byte offset:
    ///   `.unsupportedVersion` for an age version other than v1, `.corrupted` for anything else
    ///   that breaks the grammar (not an age file, an empty or non-ASCII argument, a body line
    ///   longer than 64 characters, non-canonical base64, no stanza, a lone stanza type with
    ///   others), `.truncated` when the bytes end inside the header, `.limitExceeded` past a limit
    ///   above.
    package init(parsing bytes: [UInt8]) throws(CairnError) {
        var lines = AgeHeaderLines(bytes: bytes)
        let first = try lines.next()
        guard first.content.elementsEqual(Self.versionLine.utf8) else {
            let prefix = "age-encryption.org/".utf8
            let version = first.content.dropFirst(prefix.count)
            if first.content.starts(with: prefix), !version.isEmpty, version.allSatisfy({ (33...126).contains($0) }) {
                throw lines.error(.unsupportedVersion, "the age version is \(String(decoding: first.content, as: UTF8.self)); Cairn reads age-encryption.org/v1", at: first)
            }
            throw lines.error(.corrupted, "not an age file: the first line is not \(Self.versionLine)", at: first)
        }
        var stanzas: [AgeStanza] = []
        var locations: [Location] = []
        var macLine: (mac: [UInt8], location: Location)?
        while macLine == nil {
            let line = try lines.next()
            if line.content.starts(with: "-> ".utf8) {
                guard stanzas.count < Self.maximumStanzaCount else {
                    throw lines.error(.limitExceeded, "the age header has more than \(Self.maximumStanzaCount) stanzas", at: line)
                }
                stanzas.append(try Self.stanza(startingWith: line, from: &lines))
                locations.append(Location(line: line.number, offset: line.start))
            } else if line.content.starts(with: "---".utf8) {
                macLine = (try Self.mac(from: line, lines: lines), Location(line: line.number, offset: line.start))
            } else {
                throw lines.error(.corrupted, "expected a stanza (\"-> \") or the header MAC (\"--- \")", at: line)
            }
        }
        guard let macLine, !stanzas.isEmpty else {
            throw lines.error(.corrupted, "the age header has no stanza", at: lines.last)
        }
        if stanzas.count > 1, let lone = stanzas.firstIndex(where: { Self.loneStanzaTypes.contains($0.type) }) {
            throw CairnError(
                .corrupted, "age header line \(locations[lone].line): a \(stanzas[lone].type) stanza must be the only stanza, and this header has \(stanzas.count)",
                offset: UInt64(locations[lone].offset))
        }
        self.stanzas = stanzas
        self.stanzaLocations = locations
        self.mac = macLine.mac
        self.macLocation = macLine.location
        self.encoded = Array(bytes[..<lines.offset])
    }

    /// The header of `stanzas` with its MAC under `fileKey`: what an age writer puts before the
    /// payload.
    ///
    /// - Throws: ``CairnError`` with code `.invalidArgument` for a file key that is not 16
    ///   bytes, or when the header could not be read back (no stanza, a lone type with others,
    ///   past a limit): nothing is written that ``init(parsing:)`` refuses.
    package init(stanzas: [AgeStanza], fileKey: [UInt8]) throws(CairnError) {
        var bytes = Array((Self.versionLine + "\n").utf8)
        for stanza in stanzas { bytes += stanza.encoded }
        bytes += Array("---".utf8)
        let mac = try Self.mac(of: bytes[...], fileKey: fileKey)
        bytes += Array((" " + Base64.encodeUnpadded(mac) + "\n").utf8)
        do {
            self = try AgeHeader(parsing: bytes)
        } catch {
            throw CairnError(.invalidArgument, "cannot write this age header: \(error.message)")
        }
    }

    /// Checks the header MAC against `fileKey`.
    ///
    /// - Throws: ``CairnError`` with code `.checksumMismatch` naming the MAC line and its offset
    ///   when the MAC does not match (the header was changed, or the file key is not this
    ///   file's), `.invalidArgument` for a file key that is not 16 bytes.
    package func verifyMAC(fileKey: [UInt8]) throws(CairnError) {
        let expected = try Self.mac(of: encoded[..<(macLocation.offset + 3)], fileKey: fileKey)
        guard sodium_memcmp(expected, mac, Self.macByteCount) == 0 else {
            throw CairnError(
                .checksumMismatch,
                "age header line \(macLocation.line): the header MAC does not match bytes 0-\(macLocation.offset + 2): the header was changed",
                offset: UInt64(macLocation.offset))
        }
    }

    /// HMAC-SHA-256 of `covered` under HKDF-SHA-256(ikm = file key, salt = empty, info = "header").
    private static func mac(of covered: ArraySlice<UInt8>, fileKey: [UInt8]) throws(CairnError) -> [UInt8] {
        guard fileKey.count == AgeFile.fileKeyByteCount else {
            throw CairnError(.invalidArgument, "an age file key is \(AgeFile.fileKeyByteCount) bytes, not \(fileKey.count)")
        }
        let key = try HKDF.sha256(inputKeyMaterial: fileKey, salt: [], info: Array("header".utf8))
        return try HMAC.sha256(key: key, message: Array(covered))
    }

    /// The stanza whose `-> ` line is `first`; its body lines are read from `lines`.
    private static func stanza(startingWith first: AgeHeaderLines.Line, from lines: inout AgeHeaderLines) throws(CairnError) -> AgeStanza {
        let arguments = first.content.dropFirst(3).split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard arguments.count <= maximumArgumentCount else {
            throw lines.error(.limitExceeded, "a stanza has more than \(maximumArgumentCount) arguments", at: first)
        }
        guard arguments.allSatisfy({ !$0.isEmpty && $0.allSatisfy { (33...126).contains($0) } }) else {
            throw lines.error(.corrupted, "a stanza argument is empty or holds a character outside US-ASCII 33-126", at: first)
        }
        var text: [UInt8] = []
        var line: AgeHeaderLines.Line
        repeat {
            line = try lines.next()
            guard line.content.count <= bodyLineLength else {
                throw lines.error(.corrupted, "a stanza body line is longer than \(bodyLineLength) characters", at: line)
            }
            text += line.content
            guard text.count <= (maximumBodyByteCount + 2) / 3 * 4 else {
                throw lines.error(.limitExceeded, "a stanza body is larger than \(maximumBodyByteCount) bytes", at: line)
            }
        } while line.content.count == bodyLineLength
        guard let body = Base64.decodeUnpadded(text[...]) else {
            throw lines.error(.corrupted, "the stanza body is not canonical unpadded base64", at: line)
        }
        let strings = arguments.map { String(decoding: $0, as: UTF8.self) }
        do {
            return try AgeStanza(arguments: strings, body: body)
        } catch {
            throw lines.error(.corrupted, error.message, at: first)
        }
    }

    /// The MAC of the line `--- MAC`.
    private static func mac(from line: AgeHeaderLines.Line, lines: AgeHeaderLines) throws(CairnError) -> [UInt8] {
        guard line.content.count == 4 + 43, line.content.starts(with: "--- ".utf8),
            let mac = Base64.decodeUnpadded(line.content.dropFirst(4), count: macByteCount)
        else {
            throw lines.error(.corrupted, "the MAC line is not \"--- \" and 43 characters of canonical base64", at: line)
        }
        return mac
    }
}

/// The lines of an age header, each ended by LF, within ``AgeHeader/maximumByteCount``.
struct AgeHeaderLines {
    /// One line: its 1-based number, the offset of its first byte, and its bytes without the LF.
    struct Line {
        var number: Int
        var start: Int
        var content: ArraySlice<UInt8>
    }

    let bytes: [UInt8]
    /// The offset after the last line read.
    private(set) var offset = 0
    /// The last line read (line 0, empty, before any).
    private(set) var last = Line(number: 0, start: 0, content: [])

    init(bytes: [UInt8]) { self.bytes = bytes }

    /// The next line.
    ///
    /// - Throws: ``CairnError`` with code `.truncated` when the bytes end before its LF,
    ///   `.limitExceeded` when the LF would lie past the header size limit.
    mutating func next() throws(CairnError) -> Line {
        let limit = min(bytes.count, AgeHeader.maximumByteCount)
        guard let end = bytes[offset..<limit].firstIndex(of: 0x0A) else {
            let number = last.number + 1
            if bytes.count > AgeHeader.maximumByteCount {
                throw CairnError(
                    .limitExceeded, "age header line \(number): the header is longer than \(AgeHeader.maximumByteCount) bytes", offset: UInt64(offset))
            }
            throw CairnError(.truncated, "age header line \(number): the bytes end inside the header", offset: UInt64(offset))
        }
        last = Line(number: last.number + 1, start: offset, content: bytes[offset..<end])
        offset = end + 1
        return last
    }

    /// An error about `line`, naming it and its offset.
    func error(_ code: CairnError.Code, _ message: String, at line: Line) -> CairnError {
        CairnError(code, "age header line \(line.number): \(message)", offset: UInt64(line.start))
    }
}
