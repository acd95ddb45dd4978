import Foundation
import Glibc

/// What an interrupted `cairn create -o s3://BUCKET/KEY` keeps on the local disk so that
/// `--resume` continues the same multipart upload (`Spec/0003-command-line.md §3.3`).
///
/// It records the store, the object, the upload id, the part size and, for every part the store
/// acknowledged, its number, ETag, size, where it ends in the archive and the chain digest of
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
    }

    /// The store's endpoint, as configured.
    package var endpoint: String
    package var bucket: String
    package var key: String
    package var uploadID: String
    /// The size of the first parts in bytes (``ObjectStoreSink/partSize(number:base:)``).
    package var partSize: UInt64
    /// The acknowledged parts, by number from 1.
    package var parts: [Part] = []

    package init(endpoint: String, bucket: String, key: String, uploadID: String, partSize: UInt64) {
        self.endpoint = endpoint
        self.bucket = bucket
        self.key = key
        self.uploadID = uploadID
        self.partSize = partSize
    }

    private enum CodingKeys: String, CodingKey { case endpoint, bucket, key, uploadID, partSize }

    /// Records `part`: a part recorded again replaces the one of its number and every later one.
    mutating func record(_ part: Part) {
        parts.removeAll { $0.number >= part.number }
        parts.append(part)
    }

    /// The state in the journal at `path`; nil when there is no file.
    ///
    /// - Throws: `.corrupted` naming the file when its first line is not an upload of this
    ///   format; `.limitExceeded` for a file over 16 MiB; `.io`.
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
        for line in lines where !line.isEmpty {
            guard let entry = try? decoder.decode(UploadJournal.Line.self, from: Data(line)) else {
                throw CairnError(.corrupted, "not an upload state file of cairn (a line does not parse)", path: path)
            }
            if let upload = entry.upload {
                guard entry.version == 1 else {
                    throw CairnError(.unsupportedVersion, "upload state version \(entry.version ?? 0)", path: path)
                }
                state = upload
            } else if let part = entry.part, state != nil {
                state?.record(part)
            }
        }
        guard let state else { throw CairnError(.corrupted, "not an upload state file of cairn (no upload recorded)", path: path) }
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
    }

    /// The largest journal read back.
    static let maximumBytes = 16 << 20

    /// The file's path.
    package let path: String
    private let descriptor: FileDescriptor

    /// The device and inode of the file.
    package let identity: (device: UInt64, inode: UInt64)

    /// Opens the journal at `path`: created (mode 0600) when `creating`, else appended to; locked.
    ///
    /// - Throws: `.busy` when another process holds it; `.alreadyExists` when `creating` and the
    ///   file exists; `.notFound`; `.io`.
    package init(path: String, creating: Bool) throws(CairnError) {
        self.path = path
        let flags = O_WRONLY | O_APPEND | O_NOFOLLOW | (creating ? O_CREAT | O_EXCL : 0)
        descriptor = try FileDescriptor.open(path, flags: flags, mode: 0o600)
        guard flock(descriptor.rawValue, LOCK_EX | LOCK_NB) == 0 else {
            _ = try? descriptor.close()
            throw CairnError(.busy, "another cairn process is uploading with this state file", path: path)
        }
        let status = try descriptor.status()
        identity = (status.device, status.inode)
    }

    /// Appends a line starting `upload` (with its parts) and syncs it.
    ///
    /// - Throws: `.io` naming the file (a full disk).
    package func begin(_ upload: MultipartUploadState) throws(CairnError) {
        var lines = [Line(version: 1, upload: upload, part: nil)]
        lines += upload.parts.map { Line(version: nil, upload: nil, part: $0) }
        try append(lines)
    }

    /// Appends a line recording `part` and syncs it.
    ///
    /// - Throws: `.io` naming the file.
    package func record(_ part: MultipartUploadState.Part) throws(CairnError) {
        try append([Line(version: nil, upload: nil, part: part)])
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
