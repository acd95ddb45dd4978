/// The chain digest of format 2.0 (`Spec/0001-container-format.md §10.3`), built from one
/// SHA-256 per record instead of one serial pass over every byte:
///
/// ```
/// d(r)  = SHA-256(the framed bytes of record r, type byte to CRC)
/// C_0   = SHA-256(Z ‖ SHA-256(prelude) ‖ d(header))
/// C_k   = SHA-256(C_(k−1) ‖ d(commit k−1) ‖ d(r_1) ‖ … ‖ d(r_n))   r_i: the records between
/// footer.chainDigest = SHA-256(C_last ‖ d(last commit) ‖ d(m_1) ‖ … ‖ d(m_j))   m_i: manifest
/// ```
///
/// Each `d(r)` can be computed where the record is built (the writer's processing tasks frame
/// chunk records on every core), so the serial part is 32 bytes per record. SHA-256 is
/// collision resistant, so two prefixes with the same `C_k` have the same record digests, hence
/// the same records, hence the same bytes: a resume token still names a prefix (§10.5).
package struct RecordChain {
    private let hasher: SHA256

    /// A chain before the prelude: fed the 32 zero bytes `Z`.
    package init() {
        hasher = SHA256()
        hasher.update(Digest.zero.bytes)
    }

    private init(hasher: SHA256) { self.hasher = hasher }

    /// A chain with the same link so far, continued apart from this one.
    package func copy() -> RecordChain { RecordChain(hasher: hasher.copy()) }

    /// A chain continuing after a commit record with digest `previous` (C_k) whose own record
    /// digest is `commitRecordDigest`.
    package init(continuingFrom previous: Digest, commitRecordDigest: Digest) {
        hasher = SHA256()
        hasher.update(previous.bytes)
        hasher.update(commitRecordDigest.bytes)
    }

    /// A chain fed `link` since it was primed: the previous chain digest C_(k−1), the previous
    /// commit record's digest, then the digests of the records since (a resumed writer's last
    /// link, §10.4).
    package init(link: [Digest]) {
        hasher = SHA256()
        for digest in link { digest.withUnsafeBytes { hasher.update($0) } }
    }

    /// Starts the next link from `digest` (C_k), after ``finalize()``.
    package func prime(_ digest: Digest) {
        digest.withUnsafeBytes { hasher.update($0) }
    }

    /// Adds a record's digest `d(r)`.
    package func add(_ recordDigest: Digest) {
        recordDigest.withUnsafeBytes { hasher.update($0) }
    }

    /// Adds the digest of `bytes` (a framed record, or the prelude).
    package func add(recordBytes bytes: UnsafeRawBufferPointer) throws(CairnError) {
        add(try SHA256.hash(bytes))
    }

    /// Adds the digest of `bytes`.
    package func add(recordBytes bytes: [UInt8]) throws(CairnError) {
        add(try SHA256.hash(bytes))
    }

    /// The chain digest over everything added since the chain was primed; the chain is then
    /// empty until ``prime(_:)`` (the caller primes it with this digest, or with the digest a
    /// damaged prefix recorded, then adds the commit record's own digest).
    package func finalize() throws(CairnError) -> Digest {
        try hasher.finalize()
    }
}
