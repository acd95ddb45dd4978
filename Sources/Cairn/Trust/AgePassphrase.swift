internal import CSodium

/// A passphrase that wraps an age file key with Argon2id, in Cairn's `cairn-argon2id` stanza
/// (`Spec/0004-trusted-archives.md §6.4.3`); age's own passphrase stanza uses scrypt instead.
///
/// The wrap key is libsodium's `crypto_pwhash` with `crypto_pwhash_ALG_ARGON2ID13` (Argon2id
/// version 1.3, RFC 9106, one lane) over the passphrase and a random 16-byte salt. The work
/// factors are written in the stanza; a reader refuses factors above ``maximumOpsLimit`` and
/// ``maximumMemoryLimit``, so a hostile header cannot make it allocate more than 256 MiB.
public struct AgePassphrase: Sendable {
    /// The passphrase's bytes.
    package let bytes: [UInt8]
    /// The Argon2id passes (libsodium's `opslimit`) a new stanza is written with.
    public let opsLimit: Int
    /// The Argon2id memory, in bytes (libsodium's `memlimit`), a new stanza is written with.
    public let memoryLimit: Int

    /// The default passes: libsodium's `crypto_pwhash_OPSLIMIT_MODERATE`, 3.
    public static let defaultOpsLimit = 3
    /// The default memory: libsodium's `crypto_pwhash_MEMLIMIT_MODERATE`, 256 MiB.
    public static let defaultMemoryLimit = 256 << 20
    /// The fewest passes Argon2id takes (libsodium's `crypto_pwhash_argon2id_OPSLIMIT_MIN`).
    public static let minimumOpsLimit = 1
    /// The least memory Argon2id takes, in bytes (`crypto_pwhash_argon2id_MEMLIMIT_MIN`).
    public static let minimumMemoryLimit = 8 << 10
    /// The most passes a stanza may ask of a reader.
    public static let maximumOpsLimit = 10
    /// The most memory a stanza may ask of a reader, in bytes: 256 MiB.
    public static let maximumMemoryLimit = 256 << 20

    /// The type (first argument) of the passphrase stanza.
    package static let stanzaType = "cairn-argon2id"
    /// The bytes of an Argon2id salt (`crypto_pwhash_SALTBYTES`).
    package static let saltByteCount = 16

    /// A passphrase and the work factors new stanzas are written with.
    ///
    /// - Parameters:
    ///   - passphrase: the passphrase's bytes (UTF-8 for text); not empty.
    ///   - opsLimit: Argon2id passes, 1 through ``maximumOpsLimit``.
    ///   - memoryLimit: Argon2id memory in bytes, a multiple of 1024 from 8 KiB through
    ///     ``maximumMemoryLimit``.
    /// - Throws: ``CairnError`` with code `.invalidArgument` for an empty passphrase or a work
    ///   factor out of range.
    public init(_ passphrase: [UInt8], opsLimit: Int = defaultOpsLimit, memoryLimit: Int = defaultMemoryLimit) throws(CairnError) {
        guard !passphrase.isEmpty else { throw CairnError(.invalidArgument, "the passphrase is empty") }
        guard Self.isAccepted(opsLimit: opsLimit, memoryLimit: memoryLimit) else {
            throw CairnError(.invalidArgument, "Argon2id work factors out of range: \(Self.rangeDescription)")
        }
        self.bytes = passphrase
        self.opsLimit = opsLimit
        self.memoryLimit = memoryLimit
    }

    /// A passphrase from text (its UTF-8 bytes).
    ///
    /// - Throws: as the initializer taking bytes.
    public init(_ passphrase: String, opsLimit: Int = defaultOpsLimit, memoryLimit: Int = defaultMemoryLimit) throws(CairnError) {
        try self.init(Array(passphrase.utf8), opsLimit: opsLimit, memoryLimit: memoryLimit)
    }

    /// A `cairn-argon2id` stanza wrapping `fileKey` under this passphrase, with a fresh salt.
    ///
    /// - Throws: ``CairnError`` with code `.io` when libsodium cannot give random bytes or
    ///   allocate Argon2id's memory.
    package func stanza(wrapping fileKey: [UInt8]) throws(CairnError) -> AgeStanza {
        try stanza(wrapping: fileKey, salt: Sodium.randomBytes(Self.saltByteCount))
    }

    /// A `cairn-argon2id` stanza with the given salt (for fixed test vectors).
    package func stanza(wrapping fileKey: [UInt8], salt: [UInt8]) throws(CairnError) -> AgeStanza {
        let key = try wrapKey(salt: salt, opsLimit: opsLimit, memoryLimit: memoryLimit)
        let body = try ChaCha20Poly1305.seal(fileKey[...], key: key, nonce: AgeFile.stanzaNonce)
        return try AgeStanza(arguments: [Self.stanzaType, Base64.encodeUnpadded(salt), String(opsLimit), String(memoryLimit)], body: body)
    }

    /// The file key in a `cairn-argon2id` stanza when this passphrase wraps it; nil when it does
    /// not (the body does not authenticate: another passphrase, or a changed stanza).
    ///
    /// - Throws: ``CairnError`` with code `.corrupted` when the stanza does not have its shape
    ///   (four arguments: the type, canonical base64 of a 16-byte salt, two canonical decimal
    ///   numbers; a 32-byte body), `.limitExceeded` when its work factors are outside what a
    ///   reader accepts (nothing is allocated), `.io` when Argon2id cannot allocate its memory.
    package func fileKey(in stanza: AgeStanza) throws(CairnError) -> [UInt8]? {
        let arguments = stanza.arguments
        guard arguments.count == 4 else {
            throw CairnError(.corrupted, "a \(Self.stanzaType) stanza has 4 arguments, this one \(arguments.count)")
        }
        guard let salt = Base64.decodeUnpadded(Array(arguments[1].utf8)[...], count: Self.saltByteCount) else {
            throw CairnError(.corrupted, "a \(Self.stanzaType) stanza's salt is not canonical base64 of \(Self.saltByteCount) bytes")
        }
        guard let ops = Self.canonicalDecimal(arguments[2]), let memory = Self.canonicalDecimal(arguments[3]) else {
            throw CairnError(.corrupted, "a \(Self.stanzaType) stanza's work factors are not decimal numbers without leading zeros")
        }
        guard Self.isAccepted(opsLimit: ops, memoryLimit: memory) else {
            throw CairnError(
                .limitExceeded, "the \(Self.stanzaType) stanza asks for \(ops) passes and \(memory) bytes; a reader accepts \(Self.rangeDescription)")
        }
        guard stanza.body.count == AgeFile.fileKeyByteCount + ChaCha20Poly1305.tagByteCount else {
            throw CairnError(.corrupted, "a \(Self.stanzaType) stanza's body is 32 bytes, this one \(stanza.body.count)")
        }
        let key = try wrapKey(salt: salt, opsLimit: ops, memoryLimit: memory)
        return try ChaCha20Poly1305.open(stanza.body[...], key: key, nonce: AgeFile.stanzaNonce)
    }

    /// Argon2id (libsodium `crypto_pwhash`, `ALG_ARGON2ID13`) of the passphrase: the 32-byte
    /// wrap key.
    private func wrapKey(salt: [UInt8], opsLimit: Int, memoryLimit: Int) throws(CairnError) -> [UInt8] {
        try Sodium.ready()
        var key = [UInt8](repeating: 0, count: ChaCha20Poly1305.keyByteCount)
        let characters = bytes.map { CChar(bitPattern: $0) }
        let status = crypto_pwhash(
            &key, UInt64(key.count), characters, UInt64(characters.count), salt, UInt64(opsLimit), memoryLimit,
            crypto_pwhash_ALG_ARGON2ID13)
        guard status == 0 else {
            throw CairnError(.io, "Argon2id could not run: it could not allocate \(memoryLimit) bytes")
        }
        return key
    }

    /// Whether a reader accepts these work factors (and a writer writes them).
    private static func isAccepted(opsLimit: Int, memoryLimit: Int) -> Bool {
        (minimumOpsLimit...maximumOpsLimit).contains(opsLimit)
            && (minimumMemoryLimit...maximumMemoryLimit).contains(memoryLimit) && memoryLimit % 1024 == 0
    }

    private static var rangeDescription: String {
        "\(minimumOpsLimit)-\(maximumOpsLimit) passes and \(minimumMemoryLimit)-\(maximumMemoryLimit) bytes of memory, a multiple of 1024"
    }

    /// The value of `text` when it is a decimal number of at most 18 digits with no leading zero
    /// (`^[1-9][0-9]{0,17}$`, as age's scrypt stanza writes its work factor): it fits an `Int`.
    private static func canonicalDecimal(_ text: String) -> Int? {
        let digits = Array(text.utf8)
        // "0" is canonical (then out of range, `limitExceeded`); "01" is not.
        guard (1...18).contains(digits.count), digits.count == 1 || digits[0] != UInt8(ascii: "0"),
            digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
        else { return nil }
        return digits.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
    }
}
