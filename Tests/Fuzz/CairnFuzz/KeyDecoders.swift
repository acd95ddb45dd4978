import Cairn

/// The `keys` target: minisign's key and signature parsers, fed the input directly
/// (`Spec/0004-trusted-archives.md §2`). Each must return or throw `CairnError`.
enum KeyDecoders {
    /// A fixed key that signature inputs are checked against (its id rarely matches: the
    /// parser and the id check are what is reached).
    static let key = try? SigningKey(keyID: SigningKeyID(bytes: [1, 2, 3, 4, 5, 6, 7, 8]), seed: [UInt8](repeating: 7, count: 32))

    static func run(_ input: [UInt8]) {
        _ = try? PublicKey.keys(parsingMinisignText: input, source: "fuzz.pub")
        _ = try? PublicKey(minisignBase64: String(decoding: input, as: UTF8.self))
        // Without a password an encrypted key is refused before scrypt runs: a fuzz input cannot
        // ask for 1 GiB per run.
        _ = try? SigningKey.minisignSecretKeyNeedsPassword(input, path: "fuzz.key")
        _ = try? SigningKey(minisignSecretKeyText: input, password: nil, path: "fuzz.key")
        if input.count == 158, let sealed = try? MinisignSecretKey(decoding: input, path: "fuzz.key") {
            // Decryption with a password only under small scrypt limits.
            if !sealed.needsPassword || (sealed.opsLimit <= 1 << 16 && sealed.memoryLimit <= 1 << 20) {
                _ = try? sealed.signingKey(password: Array("password".utf8), path: "fuzz.key")
            }
        }
        if let signature = try? MinisignSignature(parsing: input, path: "fuzz.minisig"), let key {
            _ = signature.fileText
            let trusted = [key.publicKey]
            _ = try? signature.check(message: input, against: trusted, path: "fuzz.minisig")
            // The same signature, claimed by the fixed key: the Ed25519 checks themselves run.
            _ = try? signature.check(message: input, against: [PublicKey(keyID: signature.keyID, rawBytes: key.publicKey.rawBytes)], path: "fuzz.minisig")
        }
    }
}
