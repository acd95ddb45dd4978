import CairnTestSupport
import Foundation
import Glibc

/// What issue 26's shaped-link case measures.
enum LinkMeasure: String, CaseIterable {
    case fetch = "fetch"
    case upload = "upload"
    case extractOne = "remote extract of one ~10 MiB file"
    case extractMany = "remote extract of 100 files spread over the archive"
}

/// Tool names of the link case, as the report shows them.
enum LinkTool {
    static let cairnFetch = "cairn fetch"
    static let cairnFetchOne = "cairn fetch --connections 1"
    static let aria2 = "aria2c -x4 -s4"
    static let curl = "curl -o"
    static let cairnUpload = "cairn create -o s3://"
    static let cairnUploadOne = "cairn create -o s3:// --upload-concurrency 1"
    static let rclone = "rclone copyto"
    static let cairnExtract = "cairn extract URL PATH..."
    static let cairnExtractOne = "cairn extract URL PATH... --connections 1"
}

/// One step of the link case for one tool over all rounds.
struct LinkOperation {
    var tool: String
    var measure: LinkMeasure
    /// The command as run inside the link's namespace.
    var arguments: [String]
    /// The bytes the step moves, for MB/s: the archive for fetch and upload, the extracted
    /// files' bytes for an extract.
    var payloadBytes: UInt64
    var runs: [ProcessResult] = []
    var failure: String?
    /// "not available: <stderr>" when the tool or the flag is missing.
    var notAvailable: String?

    var wall: Spread? { Spread(runs.map(\.wallSeconds)) }
    var cpu: Spread? { Spread(runs.map(\.cpuSeconds)) }
    var peakRSS: Spread? { Spread(runs.map { Double($0.peakRSSBytes) }) }
    /// MB/s (10^6 bytes per second) per round.
    var throughput: Spread? { Spread(runs.map { Double(payloadBytes) / max($0.wallSeconds, 1e-9) / 1e6 }) }
}

/// Everything the link case measured.
struct LinkResult {
    var corpus: BenchCase
    var runs: Int
    var archiveBytes: UInt64
    var link: String
    var operations: [LinkOperation] = []
    var versions: [String: String] = [:]
    var notes: [String] = []

    func operation(_ tool: String) -> LinkOperation? { operations.first { $0.tool == tool } }
}

/// Issue 26's benchmark: transfers over a link that caps each connection, caps the whole link
/// and adds latency, side by side with aria2c, curl and rclone, in interleaved rounds.
///
/// The link: a ``ShapedLink`` (network namespace, veth pair, tbf at ``linkBytesPerSecond``
/// each way); nginx with `limit_rate` ``perConnectionRate`` for downloads and `rclone serve s3`
/// for uploads, each behind a ``FaultProxy`` in ``FaultProxy/Mode/shape(delay:bytesPerSecond:)``
/// listening on the link's host side (``delaySeconds`` before each request and each answer, and
/// for the S3 server the per-connection cap too). Every client runs inside the namespace.
struct LinkBenchmark {
    var cairn: String
    var work: String
    var runs: Int
    var pauseSeconds: Double
    var keep: Bool

    /// nginx's `limit_rate` (16 MiB/s: nginx's `m` is 1024²).
    static let perConnectionRate = "16m"
    static let perConnectionBytes = 16 << 20
    static let linkBytesPerSecond = 160_000_000
    static let delaySeconds = 0.02
    static let bucket = "links"
    var base: String { "\(work)/links" }

    /// Prepares the archive and the link, runs every round, tears everything down.
    ///
    /// - Throws: ``BenchError`` or `TestServerError` when the preparation fails (not root, no
    ///   tc, a server); a failing measured step is recorded in its operation instead.
    func run(corpus: BenchCase) throws -> LinkResult {
        if let reason = ShapedLink.unavailableReason { throw BenchError("the link case cannot run: \(reason)") }
        try? removeTree(base)
        for directory in ["logs", "out", "www", "state"] {
            try FileManager.default.createDirectory(atPath: "\(base)/\(directory)", withIntermediateDirectories: true)
        }
        var runner = ProcessRunner(logDirectory: "\(base)/logs")
        let archive = "\(base)/www/a.cairn"
        let created = try runner.run([cairn, "create", "-o", archive, "--no-progress", corpus.path], label: "links-reference")
        guard created.succeeded else { throw BenchError("cairn create \(archive) failed: \(created.standardError.suffix(300))") }
        let archiveBytes = UInt64((try? FileManager.default.attributesOfItem(atPath: archive)[.size] as? Int) ?? 0)
        log("links: archive \(formatMiB(archiveBytes))")

        let link = try ShapedLink(tag: "bench26", bytesPerSecond: Self.linkBytesPerSecond)
        defer { link.stop() }
        let nginx = try NginxServer(root: "\(base)/www", slowRate: Self.perConnectionRate)
        defer { nginx.stop() }
        let web = try FaultProxy(upstreamPort: nginx.port, mode: .shape(delay: Self.delaySeconds), address: link.hostAddress)
        defer { web.stop() }
        let s3 = try RcloneS3Server(buckets: [Self.bucket])
        defer { s3.stop() }
        let store = try FaultProxy(
            upstreamPort: s3.port, mode: .shape(delay: Self.delaySeconds, bytesPerSecond: Self.perConnectionBytes), address: link.hostAddress)
        defer { store.stop() }
        runner.environment = s3.environment.merging([
            "LC_ALL": "C", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "", "AWS_ENDPOINT_URL": "http://\(link.hostAddress):\(store.port)",
            "XDG_STATE_HOME": "\(base)/state",
        ]) { $1 }

        var result = LinkResult(
            corpus: corpus, runs: runs, archiveBytes: archiveBytes,
            link: "tbf \(Self.linkBytesPerSecond / 1_000_000) MB/s each way (veth into a network namespace); nginx limit_rate "
                + "\(Self.perConnectionRate) per connection; S3: the proxy paces each connection to \(Self.perConnectionBytes >> 20) MiB/s; "
                + "\(Int(Self.delaySeconds * 1000)) ms added each way by the proxy (\(Int(Self.delaySeconds * 2000)) ms per request)")
        result.notes.append(
            "Every request goes through the Python proxy, which closes each connection after one answer: the tools reconnect per "
                + "request alike. The proxy's latency is per request, not per TCP round trip (netem does not exist here), so a "
                + "window-limited flow is not simulated; the per-connection caps are.")
        for (name, command) in [("cairn", [cairn, "--version"]), ("aria2c", ["aria2c", "--version"]), ("curl", ["curl", "--version"]),
            ("rclone", [s3.executable, "version"])]
        {
            if let r = try? runner.run(command, label: "version") {
                let line = (r.standardOutput + "\n" + r.standardError).split(separator: "\n").first { !$0.isEmpty }
                result.versions[name] = line.map(String.init) ?? "?"
            }
        }
        let selection = try Self.selection(in: corpus.path)
        var operations = steps(
            link: link, web: web, s3: s3, store: store, archive: archive, archiveBytes: archiveBytes, corpus: corpus.path,
            selection: selection)
        for index in operations.indices { operations[index].notAvailable = Self.missingTool(operations[index]) }
        for round in 1...runs {
            for index in operations.indices where operations[index].notAvailable == nil && operations[index].failure == nil {
                prepare(operations[index], s3: s3)
                settle()
                do {
                    let r = try runner.run(operations[index].arguments, label: "links-\(index)-\(round)")
                    if r.succeeded {
                        operations[index].runs.append(r)
                    } else if r.exitStatus == 2, r.standardError.contains("unknown option") {
                        // A flag another branch adds (`--connections` for fetch, `--upload-concurrency`).
                        let said = r.standardError.split(separator: "\n").first.map(String.init) ?? ""
                        operations[index].notAvailable = "not available: " + said
                    } else {
                        operations[index].failure = "exit \(r.exitStatus): \(r.standardError.suffix(400))"
                    }
                } catch {
                    operations[index].failure = "\(error)"
                }
                log("links: round \(round) \(operations[index].tool): \(operations[index].runs.last.map { String(format: "%.1f s", $0.wallSeconds) } ?? "failed")")
            }
        }
        result.operations = operations
        if !keep { try? removeTree("\(base)/out") }
        return result
    }

    /// The files the extracts take: the one nearest 10 MiB, and 100 spread evenly over the
    /// corpus's files in path order (the archive's order), with their bytes.
    static func selection(in root: String) throws -> (one: (path: String, bytes: UInt64), many: [String], manyBytes: UInt64) {
        let files = SmallChange.regularFiles(under: root).sorted { $0.path < $1.path }
        guard let one = files.min(by: { abs(Int64($0.bytes) - (10 << 20)) < abs(Int64($1.bytes) - (10 << 20)) }) else {
            throw BenchError("\(root) has no regular file to extract")
        }
        let step = max(1, files.count / 100)
        let many = stride(from: 0, to: files.count, by: step).prefix(100).map { files[$0] }
        let name = (root as NSString).lastPathComponent
        return ((name + "/" + one.path, one.bytes), many.map { name + "/" + $0.path }, many.reduce(0) { $0 + $1.bytes })
    }

    /// Every step of a round, in the order run: each measure's tools side by side.
    func steps(
        link: ShapedLink, web: FaultProxy, s3: RcloneS3Server, store: FaultProxy, archive: String, archiveBytes: UInt64, corpus: String,
        selection: (one: (path: String, bytes: UInt64), many: [String], manyBytes: UInt64)
    ) -> [LinkOperation] {
        let url = web.url("slow/a.cairn")
        let out = "\(base)/out"
        let endpoint = store.url("").dropLast().description
        func inside(_ arguments: [String]) -> [String] { [ShapedLink.ip, "netns", "exec", link.namespace] + arguments }
        let configuration = "\(base)/rclone.conf"
        _ = FileManager.default.createFile(atPath: configuration, contents: Data())
        var list: [LinkOperation] = [
            LinkOperation(
                tool: LinkTool.cairnFetch, measure: .fetch,
                arguments: inside([cairn, "fetch", url, "-o", "\(out)/fetch.cairn", "--force", "--json"]), payloadBytes: archiveBytes),
            LinkOperation(
                tool: LinkTool.cairnFetchOne, measure: .fetch,
                arguments: inside([cairn, "fetch", url, "-o", "\(out)/fetch1.cairn", "--force", "--json", "--connections", "1"]),
                payloadBytes: archiveBytes),
            LinkOperation(
                tool: LinkTool.aria2, measure: .fetch,
                arguments: inside([
                    "aria2c", "-x4", "-s4", "-q", "--allow-overwrite=true", "--auto-file-renaming=false", "--file-allocation=none",
                    "-d", out, "-o", "aria2.cairn", url,
                ]), payloadBytes: archiveBytes),
            LinkOperation(
                tool: LinkTool.curl, measure: .fetch, arguments: inside(["curl", "-sS", "-f", "-o", "\(out)/curl.cairn", url]),
                payloadBytes: archiveBytes),
        ]
        let storeOptions = ["--s3-endpoint", endpoint]
        list += [
            LinkOperation(
                tool: LinkTool.cairnUpload, measure: .upload,
                arguments: inside([cairn, "create", "-o", "s3://\(Self.bucket)/up.cairn"] + storeOptions + ["--no-progress", corpus]),
                payloadBytes: archiveBytes),
            LinkOperation(
                tool: LinkTool.cairnUploadOne, measure: .upload,
                arguments: inside(
                    [cairn, "create", "-o", "s3://\(Self.bucket)/up1.cairn"] + storeOptions + ["--no-progress", "--upload-concurrency", "1", corpus]),
                payloadBytes: archiveBytes),
            // rclone's default concurrency (4 parts in flight); multipart at every size, as its
            // default is only above 200 MiB.
            LinkOperation(
                tool: LinkTool.rclone, measure: .upload,
                arguments: inside(
                    UploadBenchmark.rcloneCopy(
                        s3.executable, archive, ":s3:\(Self.bucket)/rclone.cairn", endpoint: endpoint, server: s3, configuration: configuration)
                        + ["--s3-upload-cutoff", "0"]), payloadBytes: archiveBytes),
        ]
        for (tool, extra) in [(LinkTool.cairnExtract, [String]()), (LinkTool.cairnExtractOne, ["--connections", "1"])] {
            list.append(
                LinkOperation(
                    tool: tool + " (one)", measure: .extractOne,
                    arguments: inside([cairn, "extract", url, "-C", "\(out)/one", "--no-progress", "--force"] + extra + [selection.one.path]),
                    payloadBytes: selection.one.bytes))
            list.append(
                LinkOperation(
                    tool: tool + " (100)", measure: .extractMany,
                    arguments: inside([cairn, "extract", url, "-C", "\(out)/many", "--no-progress", "--force"] + extra + selection.many),
                    payloadBytes: selection.manyBytes))
        }
        return list
    }

    /// "not available: ..." when the step's program is not installed, else nil.
    static func missingTool(_ operation: LinkOperation) -> String? {
        guard let tool = operation.arguments.dropFirst(4).first else { return "not available: no command" }
        return tool.hasPrefix("/") || findExecutable(tool) != nil ? nil : "not available: \(tool) is not installed"
    }

    /// Removes what the step's previous round left: outputs, the uploaded object, an upload state.
    func prepare(_ operation: LinkOperation, s3: RcloneS3Server) {
        let out = "\(base)/out"
        for name in ["fetch.cairn", "fetch1.cairn", "aria2.cairn", "curl.cairn", "one", "many"] {
            try? removeTree("\(out)/\(name)")
            try? removeTree("\(out)/\(name).partial")
        }
        for key in ["up.cairn", "up1.cairn", "rclone.cairn"] { try? removeTree(s3.objectPath(bucket: Self.bucket, key: key)) }
        try? removeTree("\(base)/state/cairn")
    }

    private func settle() {
        sync()
        if pauseSeconds > 0 { usleep(useconds_t(pauseSeconds * 1_000_000)) }
    }
}
