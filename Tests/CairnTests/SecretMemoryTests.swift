import CairnTestSupport
import Foundation
import Testing

@testable import Cairn

/// Secrets in memory (`Spec/0004-trusted-archives.md` "Secrets in memory"): the types that hold a
/// secret key or a derived key keep it in ``SecretBytes`` (wiped with `sodium_memzero` when it
/// goes), not in a `[UInt8]` field; temporaries are wiped once used.
@Suite("Secrets in memory")
struct SecretMemoryTests {
    /// Whether `value`'s stored properties (and theirs, two levels down) hold `secret` in a `[UInt8]`.
    static func holdsInArray(_ value: Any, _ secret: [UInt8], depth: Int = 2) -> Bool {
        for child in Mirror(reflecting: value).children {
            if let bytes = child.value as? [UInt8], bytes.count >= secret.count,
                (0...(bytes.count - secret.count)).contains(where: { Array(bytes[$0..<($0 + secret.count)]) == secret })
            {
                return true
            }
            if depth > 0, !(child.value is SecretBytes), holdsInArray(child.value, secret, depth: depth - 1) { return true }
        }
        return false
    }

    @Test("Secrets in memory: SigningKey, AgeIdentity, MakerKey and BlockSealer keep their secret in SecretBytes, never in a [UInt8] field; what they do with it is unchanged")
    func holdersKeepNoArrayCopy() throws {
        let seed: [UInt8] = (0..<32).map { UInt8($0) &* 7 &+ 1 }
        let key = try SigningKey(keyID: SigningKeyID(bytes: Array("SECRETKY".utf8)), seed: seed)
        #expect(!Self.holdsInArray(key, seed), "SigningKey holds its seed in an array")
        #expect(key.publicKey.isValidSignature(key.signature(of: [1, 2, 3]), of: [1, 2, 3]))
        #expect(key.withSeed { $0 } == seed)

        let identity = try AgeIdentity(secretBytes: seed)
        #expect(!Self.holdsInArray(identity, seed), "AgeIdentity holds its secret in an array")
        #expect(try AgeIdentity(identity.secretKeyText).recipient == identity.recipient)

        let maker = try MakerKey(secretBytes: seed)
        #expect(!Self.holdsInArray(maker, seed), "MakerKey holds its secret in an array")
        #expect(try MakerKey(fileText: maker.fileText).withSecretBytes { $0 } == seed)

        let sealer = try BlockSealer(key: seed, archiveID: Array(repeating: 9, count: 16))
        #expect(!Self.holdsInArray(sealer, seed), "BlockSealer holds its key in an array")
        let plaintext: [UInt8] = Array("a block".utf8)
        let sealed = plaintext.withUnsafeBytes { sealer.seal($0, index: 3, isFinal: true) }
        var opened = [UInt8](repeating: 0, count: plaintext.count)
        #expect(sealed.withUnsafeBytes { s in opened.withUnsafeMutableBytes { sealer.open(s, index: 3, isFinal: true, into: $0) } })
        #expect(opened == plaintext)
    }

    @Test("Secrets in memory: SecretBytes.wipe zeroes a temporary in place; SecretBytes holds what it was given and compares in constant time")
    func wipeAndHold() {
        var temporary: [UInt8] = Array(1...40)
        SecretBytes.wipe(&temporary)
        #expect(temporary == [UInt8](repeating: 0, count: 40))
        let a = SecretBytes(copying: Array(1...32))
        let b = SecretBytes(count: 32) { pointer in for index in 0..<32 { pointer[index] = UInt8(index + 1) } }
        #expect(a.matches(b) && a.withUnsafeBytes { Array($0) } == Array(1...32))
        #expect(!a.matches(SecretBytes(copying: Array(2...33))))
    }
}
