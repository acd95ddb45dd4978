import Cairn
import CairnTestSupport
import Foundation
import Glibc

/// What issue 12's object-storage benchmark measures, each against its peer.
enum UploadMeasure: String, CaseIterable {
    case upload = "upload"
    case resume50 = "resume after a kill at 50%"
    case remoteExtract = "remote extract of one file"
}

/// Tool names of the upload case, as the report shows them.
enum UploadTool {
    static let cairn = "cairn create -o s3://"
    /// The usual two-step way: a local archive, then an S3 client copies it.
    static let twoStep = "cairn create -o FILE + rclone copyto"
    static let cairnResume = "cairn create --resume -o s3://"
    static let rcloneResume = "rclone copyto (rerun)"
    static let cairnExtract = "cairn extract s3://"
    static let rcloneExtract = "rclone copyto + cairn extract FILE"
}

/// One round of one upload-case step.
struct UploadRun {
    var round: Int
    /// The timed command: the whole step; for the two-step upload both steps added up (wall,
    /// CPU) with the larger peak RSS; for a resume the rerun after the kill.
    var result: ProcessResult
    /// The two-step upload's steps: `cairn create -o FILE`, then `rclone copyto`.
    var steps: [ProcessResult] = []
    /// Body bytes the counting proxy relayed for the step: request bodies for the resume steps
    /// (both runs), response bodies for the remote extracts; nil where no proxy is in the way
    /// (the plain uploads).
    var proxyBytes: UInt64?
    /// Requests the proxy saw for the step.
    var requests: Int?
    /// For a resume: the request body bytes of the killed first run (proxy).
    var firstRunBytes: UInt64?
    /// For a resume: the acknowledged bytes when the first run was killed (cairn: the part
    /// sizes its journal records; rclone: the bodies of its answered part uploads).
    var cutAtBytes: UInt64?
    /// For cairn's resume: the journal's part size (bytes) and the rerun's `--json` figures.
    var partSize: UInt64?
    var uploadedBytes: UInt64?
    var keptBytes: UInt64?
}

/// One step of the upload case for one tool over all rounds.
struct UploadOperation {
    var tool: String
    var measure: UploadMeasure
    var command: String
    var runs: [UploadRun] = []
    var failure: String?
    /// Why the step was not measured at all.
    var notMeasured: String?
    /// The archive's size, bytes.
    var archiveBytes: UInt64

    var successful: [UploadRun] { runs.filter(\.result.succeeded) }
    var wall: Spread? { Spread(successful.map(\.result.wallSeconds)) }
    var cpu: Spread? { Spread(successful.map(\.result.cpuSeconds)) }
    var peakRSS: Spread? { Spread(successful.map { Double($0.result.peakRSSBytes) }) }
    var proxyBytes: Spread? { Spread(successful.compactMap { $0.proxyBytes.map { Double($0) } }) }
    /// For a resume: request body bytes of both runs less the archive, per round (proxy).
    var resentBytes: Spread? {
        Spread(successful.compactMap { $0.proxyBytes.map { Double($0) - Double(archiveBytes) } })
    }
    /// For cairn's resume: its own count, the journal's recorded bytes at the kill + the
    /// rerun's `uploadedBytes` − the archive, per round (the part in flight is not in it).
    var reportedResentBytes: Spread? {
        Spread(
            successful.compactMap { r in
                guard let recorded = r.cutAtBytes, let uploaded = r.uploadedBytes else { return nil }
                return Double(recorded) + Double(uploaded) - Double(archiveBytes)
            })
    }

    func run(round: Int) -> UploadRun? { successful.first { $0.round == round } }
}

/// Everything the upload case measured.
struct UploadResult {
    var corpus: BenchCase
    var runs: Int
    /// The reference archive (`cairn create -o FILE` of the corpus) read with the library: its
    /// size, commit records and the extracted file's stored bytes.
    var layout: TransferLayout
    /// The remote extract's file, relative to the corpus root and as the archive names it.
    var extractPath: String
    var archivedExtractPath: String
    var extractBytes: UInt64
    var createSeconds: Double
    var operations: [UploadOperation] = []
    var versions: [String: String] = [:]
    var notes: [String] = []

    var archiveBytes: UInt64 { layout.newArchiveBytes }

    func operation(_ tool: String, _ measure: UploadMeasure) -> UploadOperation? {
        operations.first { $0.tool == tool && $0.measure == measure }
    }

    /// The part size cairn's upload journal recorded (the first resume round that has one).
    var partSize: UInt64? { operation(UploadTool.cairnResume, .resume50)?.runs.compactMap(\.partSize).first }
}

/// Issue 12's benchmark: the corpus archived straight into `rclone serve s3` on 127.0.0.1
/// (started and stopped here) against a local archive copied by `rclone copyto`; a kill at 50%
/// and the resume against rclone's rerun; one file extracted from the object against a whole
/// download. Interleaved rounds; bytes are counted by a pass-through ``FaultProxy`` in front of
/// the server, for every tool alike.
struct UploadBenchmark {
    var cairn: String
    var work: String
    var runs: Int
    var pauseSeconds: Double
    var keep: Bool

    static let bucket = "bench"
    var base: String { "\(work)/upload" }

    /// Prepares the reference archive, starts the server and the proxy, runs every round, stops
    /// them.
    ///
    /// - Throws: ``BenchError`` or `TestServerError` when the preparation fails (rclone missing,
    ///   a create, the server); a failing measured step is recorded in its operation instead.
    func run(corpus: BenchCase) throws -> UploadResult {
        try? removeTree(base)
        for directory in ["logs", "out", "state"] {
            try FileManager.default.createDirectory(atPath: "\(base)/\(directory)", withIntermediateDirectories: true)
        }
        let server = try RcloneS3Server(buckets: [Self.bucket])
        defer { server.stop() }
        let proxy = try FaultProxy(upstreamPort: server.port)
        defer { proxy.stop() }
        var runner = ProcessRunner(logDirectory: "\(base)/logs")
        runner.environment = server.environment.merging(["LC_ALL": "C", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": ""]) { $1 }

        let reference = "\(base)/reference.cairn"
        let created = try runner.run([cairn, "create", "-o", reference, "--no-progress", corpus.path], label: "upload-reference")
        guard created.succeeded else { throw BenchError("cairn create \(reference) failed: \(created.standardError.suffix(300))") }
        let rootName = (corpus.path as NSString).lastPathComponent
        let extract = try Self.extractFile(in: corpus.path)
        let layout = try TransferLayout.analyse(old: reference, new: reference, extractPath: "\(rootName)/\(extract.path)")
        log(String(format: "upload: reference archive %@ (%@) in %.1f s", reference, formatMiB(layout.newArchiveBytes), created.wallSeconds))
        // The remote extracts read this object; the server serves files under its root.
        let extractObject = server.objectPath(bucket: Self.bucket, key: "extract.cairn")
        let copied = try runner.run(["cp", reference, extractObject], label: "upload-place")
        guard copied.succeeded else { throw BenchError("cp \(reference) \(extractObject) failed: \(copied.standardError.suffix(300))") }

        var result = UploadResult(
            corpus: corpus, runs: runs, layout: layout, extractPath: extract.path, archivedExtractPath: "\(rootName)/\(extract.path)",
            extractBytes: extract.bytes, createSeconds: created.wallSeconds)
        for (name, command) in [("cairn", [cairn, "--version"]), ("rclone", [server.executable, "version"])] {
            if let r = try? runner.run(command, label: "version") {
                let line = (r.standardOutput + "\n" + r.standardError).split(separator: "\n").first { !$0.isEmpty }
                result.versions[name] = line.map(String.init) ?? "?"
            }
        }

        if let probe = Self.requestLatency(server: server, key: "extract.cairn") {
            result.notes.append(probe)
        }

        let steps = self.steps(server: server, proxy: proxy, corpus: corpus.path, reference: reference, result: result, runner: runner)
        var operations = steps.map {
            UploadOperation(tool: $0.tool, measure: $0.measure, command: $0.command, archiveBytes: layout.newArchiveBytes)
        }
        let meter = ProxyMeter(proxy: proxy)
        let half = layout.newArchiveBytes / 2
        for round in 1...runs {
            for (index, step) in steps.enumerated() where operations[index].notMeasured == nil {
                do {
                    try step.clean()
                    var run: UploadRun
                    let label = "upload-\(index)-\(round)"
                    if let first = step.killedFirstRun {
                        let mark = meter.mark()
                        let cut = try Cutter.run(
                            first.arguments, environment: runner.environment, threshold: half, logPrefix: "\(base)/logs/\(label)-cut",
                            progress: { first.progress(mark) })
                        guard cut.killed else { throw BenchError("the first run ended (exit \(cut.exitStatus)) before the kill at 50%") }
                        if first.completed() {
                            throw BenchError("the first run completed the upload before the kill at 50% landed (the archive is too small to cut)")
                        }
                        let killed = meter.bytes(since: mark)
                        let partSize = first.partSize()
                        settle()
                        let mark2 = meter.mark()
                        let r = try runner.run(step.arguments, label: label)
                        let second = meter.bytes(since: mark2)
                        run = UploadRun(
                            round: round, result: r, proxyBytes: killed.sent + second.sent, requests: killed.requests + second.requests,
                            firstRunBytes: killed.sent, cutAtBytes: cut.fileBytes, partSize: partSize)
                    } else if let second = step.secondArguments {
                        settle()
                        let a = try runner.run(step.arguments, label: label + "a")
                        var parts = [a]
                        if a.succeeded { parts.append(try runner.run(second, label: label + "b")) }
                        run = UploadRun(round: round, result: Self.combined(parts), steps: parts)
                    } else {
                        settle()
                        let mark = meter.mark()
                        let r = try runner.run(step.arguments, label: label)
                        run = UploadRun(round: round, result: r)
                        if step.throughProxy {
                            let got = meter.bytes(since: mark)
                            run.proxyBytes = got.received
                            run.requests = got.requests
                        }
                    }
                    if step.tool.hasPrefix("cairn create"), let object = lastJSONObject(run.result.standardOutput) {
                        run.uploadedBytes = (object["uploadedBytes"] as? NSNumber)?.uint64Value
                        run.keptBytes = (object["keptBytes"] as? NSNumber)?.uint64Value
                    }
                    if run.result.succeeded {
                        if let problem = step.check() { operations[index].failure = "round \(round): \(problem)" }
                        log(
                            String(
                                format: "upload round %d: %@ %@: %.2f s wall, %.2f s CPU, %@ peak RSS%@", round, step.tool,
                                step.measure.rawValue, run.result.wallSeconds, run.result.cpuSeconds, formatMiB(run.result.peakRSSBytes),
                                run.proxyBytes.map { ", \(formatMiB($0)) through the proxy" } ?? ""))
                    } else {
                        let tail = run.result.standardError.split(separator: "\n").suffix(2).joined(separator: " / ")
                        operations[index].failure = "round \(round), exit \(run.result.exitStatus): \(tail)"
                        log("upload round \(round): \(step.tool) \(step.measure.rawValue) FAILED: \(tail)")
                    }
                    operations[index].runs.append(run)
                } catch {
                    operations[index].failure = "round \(round): \(error)"
                    log("upload round \(round): \(step.tool) \(step.measure.rawValue) FAILED: \(error)")
                }
                if !keep { try? step.clean() }
            }
        }
        result.operations = operations
        result.notes.append(
            "The plain uploads go straight to the server; the resume steps and the remote extracts go through a pass-through "
                + "proxy (CairnTestSupport's fault-proxy.py, Python) that counts the body bytes it relays, so their wall times "
                + "include the proxy's relaying, for both tools alike.")
        if !keep { try? removeTree(base) }
        return result
    }

    /// The remote extract's file: the regular file of the corpus (path order) whose size is
    /// nearest 10 MiB, or an eighth of the corpus when that is smaller (a tiny test corpus).
    ///
    /// - Throws: ``BenchError`` when the corpus has no file.
    static func extractFile(in root: String) throws -> (path: String, bytes: UInt64) {
        let files = SmallChange.regularFiles(under: root)
        let total = files.reduce(0) { $0 + $1.bytes }
        let wanted = Int64(min(UInt64(TransferTrees.extractFileBytes), max(1, total / 8)))
        guard let file = files.min(by: { abs(Int64($0.bytes) - wanted) < abs(Int64($1.bytes) - wanted) }) else {
            throw BenchError("\(root) has no regular file to extract")
        }
        return file
    }

    /// Two steps as one: exit status of the first that failed, wall and CPU added up, the larger
    /// peak RSS.
    static func combined(_ parts: [ProcessResult]) -> ProcessResult {
        ProcessResult(
            exitStatus: parts.first { !$0.succeeded }?.exitStatus ?? 0, wallSeconds: parts.reduce(0) { $0 + $1.wallSeconds },
            userSeconds: parts.reduce(0) { $0 + $1.userSeconds }, systemSeconds: parts.reduce(0) { $0 + $1.systemSeconds },
            peakRSSBytes: parts.map(\.peakRSSBytes).max() ?? 0, standardOutput: parts.map(\.standardOutput).joined(separator: "\n"),
            standardError: parts.map(\.standardError).joined(separator: "\n"))
    }

    /// `sync(2)` and `--pause` seconds before a timed step, as ``EndToEnd/settle()`` does.
    private func settle() {
        sync()
        if pauseSeconds > 0 { usleep(useconds_t(pauseSeconds * 1_000_000)) }
    }

    /// A resume step's first run, killed once `progress` (given the proxy's mark before it
    /// started) reaches half the archive.
    struct FirstRun {
        var arguments: [String]
        var progress: (Int) -> UInt64
        /// Whether the object exists at the key: the kill came too late.
        var completed: () -> Bool
        /// The part size the run's journal records, read after the kill.
        var partSize: () -> UInt64? = { nil }
    }

    /// One step of a round: the command (and for the two-step upload its second command, for a
    /// resume the first run that is killed), what to remove before and after, and the untimed
    /// check of its output.
    struct Step {
        var tool: String
        var measure: UploadMeasure
        var arguments: [String]
        var secondArguments: [String]?
        var killedFirstRun: FirstRun?
        /// Whether the step's requests go through the counting proxy.
        var throughProxy = false
        var command: String {
            ([arguments] + (secondArguments.map { [$0] } ?? [])).map { a in
                a.map { $0.contains(" ") ? shellQuoted($0) : $0 }.joined(separator: " ")
            }.joined(separator: " && ")
        }
        var clean: () throws -> Void
        /// A problem with the output, or nil.
        var check: () -> String?
    }

    /// rclone as an S3 client of `endpoint` (an on-the-fly `:s3:` remote, every setting a flag,
    /// an empty configuration file): `rclone copyto SOURCE DESTINATION` plus the flags.
    static func rcloneCopy(
        _ rclone: String, _ source: String, _ destination: String, endpoint: String, server: RcloneS3Server, configuration: String
    ) -> [String] {
        [
            rclone, "copyto", source, destination, "--config", configuration, "--s3-provider", "Other", "--s3-endpoint", endpoint,
            "--s3-access-key-id", server.accessKeyID, "--s3-secret-access-key", server.secretAccessKey, "--s3-region", server.region,
            "--s3-force-path-style",
        ]
    }

    /// The steps of every round, in order: each measurement, Cairn then its peer.
    func steps(
        server: RcloneS3Server, proxy: FaultProxy, corpus: String, reference: String, result: UploadResult, runner: ProcessRunner
    ) -> [Step] {
        let out = "\(base)/out"
        let state = "\(base)/state"
        let configuration = "\(base)/rclone.conf"
        _ = FileManager.default.createFile(atPath: configuration, contents: Data())
        let proxyEndpoint = "http://127.0.0.1:\(proxy.port)"
        let bucket = Self.bucket
        func object(_ key: String) -> String { server.objectPath(bucket: bucket, key: key) }
        func same(_ file: String) -> () -> String? {
            {
                let r = try? runner.run(["cmp", "-s", file, reference], label: "upload-cmp")
                return r?.succeeded == true ? nil : "\(file) differs from the local archive"
            }
        }
        func removing(_ files: String...) -> () throws -> Void { { for f in files { try removeTree(f) } } }
        var list: [Step] = []

        let journal = "\(state)/corpus.cairn.partial.upload"
        list.append(
            Step(
                tool: UploadTool.cairn, measure: .upload,
                arguments: [cairn, "create", "-o", "s3://\(bucket)/corpus.cairn", "--upload-state", journal, "--json", "--no-progress", corpus],
                clean: removing(object("corpus.cairn"), journal), check: same(object("corpus.cairn"))))
        let local = "\(out)/corpus.cairn"
        list.append(
            Step(
                tool: UploadTool.twoStep, measure: .upload, arguments: [cairn, "create", "-o", local, "--no-progress", corpus],
                secondArguments: Self.rcloneCopy(
                    server.executable, local, ":s3:\(bucket)/corpus2.cairn", endpoint: server.endpoint, server: server,
                    configuration: configuration),
                clean: removing(local, object("corpus2.cairn")),
                check: {
                    if let problem = same(local)() { return problem }
                    return same(object("corpus2.cairn"))()
                }))

        let resumeJournal = "\(state)/resume.cairn.partial.upload"
        let cairnUpload = [
            cairn, "create", "-o", "s3://\(bucket)/resume.cairn", "--s3-endpoint", proxyEndpoint, "--upload-state", resumeJournal, "--json",
            "--no-progress", corpus,
        ]
        list.append(
            Step(
                tool: UploadTool.cairnResume, measure: .resume50, arguments: Array(cairnUpload[0...1]) + ["--resume"] + cairnUpload[2...],
                killedFirstRun: FirstRun(
                    arguments: cairnUpload, progress: { _ in Self.recordedBytes(resumeJournal) },
                    completed: { FileManager.default.fileExists(atPath: object("resume.cairn")) },
                    partSize: { (try? MultipartUploadState.load(from: resumeJournal))?.partSize }),
                throughProxy: true, clean: removing(object("resume.cairn"), resumeJournal), check: same(object("resume.cairn"))))
        // Multipart at every size (rclone's default above 200 MiB), so the kill can come between
        // answered parts on a small archive too.
        let rcloneUpload =
            Self.rcloneCopy(
                server.executable, reference, ":s3:\(bucket)/resume2.cairn", endpoint: proxyEndpoint, server: server,
                configuration: configuration) + ["--s3-upload-cutoff", "0"]
        list.append(
            Step(
                tool: UploadTool.rcloneResume, measure: .resume50, arguments: rcloneUpload,
                killedFirstRun: FirstRun(
                    arguments: rcloneUpload + ["--bwlimit", String(Self.firstRunRate(archiveBytes: result.archiveBytes))],
                    progress: { mark in ProxyMeter(proxy: proxy).answeredUploadBytes(since: mark) },
                    completed: { FileManager.default.fileExists(atPath: object("resume2.cairn")) }),
                throughProxy: true, clean: removing(object("resume2.cairn")), check: same(object("resume2.cairn"))))

        let destination = "\(out)/extract"
        let extracted = "\(destination)/\(result.archivedExtractPath)"
        let checkExtract: () -> String? = {
            TreeTally.size(of: extracted) == result.extractBytes ? nil : "\(extracted) is not the \(result.extractBytes)-byte file"
        }
        list.append(
            Step(
                tool: UploadTool.cairnExtract, measure: .remoteExtract,
                arguments: [
                    cairn, "extract", "s3://\(bucket)/extract.cairn", "--s3-endpoint", proxyEndpoint, "-C", destination,
                    result.archivedExtractPath, "--no-progress",
                ], throughProxy: true, clean: removing(destination), check: checkExtract))
        let downloaded = "\(out)/downloaded.cairn"
        let download = Self.rcloneCopy(
            server.executable, ":s3:\(bucket)/extract.cairn", downloaded, endpoint: proxyEndpoint, server: server, configuration: configuration)
        let localExtract = [cairn, "extract", downloaded, "-C", destination, result.archivedExtractPath, "--no-progress"]
        list.append(
            Step(
                tool: UploadTool.rcloneExtract, measure: .remoteExtract,
                arguments: [
                    "/bin/bash", "-c",
                    download.map(shellQuoted).joined(separator: " ") + " && " + localExtract.map(shellQuoted).joined(separator: " "),
                ], throughProxy: true, clean: removing(destination, downloaded), check: checkExtract))
        return list
    }

    /// The time the server takes to answer a HEAD of the archive object against one of a 1 KiB
    /// object (median of 3 each, curl with SigV4), as a note for the report: `rclone serve s3`
    /// was seen to spend about half a second on every request to a 300 MiB object, whatever the
    /// range, which then dominates a remote extract's wall time. Nil when a request fails.
    static func requestLatency(server: RcloneS3Server, key: String) -> String? {
        let small = "latency-probe.bin"
        guard FileManager.default.createFile(atPath: server.objectPath(bucket: bucket, key: small), contents: Data(count: 1024)) else {
            return nil
        }
        defer { try? removeTree(server.objectPath(bucket: bucket, key: small)) }
        func median(_ name: String) -> Double? {
            var times: [Double] = []
            for _ in 0..<3 {
                let started = monotonicSeconds()
                guard let r = try? server.request("HEAD", server.url(bucket: bucket, key: name)), r.status == 200 else { return nil }
                times.append(monotonicSeconds() - started)
            }
            return Spread(times)?.median
        }
        guard let big = median(key), let tiny = median(small) else { return nil }
        return String(
            format: "Server latency: a HEAD of the archive object takes %.3f s, of a 1 KiB object %.3f s (median of 3, curl with "
                + "SigV4, process start included): every request to the archive object costs about the difference whatever its "
                + "range (rclone serve s3 reads the object per request), so the remote extract's wall time counts requests more "
                + "than bytes.", big, tiny)
    }

    /// rclone's `--bwlimit` for its killed first run, bytes per second: the archive in 2 s, at
    /// least 1 MiB/s (its four parallel parts would otherwise all be answered at once on a small
    /// archive, and the upload complete before the kill). The timed rerun is not limited.
    static func firstRunRate(archiveBytes: UInt64) -> UInt64 { max(1 << 20, archiveBytes / 2) }

    /// The bytes of the parts an upload journal records (0 while there is none).
    static func recordedBytes(_ journal: String) -> UInt64 {
        guard let state = try? MultipartUploadState.load(from: journal) else { return 0 }
        return state.parts.reduce(0) { $0 + $1.size }
    }
}

/// Body bytes the counting proxy relayed (``FaultProxy/transfers``, one line per finished
/// request).
struct ProxyMeter {
    var proxy: FaultProxy

    /// The number of finished requests so far: the start of a step.
    func mark() -> Int { proxy.transfers.count }

    /// Request and response body bytes and requests since `mark`, once no request has ended for
    /// 0.3 s (the proxy logs a request just after its client has the answer, and notices a
    /// killed client on its next read).
    func bytes(since mark: Int) -> (sent: UInt64, received: UInt64, requests: Int) {
        var entries = proxy.transfers
        while true {
            usleep(300_000)
            let again = proxy.transfers
            if again.count == entries.count { break }
            entries = again
        }
        let new = entries.dropFirst(mark)
        return (new.reduce(0) { $0 + $1.requestBodyBytes }, new.reduce(0) { $0 + $1.responseBodyBytes }, new.count)
    }

    /// Request body bytes of the part uploads (`PUT …partNumber…`) answered 200 since `mark`:
    /// what the store has acknowledged.
    func answeredUploadBytes(since mark: Int) -> UInt64 {
        proxy.transfers.dropFirst(mark).filter { $0.method == "PUT" && $0.status == 200 && $0.target.contains("partNumber=") }
            .reduce(0) { $0 + $1.requestBodyBytes }
    }
}
