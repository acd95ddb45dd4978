import CairnTestSupport
import Foundation
import Glibc
import Testing

import Cairn

/// Issue 8, "Say what happened" and the habits: sizes with suffixes, words and plurals, honest
/// progress, archives refused on terminals, `info` on a `.partial`, `cat --expect-token` alone,
/// extract's option checks (`Spec/0003-command-line.md`).
@Suite("Command line behaviour")
struct CommandLineBehaviourTests {
    // MARK: Sizes (§2.2)

    @Test("--max-output takes K/M/G/T suffixes as powers of 1024; a bad size is a usage error")
    func sizeSuffixes() throws {
        let work = try BehaviourFixture.work("sizes")
        defer { work.remove() }
        let archive = try BehaviourFixture.archive(in: work)
        let small = try BehaviourCLI.run(["extract", "-q", "--max-output", "1K", archive, "-C", work.appending("a")])
        #expect(small.status == 1, "1K = 1024 bytes is less than the archive's output: \(small.stderr)")
        #expect(small.stderr.contains("limit") || small.stderr.contains("exceed"), "\(small.stderr)")
        let enough = try BehaviourCLI.run(["extract", "-q", "--max-output", "2MiB", archive, "-C", work.appending("b")])
        #expect(enough.status == 0, "\(enough.stderr)")
        let bad = try BehaviourCLI.run(["extract", "-q", "--max-output", "12Q", archive, "-C", work.appending("c")])
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("--max-output takes a size"), "\(bad.stderr)")
    }

    @Test("create --size-estimate 1G stores 1073741824")
    func sizeEstimateSuffix() throws {
        let work = try BehaviourFixture.work("estimate")
        defer { work.remove() }
        try BehaviourFixture.tree().materialize(at: work.appending("tree"))
        let archive = work.appending("e.cairn")
        let create = try BehaviourCLI.run(["create", "-q", "--size-estimate", "1G", "-o", archive, "tree"], in: work.path)
        #expect(create.status == 0, "\(create.stderr)")
        let info = try BehaviourCLI.run(["info", "--json", archive])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(info.stdout.utf8)) as? [String: Any])
        #expect((object["sizeEstimate"] as? NSNumber)?.uint64Value == 1 << 30)
    }

    // MARK: Words (§2)

    @Test("one entry is '1 entry', never '1 entries'")
    func singular() throws {
        let work = try BehaviourFixture.work("plural")
        defer { work.remove() }
        try RawFileSystem.writeFile(Array(work.appending("only.txt").utf8), Array("one\n".utf8))
        let archive = work.appending("one.cairn")
        let create = try BehaviourCLI.run(["create", "-o", archive, "only.txt"], in: work.path)
        #expect(create.status == 0, "\(create.stderr)")
        #expect(create.stdout.contains("1 entry,"), "\(create.stdout)")
        let verify = try BehaviourCLI.run(["verify", archive])
        #expect(verify.stdout.contains("1 entry, 1 chunk,"), "\(verify.stdout)")
        let extract = try BehaviourCLI.run(["extract", archive, "-C", work.appending("out")])
        #expect(extract.stdout.contains("extracted 1 entry,"), "\(extract.stdout)")
        let info = try BehaviourCLI.run(["info", archive])
        #expect(info.stdout.contains("1 (1 file)"), "\(info.stdout)")
        for text in [create.stdout, verify.stdout, extract.stdout, info.stdout] {
            #expect(!text.contains("1 entries") && !text.contains("1 files") && !text.contains("1 chunks"), "\(text)")
        }
    }

    @Test("info on a cut ARCHIVE.partial names the create --resume that continues it, with the recorded sources")
    func infoNamesTheResumeCommand() throws {
        let work = try BehaviourFixture.work("info-partial")
        defer { work.remove() }
        try FileManager.default.createDirectory(atPath: work.appending("my dir"), withIntermediateDirectories: true)
        for index in 0..<2000 { try RawFileSystem.writeFile(Array(work.appending("my dir/f\(index)").utf8), Array("\(index)\n".utf8)) }
        let archive = work.appending("k.cairn")
        #expect(try BehaviourCLI.run(["create", "-q", "-o", archive, "my dir"], in: work.path).status == 0)
        let bytes = try RawFileSystem.contents(ofFile: Array(archive.utf8))
        try RawFileSystem.writeFile(Array(work.appending("cut.cairn.partial").utf8), Array(bytes.prefix(bytes.count / 2)))
        let info = try BehaviourCLI.run(["info", work.appending("cut.cairn.partial")])
        #expect(info.status == 0, "\(info.stderr)")
        #expect(info.stdout.contains("cairn create --resume -o ") && info.stdout.hasSuffix("'my dir'") || info.stdout.contains("'my dir'\n"), "\(info.stdout)")
        #expect(!info.stdout.contains("PATH..."), "\(info.stdout)")
    }

    @Test("a socket is called a 'socket' in the warning; a device is listed as a character device, not by its Swift case name")
    func fileKindsInWords() throws {
        let work = try BehaviourFixture.work("words")
        defer { work.remove() }
        try SpecialFileAndTimeTests.bindSocket(work.appending("sock"))
        let create = try BehaviourCLI.run(["create", "-q", "-o", work.appending("d.cairn"), work.appending("sock")])
        #expect(create.status == 3, "\(create.stderr)")
        #expect(create.stderr.contains("sockets are not archived"), "\(create.stderr)")
        let device = try BehaviourCLI.run(["create", "-q", "-o", work.appending("n.cairn"), "/dev/null"])
        #expect(device.status == 0, "\(device.stderr)")
        let list = try BehaviourCLI.run(["list", "-l", work.appending("n.cairn")])
        #expect(list.stdout.hasPrefix("c "), "\(list.stdout)")
        #expect(list.stdout.contains("(device 1, 3)"), "\(list.stdout)")
        #expect(!list.stdout.contains("characterDevice"), "\(list.stdout)")
    }

    // MARK: cat (§9)

    @Test("cat --expect-token without --from-offset sends the rest from the token's length")
    func catTokenAlone() throws {
        let work = try BehaviourFixture.work("cat")
        defer { work.remove() }
        let archive = try BehaviourFixture.archive(in: work)
        let bytes = try RawFileSystem.contents(ofFile: Array(archive.utf8))
        let copy = work.appending("copy.cairn")
        try RawFileSystem.writeFile(Array(copy.utf8), Array(bytes[0..<(bytes.count / 2)]))
        let partial = try BehaviourCLI.run(["verify", "--partial", "--json", copy])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(partial.stdout.utf8)) as? [String: Any])
        let token = try #require(object["resumeToken"] as? String)
        let length = try #require((object["verifiedLength"] as? NSNumber)?.intValue)
        #expect(length > 0)
        let cat = try BehaviourCLI.run(["cat", archive, "--expect-token", token])
        #expect(cat.status == 0, "\(cat.stderr)")
        #expect(cat.stdoutBytes == Array(bytes[length...]), "the bytes after the token's length")
        let disagreeing = try BehaviourCLI.run(["cat", archive, "--from-offset", "1", "--expect-token", token])
        #expect(disagreeing.status == 2, "an offset that disagrees with the token is a usage error")
    }

    // MARK: info on an incomplete archive (§6)

    @Test("info on a cut .partial says what is committed, as verify --partial does")
    func infoOnPartial() throws {
        let work = try BehaviourFixture.work("info-partial")
        defer { work.remove() }
        let archive = try BehaviourFixture.archive(in: work)
        let bytes = try RawFileSystem.contents(ofFile: Array(archive.utf8))
        let partial = work.appending("export.cairn.partial")
        try RawFileSystem.writeFile(Array(partial.utf8), Array(bytes[0..<(bytes.count * 3 / 4)]))
        let reference = try BehaviourCLI.run(["verify", "--partial", "--json", partial])
        let expected = try #require(try JSONSerialization.jsonObject(with: Data(reference.stdout.utf8)) as? [String: Any])

        let info = try BehaviourCLI.run(["info", "--json", partial])
        #expect(info.status == 0, "\(info.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(info.stdout.utf8)) as? [String: Any])
        #expect(object["complete"] as? Bool == false)
        #expect((object["verifiedLength"] as? NSNumber) == (expected["verifiedLength"] as? NSNumber))
        #expect((object["entryCount"] as? NSNumber) == (expected["entryCount"] as? NSNumber))
        #expect((object["uncompressedBytes"] as? NSNumber) == (expected["contentBytes"] as? NSNumber))
        #expect((object["entryCount"] as? NSNumber)?.intValue ?? 0 > 0, "something was committed")

        let text = try BehaviourCLI.run(["info", partial])
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("complete:          no"), "\(text.stdout)")
        #expect(text.stdout.contains("verified length:   \(expected["verifiedLength"] ?? "?") bytes"), "\(text.stdout)")

        let complete = try BehaviourCLI.run(["info", "--json", archive])
        let whole = try #require(try JSONSerialization.jsonObject(with: Data(complete.stdout.utf8)) as? [String: Any])
        #expect(whole["complete"] as? Bool == true)
        let junk = work.appending("junk")
        try RawFileSystem.writeFile(Array(junk.utf8), Array("not an archive\n".utf8))
        #expect(try BehaviourCLI.run(["info", junk]).status == 1, "a file that is not Cairn is still an error")
    }

    // MARK: Progress (§2.1)

    @Test("without a total the bar shows bytes and rate, not '0% of 0 B'")
    func progressWithoutTotal() throws {
        let work = try BehaviourFixture.work("progress-no-total")
        defer { work.remove() }
        let archive = try BehaviourFixture.archive(in: work)
        let result = try BehaviourCLI.run(
            ["extract", "-q", "--progress", "-", "-C", work.appending("out")], standardInput: archive)
        #expect(result.status == 0, "\(result.stderr)")
        let bar = BehaviourFixture.lastBar(result.stderr, label: "extract")
        #expect(!bar.isEmpty, "--progress forces the bar: \(result.stderr)")
        #expect(!bar.contains("%") && !bar.contains("/ 0 B") && bar.contains("MB/s"), "\(bar)")
    }

    @Test("on a terminal, extract - draws no bar unless --progress (the writer of the stream draws); extract FILE does")
    func oneBarPerTerminal() throws {
        let work = try BehaviourFixture.work("progress-pty")
        defer { work.remove() }
        let archive = try BehaviourFixture.archive(in: work)
        let cairn = try BehaviourCLI.executable().path
        let stream = try BehaviourPTY.run("\(cairn) extract - -C \(work.appending("a")) < \(archive)")
        #expect(stream.status == 0, "\(stream.stdout)")
        #expect(!stream.stdout.contains("\rextract"), "no bar from extract -: \(stream.stdout.debugDescription)")
        let forced = try BehaviourPTY.run("\(cairn) extract --progress - -C \(work.appending("b")) < \(archive)")
        #expect(forced.stdout.contains("\rextract"), "--progress draws it: \(forced.stdout.debugDescription)")
        let file = try BehaviourPTY.run("\(cairn) extract \(archive) -C \(work.appending("c"))")
        #expect(file.status == 0, "\(file.stdout)")
        #expect(file.stdout.contains("\rextract"), "extract FILE draws on a terminal: \(file.stdout.debugDescription)")
    }

    @Test("--progress and --no-progress are in the help of create and extract")
    func progressInHelp() throws {
        for command in ["create", "extract"] {
            let help = try BehaviourCLI.run([command, "--help"])
            #expect(help.stdout.contains("--progress") && help.stdout.contains("--no-progress"), "\(command): \(help.stdout)")
        }
    }

    // MARK: Terminals (§1)

    @Test("create -o - to a terminal and extract -/verify - from a terminal are refused, exit 1")
    func terminalsRefused() throws {
        let work = try BehaviourFixture.work("tty")
        defer { work.remove() }
        try BehaviourFixture.tree().materialize(at: work.appending("tree"))
        let cairn = try BehaviourCLI.executable().path
        let create = try BehaviourPTY.run("cd \(work.path) && \(cairn) create -o - tree")
        #expect(create.status == 1, "\(create.stdout.debugDescription)")
        #expect(create.stdout.contains("refusing to write an archive to a terminal"), "\(create.stdout.debugDescription)")
        #expect(!create.stdout.contains("CAIRN"), "no archive bytes on the terminal")
        for command in ["extract - -C \(work.appending("out"))", "verify -"] {
            let read = try BehaviourPTY.run("\(cairn) \(command)")
            #expect(read.status == 1, "\(command): \(read.stdout.debugDescription)")
            #expect(read.stdout.contains("refusing to read an archive from a terminal"), "\(command): \(read.stdout.debugDescription)")
        }
        #expect(!RawFileSystem.exists(Array(work.appending("out").utf8)))
        // A pipe is fine.
        let piped = try BehaviourPTY.run("cd \(work.path) && \(cairn) create -q -o - tree | \(cairn) verify -q -")
        #expect(piped.status == 0, "\(piped.stdout.debugDescription)")
    }

    // MARK: extract's options (§4)

    @Test("extract refuses two existing-file policies at once and a bad --strip-components")
    func extractOptionChecks() throws {
        let work = try BehaviourFixture.work("extract-options")
        defer { work.remove() }
        let archive = try BehaviourFixture.archive(in: work)
        let both = try BehaviourCLI.run(["extract", "--overwrite", "--skip-old-files", archive, "-C", work.appending("o")])
        #expect(both.status == 2)
        #expect(both.stderr.contains("--overwrite and --skip-old-files cannot be given together"), "\(both.stderr)")
        let bad = try BehaviourCLI.run(["extract", "--strip-components", "-1", archive, "-C", work.appending("o")])
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("--strip-components takes"), "\(bad.stderr)")
        let help = try BehaviourCLI.run(["extract", "--help"])
        for option in ["--strip-components", "--overwrite", "--keep-old-files", "--skip-old-files", "-v, --verbose"] {
            #expect(help.stdout.contains(option), "\(option) in extract --help")
        }
    }
}

// MARK: - Helpers

/// Runs the built `cairn`.
enum BehaviourCLI {
    static func executable() throws -> URL { try ChildProcess.cairnExecutable(besideBundle: Bundle.module.bundleURL) }

    static func run(
        _ arguments: [String], in directory: String? = nil, standardInput: String? = nil, timeout: Double = Await.safetyBound
    ) throws -> ChildProcess.Result {
        try ChildProcess.run(executable(), arguments, in: directory, standardInput: standardInput, timeout: timeout)
    }

    static func start(_ arguments: [String], in directory: String? = nil, standardInput: String? = nil) throws -> ChildProcess.Child {
        try ChildProcess.start(executable(), arguments, in: directory, standardInput: standardInput)
    }
}

/// Runs a shell command on a pseudo-terminal (`script -qec`): its standard input, output and
/// error are the terminal unless the command redirects them; what it printed comes back as
/// standard output.
enum BehaviourPTY {
    static func run(_ command: String, timeout: Double = Await.safetyBound) throws -> ChildProcess.Result {
        try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/script"), ["-qec", command, "/dev/null"], timeout: timeout)
    }
}

enum BehaviourFixture {
    static func work(_ name: String) throws -> TemporaryDirectory { try TemporaryDirectory(prefix: "cairn-behaviour-\(name)") }

    /// A small tree: a few files (one of 200 KiB, several chunks), a directory, a symlink.
    static func tree(seed: UInt64 = 8) -> TreeBuilder {
        var generator = SeededGenerator(seed: seed)
        var tree = TreeBuilder()
        tree.directory("docs", mode: 0o750)
        tree.file("docs/a.txt", Array("hello, cairn\n".utf8), mode: 0o640)
        tree.file("docs/b.bin", generator.bytes(200 * 1024))
        tree.file("notes.txt", Array(repeating: UInt8(ascii: "n"), count: 5000))
        tree.symlink("latest", target: "docs/a.txt")
        return tree
    }

    /// `create -o WORK/export.cairn tree` of ``tree(seed:)``; returns the archive's path.
    static func archive(in work: TemporaryDirectory) throws -> String {
        try tree().materialize(at: work.appending("tree"))
        let archive = work.appending("export.cairn")
        let create = try BehaviourCLI.run(
            ["create", "-q", "--chunking", "cdc:4k:16k:64k", "-o", archive, "tree"], in: work.path)
        guard create.status == 0 else { throw CairnError(.io, "create failed: \(create.stderr)") }
        return archive
    }

    /// The last redraw of the progress bar labelled `label` in `stderr` (after its last `\r`).
    static func lastBar(_ stderr: String, label: String) -> String {
        let draws = stderr.split(separator: "\r").map(String.init).filter { $0.hasPrefix(label + " ") }
        return draws.last ?? ""
    }
}
