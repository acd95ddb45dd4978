import Foundation
import Glibc

/// What an interrupted `cairn create -o s3://BUCKET/KEY` keeps on the local disk so that
/// `--resume` continues the same multipart upload (`Spec/0003-command-line.md §3.3`).
///
/// It records the store, the object, the upload id, the part sizes (``PartSizeRule``) and, for every part the store
/// acknowledged (in the order acknowledged, which need not be the parts' order), its number, ETag, size, where it ends in the archive and the chain digest of
/// the commit record it ends with (the last part, which ends with the footer, records only the
/// SHA-256 of its bytes). A resume compares the parts it produces again with these before it
/// skips them. It is kept in an ``UploadJournal`` file.
package struct MultipartUploadState: Codable, Sendable, Equatable {
    /// One acknowledged part.
    package struct Part: Codable, Sendable, Equatable {
        /// 1 to 10,000.
        package var number: Int
        /// The ETag the store answered, quotes included.
        package var etag: String
        /// Bytes.
        package var size: UInt64
        /// The archive offset just after the part.
        package var end: UInt64
        /// The chain digest (hex) of the commit record the part ends with; nil for the last part.
        package var chainDigest: String?
        /// The SHA-256 (hex) of the part's bytes.
        package var sha256: String
        /// In an encrypted archive cut at block boundaries (`Spec/0004 §6.9`): the SHA-256 (hex)
        /// of the plaintext (inner archive) from its start to the part's end; nil otherwise.
        package var plainSHA256: String?
        /// True for the last part of an encrypted archive cut at block boundaries (whose parts
        /// all record `plainSHA256`, none a chain digest); nil otherwise.
        package var last: Bool?

        package init(number: Int, etag: String, size: UInt64, end: UInt64, chainDigest: String?, sha256: String) {
            self.number = number
            self.etag = etag
            self.size = size
            self.end = end
            self.chainDigest = chainDigest
            self.sha256 = sha256
        }

        /// Whether this is an upload's last part (manifest and footer): one without a chain
        /// digest, or one marked last in an encrypted archive.
        package var isLast: Bool {
            last ?? (chainDigest == nil && plainSHA256 == nil)
        }
    }

    /// The store's endpoint, as configured.
    package var endpoint: String
    package var bucket: String
    package var key: String
    package var uploadID: String
    /// The size of the first parts in bytes (the base of ``partSizeRule``).
    package var partSize: UInt64
    /// The part limit the part sizes grow against (nil in a state written before it was
    /// recorded: S3's 10,000).
    package var partLimit: Int?
    /// The largest part, bytes (nil: S3's 5 GiB).
    package var largestPartSize: UInt64?
    /// The acknowledged parts, by number from 1.
    package var parts: [Part] = []
    /// The payload of the archive's header record (base64 in the file), recorded from the
    /// first bytes uploaded: what a resume compares its options with, naming each difference.
    package var header: [UInt8]?
    /// An encrypted archive's envelope record payload (`Spec/0004-trusted-archives.md §6.2`,
    /// clear in the archive too), recorded instead of a header: a resume opens its key block
    /// to seal again with the archive's keys (`Spec/0004-trusted-archives.md §6.9`).
    package var envelope: [UInt8]?

    package init(endpoint: String, bucket: String, key: String, uploadID: String, partSize: UInt64, rule: PartSizeRule = .s3) {
        self.endpoint = endpoint
        self.bucket = bucket
        self.key = key
        self.uploadID = uploadID
        self.partSize = partSize
        partLimit = rule.partLimit
        largestPartSize = rule.largestPartSize
    }

    private enum CodingKeys: String, CodingKey { case endpoint, bucket, key, uploadID, partSize, partLimit, largestPartSize }

    /// The rule that cut the recorded parts, so a resume cuts the same ones.
    package var partSizeRule: PartSizeRule {
        PartSizeRule(
            smallestPartSize: min(partSize, PartSizeRule.s3.smallestPartSize),
            largestPartSize: largestPartSize ?? PartSizeRule.s3.largestPartSize, partLimit: partLimit ?? PartSizeRule.s3.partLimit)
    }

    /// Whether the recorded sizes are ones an upload can have (they come from a file): a part
    /// limit of 1 to 10,000, parts of 1 byte to 5 GiB, the base no larger than the largest part.
    var hasValidPartSizes: Bool {
        let largest = largestPartSize ?? PartSizeRule.s3.largestPartSize
        return (1...PartSizeRule.s3.partLimit).contains(partLimit ?? PartSizeRule.s3.partLimit)
            && (1...PartSizeRule.s3.largestPartSize).contains(largest) && (1...largest).contains(partSize)
    }

    /// Records `part`, kept in number order: a part recorded again replaces the one of its
    /// number. Parts in flight together are acknowledged in any order, so the numbers recorded
    /// may have gaps (the parts still in flight when a run was killed).
    mutating func record(_ part: Part) {
        parts.removeAll { $0.number == part.number }
        let index = parts.firstIndex { $0.number > part.number } ?? parts.endIndex
        parts.insert(part, at: index)
    }

    /// The state in the journal at `path`; nil when there is no file, or when it holds no whole
    /// line (a process killed between creating it and recording its upload).
    ///
    /// - Throws: `.corrupted` naming the file when its lines are not an upload of this format
    ///   (the message says to remove it to start over); `.limitExceeded` for a file over 16 MiB;
    ///   `.io`.
    package static func load(from path: String) throws(CairnError) -> MultipartUploadState? {
        guard access(path, F_OK) == 0 else { return nil }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CairnError(.io, "cannot read the upload state", path: path)
        }
        guard data.count <= UploadJournal.maximumBytes else {
            throw CairnError(.limitExceeded, "the upload state is larger than \(UploadJournal.maximumBytes) bytes", path: path)
        }
        var state: MultipartUploadState?
        let decoder = JSONDecoder()
        // Only whole lines count: a line torn by a crash (no newline yet) is not read.
        var lines = data.split(separator: 0x0A, omittingEmptySubsequences: false)
        if data.last != 0x0A { lines.removeLast() }
        guard lines.contains(where: { !$0.isEmpty }) else { return nil }
        let remove = "; remove it to start over"
        for line in lines where !line.isEmpty {
            guard let entry = try? decoder.decode(UploadJournal.Line.self, from: Data(line)) else {
                throw CairnError(.corrupted, "not an upload state file of cairn (a line does not parse)" + remove, path: path)
            }
            if let upload = entry.upload {
                guard entry.version == 1 else {
                    throw CairnError(.unsupportedVersion, "upload state version \(entry.version ?? 0)", path: path)
                }
                guard upload.hasValidPartSizes else {
                    throw CairnError(.corrupted, "not an upload state file of cairn (part sizes out of range)" + remove, path: path)
                }
                state = upload
            } else if let part = entry.part, state != nil {
                state?.record(part)
            } else if let header = entry.header, state != nil {
                state?.header = Data(base64Encoded: header).map { Array($0) }
            } else if let envelope = entry.envelope, state != nil {
                state?.envelope = Data(base64Encoded: envelope).map { Array($0) }
            }
        }
        guard let state else { throw CairnError(.corrupted, "not an upload state file of cairn (no upload recorded)" + remove, path: path) }
        return state
    }
}

/// The file holding a ``MultipartUploadState``: JSON lines, mode 0600, locked with `flock(2)`
/// while an upload runs, and only ever appended to (each line synced), so its inode never changes
/// and the archiver can leave it out when it lies inside the tree being archived.
///
/// A line `{"version":1,"upload":{...}}` starts an upload (a resume whose store lost the upload
/// starts a new one); a line `{"part":{...}}` records an acknowledged part.
package final class UploadJournal: Sendable {
    /// One line.
    struct Line: Codable {
        var version: Int?
        var upload: MultipartUploadState?
        var part: MultipartUploadState.Part?
        /// The header record's payload, base64.
        var header: String?
        /// An encrypted archive's envelope record payload, base64.
        var envelope: String?
    }

    /// The largest journal read back.
    static let maximumBytes = 16 << 20

    /// The file's path.
    package let path: String
    private let descriptor: FileDescriptor

    /// The device and inode of the file.
    package let identity: (device: UInt64, inode: UInt64)

    /// Whether the file was there before this journal opened it.
    package let existed: Bool

    /// Opens the journal at `path` and locks it, before anything in it is read: created (mode
    /// 0600) when missing and `creating`, else it must exist. Its contents are kept (read them
    /// with ``MultipartUploadState/load(from:)``; ``clear()`` empties it).
    ///
    /// - Throws: `.busy` when another process holds it (an upload running with it); `.notFound`
    ///   when it is missing and not `creating`; `.io`.
    package init(path: String, creating: Bool) throws(CairnError) {
        self.path = path
        let fresh: FileDescriptor?
        if creating {
            do throws(CairnError) {
                fresh = try FileDescriptor.open(path, flags: O_WRONLY | O_APPEND | O_NOFOLLOW | O_CREAT | O_EXCL, mode: 0o600)
            } catch {
                guard error.code == .alreadyExists else { throw error }
                fresh = nil
            }
        } else {
            fresh = nil
        }
        existed = fresh == nil
        if let fresh { descriptor = fresh } else { descriptor = try FileDescriptor.open(path, flags: O_WRONLY | O_APPEND | O_NOFOLLOW) }
        guard flock(descriptor.rawValue, LOCK_EX | LOCK_NB) == 0 else {
            _ = try? descriptor.close()
            throw CairnError(.busy, "another cairn process is uploading with this state file", path: path)
        }
        let status = try descriptor.status()
        identity = (status.device, status.inode)
    }

    /// Empties the file (same inode), for a new upload.
    ///
    /// - Throws: `.io` naming the file.
    package func clear() throws(CairnError) {
        try descriptor.truncate(to: 0)
    }

    /// Appends a line starting `upload` (with its parts) and syncs it.
    ///
    /// - Throws: `.io` naming the file (a full disk).
    package func begin(_ upload: MultipartUploadState) throws(CairnError) {
        var lines = [Line(version: 1, upload: upload, part: nil)]
        if let header = upload.header { lines.append(Line(header: Data(header).base64EncodedString())) }
        if let envelope = upload.envelope { lines.append(Line(envelope: Data(envelope).base64EncodedString())) }
        lines += upload.parts.map { Line(version: nil, upload: nil, part: $0) }
        try append(lines)
    }

    /// Appends a line recording `part` and syncs it.
    ///
    /// - Throws: `.io` naming the file.
    package func record(_ part: MultipartUploadState.Part) throws(CairnError) {
        try append([Line(version: nil, upload: nil, part: part)])
    }

    /// Appends a line recording the archive's header record payload and syncs it.
    ///
    /// - Throws: `.io` naming the file.
    package func record(header: [UInt8]) throws(CairnError) {
        try append([Line(header: Data(header).base64EncodedString())])
    }

    /// Appends a line recording an encrypted archive's envelope record payload and syncs it.
    ///
    /// - Throws: `.io` naming the file.
    package func record(envelope: [UInt8]) throws(CairnError) {
        try append([Line(envelope: Data(envelope).base64EncodedString())])
    }

    private func append(_ lines: [Line]) throws(CairnError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var bytes: [UInt8] = []
        for line in lines {
            do { bytes += Array(try encoder.encode(line)) + [0x0A] } catch {
                throw CairnError(.io, "cannot encode the upload state", path: path, cause: "\(error)")
            }
        }
        try descriptor.writeAll(bytes)
        try descriptor.sync()
    }

    /// Closes the file (releasing the lock).
    package func close() {
        _ = try? descriptor.close()
    }
}
