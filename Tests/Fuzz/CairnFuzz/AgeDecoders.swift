import Cairn

/// The `age` target: the age v1 parsers of the key block, fed the input directly
/// (`Spec/0004-trusted-archives.md §6`). Each must return or throw `CairnError`.
enum AgeDecoders {
    /// The identity the `age-x25519.age` seed is encrypted to, so mutations of it get past the
    /// unwrap to the MAC and the payload: 32 bytes of 0x42 (its recipient is
    /// ``age1…` of those bytes`).
    static let identity = try? AgeIdentity(secretBytes: [UInt8](repeating: 0x42, count: 32))
    /// The passphrase of the `age-cairn-argon2id.age` seed.
    static let passphrase = try? AgePassphrase("password", opsLimit: 1, memoryLimit: 64 << 10)

    static func run(_ input: [UInt8]) {
        if let identity {
            _ = try? AgeFile.decrypt(input, with: [identity])
        }
        if let header = try? AgeHeader(parsing: input) {
            _ = try? header.verifyMAC(fileKey: [UInt8](repeating: 7, count: 16))
            // The payload parser reached whatever the stanzas say, under a fixed file key.
            _ = try? AgePayload.open(input, at: header.byteCount, fileKey: [UInt8](repeating: 7, count: 16))
            // Argon2id only under small work factors: a fuzz input cannot ask for 256 MiB per run.
            if let passphrase, let stanza = header.stanzas.first, stanza.arguments.count == 4,
                let ops = Int(stanza.arguments[2]), let memory = Int(stanza.arguments[3]), ops <= 2, memory <= 1 << 20
            {
                _ = try? header.fileKey(with: passphrase)
            }
        }
        _ = try? AgePayload.open(input, at: 0, fileKey: [UInt8](repeating: 7, count: 16))
        _ = try? AgeIdentity.identities(parsingFileText: input, source: "fuzz-identity.txt")
        _ = try? AgeRecipient.recipients(parsingFileText: input, source: "fuzz-recipients.txt")
        _ = try? Bech32.decode(String(decoding: input, as: UTF8.self))
    }
}
