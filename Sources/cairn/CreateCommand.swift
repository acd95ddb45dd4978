import Cairn
import Foundation
import Glibc

/// `cairn create -o ARCHIVE [options] PATH...`
enum CreateCommand {
    static let usage = """
        usage: cairn create -o ARCHIVE [options] PATH...

        Archives each PATH (file, directory recursively, or symlink) under its last path
        component, as tar does: 'cairn create -o a.cairn some/dir' stores dir/...

        options:
          -o, --output ARCHIVE      the archive to write, or - for standard output
          --compression METHOD      lz4 (default), zlib[:LEVEL], zstd[:LEVEL], none
          --chunking POLICY         cdc (default, 16k/64k/256k), cdc:MIN:AVG:MAX, fixed[:SIZE]
          --not-compressible        store chunks raw (the compressible hint is off)
          --resources-version V     the payload's own version string
          --app-id ID               identifier of the app that made the archive
          --size-estimate SIZE      estimate of the content size (for progress; K/M/G/T)
          --meta KEY=VALUE          free metadata, repeatable
          --resume                  continue ARCHIVE.partial left by an interrupted run: items
                                    already committed are not read again; a file cut in the
                                    middle continues after its last committed chunk
          --json                    print the export properties as JSON
          -q, --quiet               print nothing on success
          --progress, --no-progress force or hide the progress bar (default: on a terminal)
        """

    static func run(_ raw: [[UInt8]]) async throws -> ExitStatus {
        let args = try Arguments(
            raw, valued: ["-o", "--output", "--compression", "--chunking", "--resources-version", "--app-id", "--size-estimate", "--meta"],
            flags: ["--not-compressible", "--json", "-q", "--quiet", "--progress", "--no-progress", "--resume"])
        guard let output = args.value("-o", "--output") else { throw UsageError("missing -o ARCHIVE") }
        guard !output.isEmpty else { throw UsageError("-o needs a file name") }
        guard !args.operands.isEmpty else { throw UsageError("no PATH to archive") }
        // Catch before any work what would only fail at the end.
        var topLevel: Set<[UInt8]> = []
        for path in args.operands {
            let last = PathBytes.lastComponent(path)
            if last.isEmpty || last == Array(".".utf8) || last == Array("..".utf8) { continue }
            guard topLevel.insert(last).inserted else {
                throw UsageError("two PATHs would both be stored as '\(String(decoding: last, as: UTF8.self))'")
            }
        }
        if output != "-", (try? FileManager.default.attributesOfItem(atPath: output)[.type] as? FileAttributeType) == .typeDirectory {
            throw CairnError(.alreadyExists, "is a directory; -o names the archive file", path: output)
        }
        var configuration = Archiver.Configuration()
        if let name = args.value("--compression") {
            guard let method = CompressionMethod(name: name) else { throw UsageError("unknown compression '\(name)'") }
            configuration.compression = method
        }
        if let name = args.value("--chunking") {
            guard let policy = ChunkingPolicy(name: name) else { throw UsageError("invalid chunking '\(name)'") }
            // The format allows tiny chunks, but each chunk costs about 150 bytes of memory and
            // 88 bytes of archive: below 1 KiB (4 KiB average) that is a resource trap, not a choice.
            guard policy.minimum >= 1024, policy.average >= 4096 else {
                throw UsageError("chunks must be at least 1 KiB (4 KiB on average); got \(policy)")
            }
            configuration.chunking = policy
        }
        if args.flag("--not-compressible") { configuration.isCompressible = false }
        if let version = args.value("--resources-version") { configuration.resourcesVersion = version }
        if let app = args.value("--app-id") { configuration.appIdentifier = app }
        if let estimate = try ByteSize.value("--size-estimate", in: args) { configuration.sizeEstimate = estimate }
        for pair in args.allValues("--meta") {
            guard let eq = pair.firstIndex(of: "=") else { throw UsageError("--meta takes KEY=VALUE") }
            configuration.metadata[String(pair[..<eq])] = String(pair[pair.index(after: eq)...])
        }
        // Every input must exist before the archive file is created.
        for path in args.operands {
            var st = stat()
            let missing = path.withNullTerminated { lstat($0, &st) } != 0
            if missing {
                throw CairnError(.notFound, "no such file or directory", path: String(decoding: path, as: UTF8.self))
            }
        }
        let toStandardOutput = output == "-"
        if toStandardOutput { try Terminal.refuseArchive(on: 1) }
        let archiver: Archiver
        let sink: (any ArchiveSink)?
        if args.flag("--resume") {
            guard !toStandardOutput else { throw UsageError("--resume needs a file, not -o -") }
            var resumed: Archiver?
            if FileManager.default.fileExists(atPath: output + ".partial") {
                do {
                    resumed = try Archiver(resuming: output, configuration: configuration)
                    if !args.flag("-q", "--quiet") { Output.err("cairn: resuming \(output).partial") }
                    let ignored = ["--compression", "--chunking", "--not-compressible", "--resources-version", "--app-id",
                        "--size-estimate", "--meta"].filter { args.value($0) != nil || args.flag($0) }
                    if !ignored.isEmpty {
                        Output.err("cairn: \(ignored.joined(separator: ", ")) ignored: a resumed archive keeps its own header")
                    }
                } catch {
                    guard error.code == .notResumable else { throw error }
                    Output.err("cairn: \(output).partial has nothing committed (\(error.message)); starting over")
                }
            }
            if let resumed {
                archiver = resumed
                sink = nil
            } else if FileManager.default.fileExists(atPath: output + ".partial") {
                let fileSink = try FileSink(path: output)
                archiver = try Archiver(sink: fileSink, configuration: configuration)
                sink = fileSink
            } else if FileManager.default.fileExists(atPath: output) {
                if !args.flag("-q", "--quiet") { Output.out("\(output) is already complete; nothing to resume") }
                return .success
            } else {
                let fileSink = try FileSink(path: output)
                archiver = try Archiver(sink: fileSink, configuration: configuration)
                sink = fileSink
            }
        } else {
            let fresh: any ArchiveSink = toStandardOutput ? StandardOutputSink() : try FileSink(path: output)
            archiver = try Archiver(sink: fresh, configuration: configuration)
            sink = fresh
        }
        let started = monotonicSeconds()
        let cpuStarted = ProcessTimes.cpuSeconds()
        let showProgress = ProgressBar.shouldShow(args)
        if showProgress, configuration.sizeEstimate == nil, !args.flag("--resume") {
            // A quick scan (lstat only) gives the bar a real total; the archive is unaffected.
            archiver.progress.totalUnitCount = Int64(clamping: Self.scanSize(args.operands))
        }
        let bar = showProgress ? ProgressBar(progress: archiver.progress, label: "create") : nil
        bar?.start()
        let properties: ExportProperties
        do {
            for path in args.operands {
                try await archiver.appendItem(atPath: path)
            }
            properties = try await archiver.finish()
        } catch {
            bar?.stop()
            await archiver.abandon()
            if !toStandardOutput, sink == nil || sink is FileSink {
                Output.err("cairn: the incomplete archive was left at \(output).partial; continue it with --resume")
            }
            throw error
        }
        bar?.stop()
        let seconds = monotonicSeconds() - started
        let cpu = ProcessTimes.cpuSeconds() - cpuStarted
        for warning in properties.warnings { Output.warning(warning) }
        var text: String?
        if args.flag("--json") {
            text = Output.json(Self.json(properties, seconds: seconds, cpuSeconds: cpu))
        } else if !args.flag("-q", "--quiet") {
            text = Self.summary(properties, seconds: seconds, cpuSeconds: cpu, output: output)
        }
        if let text {
            if toStandardOutput { Output.err(text) } else { Output.out(text) }
        }
        return properties.warnings.isEmpty ? .success : .warnings
    }

    static func json(_ p: ExportProperties, seconds: Double, cpuSeconds: Double) -> [String: Any] {
        var object: [String: Any] = [
            "uncompressedBytes": p.uncompressedBytes, "archiveBytes": p.archiveBytes, "version": p.version,
            "entryCount": p.entryCount, "chunkCount": p.chunkCount, "referenceCount": p.referenceCount,
            "uniqueBytes": p.uniqueBytes, "deduplicatedBytes": p.deduplicatedBytes, "wallSeconds": seconds,
            "cpuSeconds": cpuSeconds, "warnings": p.warnings.map(\.description),
        ]
        object["compressedBytes"] = p.compressedBytes.map { $0 as Any } ?? NSNull()
        object["sizeEstimate"] = p.sizeEstimate.map { $0 as Any } ?? NSNull()
        return object
    }

    static func summary(_ p: ExportProperties, seconds: Double, cpuSeconds: Double, output: String) -> String {
        var lines = [
            "created \(output): \(Output.entries(p.entryCount)), \(Output.bytes(p.uncompressedBytes)) of content → \(Output.bytes(p.archiveBytes)) archive",
            "  chunks: \(p.chunkCount) stored, \(p.referenceCount) referenced; dedup saved \(Output.bytes(p.deduplicatedBytes))",
        ]
        if let compressed = p.compressedBytes {
            let ratio = compressed == 0 ? 0 : Double(p.uniqueBytes) / Double(compressed)
            lines.append("  compression: \(Output.bytes(p.uniqueBytes)) unique → \(Output.bytes(compressed)) stored (\(String(format: "%.2f", ratio))×)")
        }
        lines.append(
            "  time: \(String(format: "%.2f", seconds)) s wall, \(String(format: "%.2f", cpuSeconds)) s CPU, \(Output.rate(p.uncompressedBytes, seconds: seconds))")
        return lines.joined(separator: "\n")
    }

    /// Total bytes of the regular files at and below `paths`, without following symlinks.
    static func scanSize(_ paths: [[UInt8]]) -> UInt64 {
        var total: UInt64 = 0
        for raw in paths {
            let path = String(decoding: raw, as: UTF8.self)
            var st = stat()
            guard lstat(path, &st) == 0 else { continue }
            if st.st_mode & S_IFMT == S_IFREG { total += UInt64(max(0, st.st_size)) }
            guard st.st_mode & S_IFMT == S_IFDIR, let walker = FileManager.default.enumerator(atPath: path) else { continue }
            while let name = walker.nextObject() as? String {
                if lstat(path + "/" + name, &st) == 0, st.st_mode & S_IFMT == S_IFREG {
                    total += UInt64(max(0, st.st_size))
                }
            }
        }
        return total
    }
}
