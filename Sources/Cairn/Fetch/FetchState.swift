import Foundation
import Glibc

/// What an interrupted fetch keeps beside its partial file (`<FILE>.partial.fetch`), so that a
/// rerun asks for the rest of the same archive (`Spec/0003-command-line.md §13`).
///
/// A JSON object: the URL, the strong validator the server gave (an ETag, or a Last-Modified
/// date), sent back as `If-Range` (RFC 9110 §13.1.5), the archive's length, how far chunk
/// contents were checked, and where the remote archive was found damaged. The partial file's
/// verified prefix is not recorded: it is found again by reading the file, because only its chain
/// digests say how much of it is good (and a killed run's verifier may have been megabytes behind
/// what it wrote). The bytes before it are checked again as they are read back, once, by the
/// verifier that then goes on with the server's bytes (``StreamVerifier``: CRC-32s and chain
/// digests, which the server's next commit continues or refuses), but not the chunk contents an
/// earlier run checked.
package struct FetchState: Codable, Sendable, Equatable {
    /// The URL asked for (before redirects).
    package var url: String
    /// The validator of the representation being downloaded; nil when the server gave none (a
    /// resume then relies on the chain digests alone to refuse a changed archive).
    package var validator: String?
    /// Bytes of the archive (the resource's length), when the server said.
    package var length: UInt64?
    /// Every chunk record before this offset was decompressed and hashed to its id, and the
    /// commit after it verified.
    package var contentChecked: UInt64?
    /// Where the last run found the remote archive damaged (verification failed there with
    /// nothing to blame but the archive); a rerun failing at the same offset does not start over.
    package var damagedAt: UInt64?
    /// A parallel fetch's ranges (`Spec/0001-container-format.md §13.8`): the byte ranges of
    /// the partial file received from the server under ``validator`` and written, sorted and merged;
    /// an empty list when none is yet. Nil for a fetch front to back, whose partial file is
    /// one prefix. Every range is checked again (in archive order, by the verifier) before the
    /// archive is renamed into place: a range recorded here but lost (a power cut before the
    /// page cache reached the disk) fails its checks and is fetched again.
    package var received: [ReceivedRange]?

    /// A range of the partial file, `start ..< end` in archive offsets.
    package struct ReceivedRange: Codable, Sendable, Equatable {
        package var start: UInt64
        package var end: UInt64

        package init(_ range: Range<UInt64>) {
            start = range.lowerBound
            end = range.upperBound
        }

        package var range: Range<UInt64> { start..<max(start, end) }
    }

    /// ``received`` as ranges.
    package var receivedRanges: [Range<UInt64>] { (received ?? []).map(\.range) }

    package init(url: String, validator: String?, length: UInt64?, received: [Range<UInt64>]? = nil) {
        self.url = url
        self.validator = validator
        self.length = length
        self.received = received?.map(ReceivedRange.init)
    }

    /// The state file beside the partial file of `path`.
    package static func path(for path: String) -> String { ArchiveLocation.fetchStatePath(of: path) }

    /// Reads the state beside `path`'s partial file; nil when there is none or it does not parse
    /// (a state that cannot be read is treated as absent: the partial's bytes are still
    /// verified before anything is reused).
    package static func load(for path: String) -> FetchState? {
        guard let data = FileManager.default.contents(atPath: Self.path(for: path)) else { return nil }
        return try? JSONDecoder().decode(FetchState.self, from: data)
    }

    /// Writes the state beside `path`'s partial file: into a temporary file, synced (unless
    /// `syncing` is false: the checked-contents offset, rewritten as it advances), then renamed over the old
    /// state.
    ///
    /// - Throws: `.io` naming the state file.
    package func save(for path: String, syncing: Bool = true) throws(CairnError) {
        let final = Self.path(for: path)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let bytes: [UInt8]
        do { bytes = Array(try encoder.encode(self)) } catch {
            throw CairnError(.io, "cannot encode the fetch state", path: final, cause: "\(error)")
        }
        // 0600: the URL may carry credentials.
        try FileSystem.writeDurably(bytes, to: final, mode: 0o600, syncing: syncing)
    }

    /// Removes the state beside `path`'s partial file, if any.
    package static func remove(for path: String) {
        unlink(Self.path(for: path))
    }
}
