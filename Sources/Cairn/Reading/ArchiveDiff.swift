import Foundation
import Glibc

/// One difference between an archive's entries and a directory tree (`cairn diff`,
/// `Spec/0003-command-line.md §12`).
package struct TreeDifference: Sendable, Equatable {
    /// What kind of difference.
    package enum Change: String, Sendable, Equatable {
        /// In the archive, not in the tree.
        case missing
        /// In the tree, not in the archive (a directory is reported once, not what is below it).
        case extra
        /// In both, but not the same: see ``TreeDifference/aspects``.
        case modified
    }

    /// What differs about an entry present in both.
    package enum Aspect: String, Sendable, Equatable, CaseIterable {
        /// The file type (a file in the archive, a directory in the tree, say); nothing else is
        /// compared then.
        case type
        /// The file's bytes (its size, or its content digest).
        case content
        /// The permission bits (`mode & 0o7777`).
        case mode
        /// The modification time, to the nanosecond.
        case mtime
        /// A symlink's target, or which file a hard link is a link to.
        case linkTarget = "link target"
        /// A device node's major and minor numbers.
        case device
    }

    /// The path relative to the tree's root, which is the path in archive (raw bytes).
    package var path: [UInt8]
    package var change: Change
    /// For ``Change/modified``: what differs, in ``Aspect/allCases`` order; empty otherwise.
    package var aspects: [Aspect]
    /// For each aspect, the two values in words (`0644 in the archive, 0600 here`).
    package var details: [String]

    package init(path: [UInt8], change: Change, aspects: [Aspect] = [], details: [String] = []) {
        self.path = path
        self.change = change
        self.aspects = aspects
        self.details = details
    }
}

/// Compares an archive's entries with a directory tree without extracting anything.
///
/// Entry paths are taken relative to the tree's root, as `extract -C ROOT` would write them.
/// The tree is walked with `openat`/`readdir` on raw names and symlinks are never followed (a
/// symlink is compared as a symlink). File contents are compared as the archive stores them:
/// the local file is cut into chunks with the archive's own chunking policy, each chunk is
/// hashed with SHA-256, and SHA-256 over the concatenated chunk ids (`Spec/0001 §8.3`) is
/// compared with the entry's content digest, so no chunk is read from the archive.
package enum ArchiveDiff {
    /// The differences between `entries` (an archive's, with content digests) and the tree at
    /// `root`, sorted by path bytes.
    ///
    /// - Parameters:
    ///   - entries: the archive's entries, in archive order.
    ///   - chunking: the archive header's chunking policy.
    ///   - keying: the archive's keys (`Spec/0004-trusted-archives.md §6.6–§6.7`): local files
    ///     are cut and their chunk ids computed as its writer did; nil for a plain archive.
    ///   - root: the tree's root directory (raw path; a symlink to a directory is followed, as
    ///     for `extract -C`; nothing below it is).
    /// - Returns: one value per differing path: missing, extra, or modified with its aspects.
    /// - Throws: `CairnError` `.io` naming the path when the tree cannot be read.
    /// - Complexity: reads every local file that has a file entry of the same size once.
    package static func compare(entries: [ArchiveEntry], chunking: ChunkingPolicy, keying: ChunkKeying?, with root: [UInt8])
        throws(CairnError) -> [TreeDifference]
    {
        let rootDisplay = PathBytes.display(root)
        let rootFD = try FileDescriptor.open(root, flags: O_RDONLY | O_DIRECTORY)
        defer { _ = try? rootFD.close() }
        var walker = Walker(
            entries: entries, chunker: Chunker(policy: chunking, keying: keying), ids: ChunkIDFunction(keying: keying),
            rootDisplay: rootDisplay)
        try walker.walk(rootFD, prefix: [])
        walker.finish()
        return walker.differences.sorted { $0.path.lexicographicallyPrecedes($1.path) }
    }

    /// The content digest of the file open at `descriptor` stored as one chunk (as a packed
    /// file is, `Spec/0001 §7.5`): SHA-256 over the id (by `ids`) of its bytes, read from offset 0.
    ///
    /// - Returns: nil when the file holds more than a chunk's 8 MiB (it cannot be one chunk).
    /// - Throws: `CairnError` `.io` naming the file when it cannot be read.
    /// - Complexity: memory is the file's size, at most 8 MiB.
    package static func wholeFileDigest(of descriptor: FileDescriptor, ids: ChunkIDFunction) throws(CairnError) -> Digest? {
        let limit = FormatLimits.maximumChunkLength
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        var offset: UInt64 = 0
        while bytes.count <= limit {
            let n = try buffer.withMutableBytes { (raw) throws(CairnError) in
                try descriptor.read(fromAbsoluteOffset: offset, into: raw)
            }
            if n == 0 { break }
            bytes.append(contentsOf: buffer[0..<n])
            offset += UInt64(n)
        }
        guard bytes.count <= limit else { return nil }
        return try PackContent.digest(ofIDs: [try ids.id(of: bytes)])
    }

    /// The size and content digest of the file open at `descriptor`, as an archive with
    /// `chunker`'s policy records it: SHA-256 over the ids (by `ids`) of its chunks. As the archiver
    /// does (`Spec/0002-chunking.md §8`), holes of at least one maximum chunk (`SEEK_HOLE`,
    /// ``HoleFinder``) are zero chunks cut by ``ZeroChunks/pieceLength(at:in:maximum:)``, never
    /// read, and each run of data between them is chunked as a file of its own.
    ///
    /// - Throws: `CairnError` `.io` naming the file when it cannot be read.
    /// - Complexity: O(size of the data); memory is two maximum chunk lengths.
    package static func contentDigest(of descriptor: FileDescriptor, chunker: Chunker, ids chunkIDs: ChunkIDFunction) throws(CairnError)
        -> (size: UInt64, digest: Digest)
    {
        let maximum = chunker.maximum
        let capacity = 2 * maximum
        var buffer = [UInt8](repeating: 0, count: capacity)
        let ids = SHA256()
        let fileSize = try descriptor.status().size
        var holes = HoleFinder(file: descriptor, size: fileSize, minimumLength: UInt64(maximum))
        var hole = holes.next()
        // The next byte to read, and the buffered bytes of the current run of data.
        var offset: UInt64 = 0
        var start = 0
        var end = 0
        var atEnd = false
        var size: UInt64 = 0
        while true {
            if start == end, let found = hole, offset >= found.lowerBound {
                var position = found.lowerBound
                while position < found.upperBound {
                    let length = ZeroChunks.pieceLength(at: position, in: found, maximum: UInt64(maximum))
                    try ZeroChunks.id(length: Int(length), ids: chunkIDs).withUnsafeBytes { ids.update($0) }
                    position += length
                    size += length
                }
                offset = found.upperBound
                hole = holes.next()
                continue
            }
            let runEnd = hole?.lowerBound ?? fileSize
            // The run is read when its end is reached, or the file ends early (it shrank).
            let runRead = atEnd || offset >= runEnd
            if !runRead, end - start < maximum {
                // Fewer than a maximum chunk buffered: move them to the front and read more.
                if start > 0 {
                    buffer.withUnsafeMutableBytes { raw in
                        guard let base = raw.baseAddress else { return }
                        memmove(base, base + start, end - start)
                    }
                    end -= start
                    start = 0
                }
                let (filled, want) = (end, Int(clamping: min(UInt64(capacity - end), runEnd - offset)))
                let count = try buffer.withUnsafeMutableBytes { raw in
                    Result { () throws(CairnError) in
                        try descriptor.read(fromAbsoluteOffset: offset, into: UnsafeMutableRawBufferPointer(rebasing: raw[filled..<(filled + want)]))
                    }
                }.get()
                if count == 0 { atEnd = true } else { end += count; offset += UInt64(count) }
                continue
            }
            if start == end {
                if atEnd || hole == nil { break }
                continue
            }
            let (from, to, final) = (start, end, runRead)
            let length = buffer.withUnsafeBytes { raw in
                chunker.nextChunkLength(in: UnsafeRawBufferPointer(rebasing: raw[from..<to]), isFinal: final)
            } ?? (to - from)
            let id = try buffer.withUnsafeBytes { raw in
                Result { () throws(CairnError) in try chunkIDs.id(of: UnsafeRawBufferPointer(rebasing: raw[from..<from + length])) }
            }.get()
            id.withUnsafeBytes { ids.update($0) }
            start += length
            size += UInt64(length)
        }
        return (size, try ids.finalize())
    }

    /// The walk's state: which entries were seen, and what differs.
    private struct Walker {
        let entries: [ArchiveEntry]
        let chunker: Chunker
        let ids: ChunkIDFunction
        let rootDisplay: String
        /// Entry index by path in archive.
        let index: [[UInt8]: Int]
        /// Paths that hard-link entries point to.
        let hardLinkTargets: Set<[UInt8]>
        var seen: [Bool]
        var differences: [TreeDifference] = []
        /// (device, inode) of the local files at hard-link targets and at hard-link entries.
        var inodes: [[UInt8]: FileStatus] = [:]

        init(entries: [ArchiveEntry], chunker: Chunker, ids: ChunkIDFunction, rootDisplay: String) {
            self.entries = entries
            self.chunker = chunker
            self.ids = ids
            self.rootDisplay = rootDisplay
            var index: [[UInt8]: Int] = [:]
            for (position, entry) in entries.enumerated() { index[entry.pathBytes] = position }
            self.index = index
            hardLinkTargets = Set(entries.filter { $0.kind == .hardLink }.map(\.linkTarget))
            seen = Array(repeating: false, count: entries.count)
        }

        private func display(_ path: [UInt8]) -> String { rootDisplay + "/" + PathBytes.display(path) }

        mutating func walk(_ directory: FileDescriptor, prefix: [UInt8]) throws(CairnError) {
            for name in try DirectoryReader.names(in: directory) {
                let path = prefix.isEmpty ? name : prefix + [0x2F] + name
                let status: FileStatus
                do { status = try FileStatus.of(name, relativeTo: directory) } catch {
                    throw CairnError(
                        error.code, error.message, path: display(path), cause: error.cause, underlyingCause: error.underlyingCause)
                }
                guard let position = index[path] else {
                    differences.append(TreeDifference(path: path, change: .extra))
                    continue
                }
                seen[position] = true
                let entry = entries[position]
                if hardLinkTargets.contains(path) || entry.kind == .hardLink { inodes[path] = status }
                // A hard link's target is checked in finish(), once the target's inode is known.
                let found = try compare(entry, with: status, name: name, in: directory, path: path)
                if !found.aspects.isEmpty { differences.append(found) }
                if entry.kind == .directory, status.kind == .directory {
                    let child = try FileSystem.openDirectory(name, in: directory, display: display(path))
                    defer { _ = try? child.close() }
                    try walk(child, prefix: path)
                }
            }
        }

        /// Entries not seen are missing; hard links are checked against their targets' inodes.
        mutating func finish() {
            for (position, entry) in entries.enumerated() {
                guard seen[position] else {
                    differences.append(TreeDifference(path: entry.pathBytes, change: .missing))
                    continue
                }
                guard entry.kind == .hardLink, let local = inodes[entry.pathBytes], local.kind == .regular else { continue }
                let target = inodes[entry.linkTarget]
                if target?.device != local.device || target?.inode != local.inode {
                    differences.append(
                        TreeDifference(
                            path: entry.pathBytes, change: .modified, aspects: [.linkTarget],
                            details: ["a hard link to \(PathBytes.display(entry.linkTarget)) in the archive, not here"]))
                }
            }
        }

        private func compare(
            _ entry: ArchiveEntry, with status: FileStatus, name: [UInt8], in directory: FileDescriptor, path: [UInt8]
        ) throws(CairnError) -> TreeDifference {
            var result = TreeDifference(path: path, change: .modified)
            let expected: FileStatus.Kind
            switch entry.kind {
            case .directory: expected = .directory
            case .symlink: expected = .symlink
            case .fifo: expected = .fifo
            case .characterDevice: expected = .characterDevice
            case .blockDevice: expected = .blockDevice
            default: expected = .regular
            }
            guard status.kind == expected else {
                result.aspects = [.type]
                result.details = ["\(Self.words(entry.kind)) in the archive, \(status.kind) here"]
                return result
            }
            if entry.kind == .hardLink { return result }
            if entry.kind == .file {
                var same = status.size == entry.size
                if same, let digest = entry.contentDigest {
                    let file = try FileDescriptor.open(name, flags: O_RDONLY | O_NOFOLLOW, relativeTo: directory)
                    defer { _ = try? file.close() }
                    do {
                        let local = try ArchiveDiff.contentDigest(of: file, chunker: chunker, ids: ids)
                        same = local.size == entry.size && local.digest == digest
                        if !same, local.size == entry.size, local.size <= UInt64(FormatLimits.maximumChunkLength) {
                            // A small file in a pack (2.0) is stored as one chunk whatever the
                            // cut points: its digest is over that one id. Either digest
                            // matching means the same bytes.
                            same = try ArchiveDiff.wholeFileDigest(of: file, ids: ids) == digest
                        }
                    } catch {
                        throw CairnError(
                            error.code, error.message, path: display(path), cause: error.cause, underlyingCause: error.underlyingCause)
                    }
                }
                if !same {
                    result.aspects.append(.content)
                    result.details.append(
                        status.size == entry.size
                            ? "same size (\(entry.size) bytes), other bytes"
                            : "\(entry.size) bytes in the archive, \(status.size) here")
                }
            }
            if entry.kind != .symlink, status.permissions != entry.permissions {
                result.aspects.append(.mode)
                result.details.append("\(Self.octal(entry.permissions)) in the archive, \(Self.octal(status.permissions)) here")
            }
            if status.modificationTime != entry.modificationTime {
                result.aspects.append(.mtime)
                result.details.append(
                    "\(Self.time(entry.modificationTime)) in the archive, \(Self.time(status.modificationTime)) here")
            }
            if let device = entry.device, SpecialFiles.split(status.specialDevice) != device {
                let here = SpecialFiles.split(status.specialDevice)
                result.aspects.append(.device)
                result.details.append("device \(device.major), \(device.minor) in the archive, \(here.major), \(here.minor) here")
            }
            if entry.kind == .symlink {
                let target = try FileSystem.readSymlink(name, in: directory, display: display(path))
                if target != entry.linkTarget {
                    result.aspects.append(.linkTarget)
                    result.details.append(
                        "\(PathBytes.display(entry.linkTarget)) in the archive, \(PathBytes.display(target)) here")
                }
            }
            return result
        }

        /// `2021-01-02T03:04:05.123456789Z`: UTC, to the nanosecond.
        private static func time(_ time: Timestamp) -> String {
            let spec = time.timespec
            var seconds = spec.tv_sec
            var parts = tm()
            guard gmtime_r(&seconds, &parts) != nil else { return "\(time) s" }
            return String(
                format: "%04d-%02d-%02dT%02d:%02d:%02d.%09dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1,
                Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), spec.tv_nsec)
        }

        private static func octal(_ mode: UInt32) -> String {
            let text = String(mode, radix: 8)
            return String(repeating: "0", count: max(0, 4 - text.count)) + text
        }

        private static func words(_ kind: ArchiveEntry.Kind) -> String {
            kind == .file ? "regular file" : kind.isSpecial || kind == .hardLink ? kind.noun : "\(kind)"
        }
    }
}
