import Cairn
import Foundation

/// `cairn info ARCHIVE [--json]`
enum InfoCommand {
    static let usage = """
        usage: cairn info ARCHIVE [--json]

        Prints the header (format, chunking, codec, the creator's metadata) and the totals
        (entries, chunks, content, stored and archive bytes, deduplication savings).
        """

    static func run(_ raw: [[UInt8]]) async throws -> ExitStatus {
        let args = try Arguments(raw, valued: [], flags: ["--json", "-q", "--quiet"])
        let archive = try CommandLineTool.archiveOperand(args)
        let extractor = try Extractor(path: archive)
        defer { extractor.close() }
        let h = extractor.header
        let s = extractor.summary
        var object: [String: Any] = [
            "formatVersion": "1.0", "chunking": h.chunking.description, "compression": h.compression.description,
            "compressible": h.isCompressible, "resourcesVersion": h.resourcesVersion, "sourcePlatform": h.sourcePlatform,
            "appIdentifier": h.appIdentifier, "metadata": h.metadata, "archiveBytes": s.archiveBytes,
            "entryCount": s.entryCount, "fileCount": s.fileCount, "chunkCount": s.chunkCount,
            "referenceCount": s.referenceCount, "uncompressedBytes": s.contentBytes, "uniqueBytes": s.uniqueBytes,
            "deduplicatedBytes": s.contentBytes &- s.uniqueBytes,
        ]
        object["sizeEstimate"] = h.sizeEstimate.map { $0 as Any } ?? NSNull()
        object["compressedBytes"] = h.isCompressible ? s.storedBytes as Any : NSNull()
        if args.flag("--json") {
            Output.out(Output.json(object))
            return .success
        }
        var lines = [
            "archive:           \(archive) (\(Output.bytes(s.archiveBytes)))",
            "format:            Cairn 1.0",
            "chunking:          \(h.chunking)",
            "compression:       \(h.compression)\(h.isCompressible ? "" : " (not compressible)")",
            "resources version: \(h.resourcesVersion.isEmpty ? "-" : h.resourcesVersion)",
            "source platform:   \(h.sourcePlatform.isEmpty ? "-" : h.sourcePlatform)",
            "app identifier:    \(h.appIdentifier.isEmpty ? "-" : h.appIdentifier)",
            "size estimate:     \(h.sizeEstimate.map { Output.bytes($0) } ?? "-")",
        ]
        for (key, value) in h.metadata.sorted(by: { $0.key < $1.key }) { lines.append("metadata:          \(key)=\(value)") }
        lines += [
            "entries:           \(s.entryCount) (\(Output.count(s.fileCount, "file")))",
            "content:           \(Output.bytes(s.contentBytes)) (\(s.contentBytes) bytes)",
            "chunks:            \(s.chunkCount) stored, \(s.referenceCount) referenced",
            "unique content:    \(Output.bytes(s.uniqueBytes)); dedup saved \(Output.bytes(s.contentBytes &- s.uniqueBytes))",
            "stored chunks:     \(Output.bytes(s.storedBytes))",
        ]
        Output.out(lines.joined(separator: "\n"))
        return .success
    }
}
