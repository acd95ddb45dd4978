import Cairn
import Foundation

/// Archive a tree and extract it again, for tests that compare what went in with what came out.
public enum RoundTrip {
    /// What a round trip produced.
    public struct Result: Sendable {
        /// The tree as materialised on disk before archiving.
        public var source: TreeSnapshot
        /// The tree as extracted.
        public var extracted: TreeSnapshot
        /// What ``Archiver/finish()`` reported.
        public var properties: ExportProperties
        /// The archive's bytes.
        public var archive: [UInt8]
    }

    /// Materialises `tree` in a temporary directory as `name`, archives it with ``Archiver``
    /// (`appendItem(at:)`, so it is stored under `name`) to a file, extracts that file with
    /// ``Extractor/extractAll(to:options:)`` into a new directory, and snapshots both trees.
    /// The temporary directory is removed before returning.
    public static func archiveAndExtract(
        _ tree: TreeBuilder, configuration: Archiver.Configuration = Archiver.Configuration(), name: String = "tree",
        directoryTimes: Bool = true
    ) async throws -> Result {
        let directory = try TemporaryDirectory(prefix: "cairn-roundtrip")
        defer { directory.remove() }
        let source = directory.appending("source/\(name)")
        try FileManager.default.createDirectory(atPath: directory.appending("source"), withIntermediateDirectories: false)
        try tree.materialize(at: source)
        let archivePath = directory.appending("archive.cairn")
        let archiver = try await Archiver(writingTo: .file(path: archivePath), configuration: configuration)
        try await archiver.appendItem(at: URL(fileURLWithPath: source))
        let properties = try await archiver.finish()
        let extractor = try await Extractor(at: .file(path: archivePath))
        defer { extractor.close() }
        let output = directory.appending("output")
        try await extractor.extractAll(to: URL(fileURLWithPath: output))
        return Result(
            source: try TreeSnapshot(at: source, directoryTimes: directoryTimes),
            extracted: try TreeSnapshot(at: output + "/" + name, directoryTimes: directoryTimes),
            properties: properties,
            archive: try RawFileSystem.contents(ofFile: Array(archivePath.utf8)))
    }

    /// Archives the tree at `path` (stored under its last component) and returns the archive's
    /// bytes and the export properties.
    public static func archive(
        path: String, to archivePath: String, configuration: Archiver.Configuration = Archiver.Configuration()
    ) async throws -> (bytes: [UInt8], properties: ExportProperties) {
        let archiver = try await Archiver(writingTo: .file(path: archivePath), configuration: configuration)
        try await archiver.appendItem(at: URL(fileURLWithPath: path))
        let properties = try await archiver.finish()
        return (try RawFileSystem.contents(ofFile: Array(archivePath.utf8)), properties)
    }
}
