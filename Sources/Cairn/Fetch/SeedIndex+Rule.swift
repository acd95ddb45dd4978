import Glibc

/// The one rule for a local `--seed` (`Spec/0003-command-line.md §13`, "a bad seed"), the same for
/// a plain and an encrypted fetch:
///
/// 1. A seed that cannot be opened (missing, unreadable, a directory) or does not start with a
///    Cairn prelude (not an archive, or cut inside its first 12 bytes) is refused before any
///    request: a mistyped path is not silently ignored (``requireArchive(atPath:)``).
/// 2. An archive that cannot help this fetch is left out with its reason
///    (``FetchEvent/seedSkipped(path:reason:)``), and the fetch goes on: an encrypted seed of a
///    plain archive or the other way round, another maker's chunk keys, a key block no identity
///    opens, an envelope or header that does not parse (damaged at its start).
/// 3. A seed damaged after its start is used up to its last record that parses; whatever is
///    copied from any seed is verified like downloaded bytes.
extension SeedIndex {
    /// Rule 1: opens `path` and checks that it starts with a Cairn prelude (of any version this
    /// reader reads, plain or encrypted).
    ///
    /// - Returns: whether the seed is an encrypted archive (format 3.x).
    /// - Throws: `.notFound`/`.io` naming `path` when it cannot be opened or read;
    ///   `.invalidArgument` "not a Cairn archive" naming `path` when its first bytes are not a
    ///   prelude.
    @discardableResult
    package static func requireArchive(atPath path: String) throws(CairnError) -> Bool {
        let descriptor = try FileDescriptor.open(path, flags: O_RDONLY)
        defer { _ = try? descriptor.close() }
        var prelude = [UInt8](repeating: 0, count: Prelude.length)
        let count = try prelude.withMutableBytes { (buffer) throws(CairnError) -> Int in
            try descriptor.read(fromAbsoluteOffset: 0, into: buffer)
        }
        do throws(CairnError) {
            _ = try Prelude.parse(Array(prelude[0..<count]), sealed: true)
            return true
        } catch where error.code == .untrusted {
            return false  // a plain archive's prelude
        } catch {
            throw CairnError(.invalidArgument, "the seed is not a Cairn archive (\(error.message))", path: path)
        }
    }

    /// Rules 1 to 3 for the local seed at `path`: refuses it, indexes it, or says why it is left out.
    ///
    /// - Parameters:
    ///   - decryption: the fetch's identities; empty for a plain archive.
    ///   - keying: the fetched archive's chunk keys; given with `decryption`.
    /// - Returns: nil when the seed was indexed; else why it cannot help.
    /// - Throws: as ``requireArchive(atPath:)`` (rule 1).
    package func admit(localSeed path: String, decryption: ArchiveDecryption, keying: ChunkKeying?) throws(CairnError) -> String? {
        let encrypted = try Self.requireArchive(atPath: path)
        let wanted = !decryption.isEmpty
        guard encrypted == wanted else {
            return encrypted
                ? "it is an encrypted archive, and the archive fetched is plain: it shares no chunk with it"
                : "it is a plain archive, and the archive fetched is encrypted: it shares no chunk with it"
        }
        do throws(CairnError) {
            if let keying, wanted {
                guard try add(encryptedPath: path, decryption: decryption, keying: keying) else {
                    return "its chunk keys are not the archive's (another maker's export): it shares no chunk with it"
                }
            } else {
                try add(path: path)
            }
            return nil
        } catch {
            return error.message
        }
    }
}
