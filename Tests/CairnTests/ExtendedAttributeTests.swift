import CairnTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

import Cairn

/// Extended attributes collected on create and restored on extract (`Spec/0001-container-format.md
/// §6.5`, `Spec/0003-command-line.md §3, §4`), through the library and the CLI.
///
/// The attributes are set and read back with the C library's own `lsetxattr`, `lgetxattr` and
/// `llistxattr` (looked up with `dlsym`), not with the code under test.
@Suite("Extended attributes")
struct ExtendedAttributeTests {
    // MARK: - Create

    @Test("create archives user.* attributes of files and directories, in the file system's order")
    func createCollects() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-xattr")
        defer { work.remove() }
        let tree = try XattrTree.make(in: work.appending("src"))
        let archive = work.appending("a.cairn")
        try await Self.archive(tree.root, to: archive)
        let entries = try Self.entries(of: archive)

        let file = try #require(entries["tree/f.txt"])
        #expect(file.extendedAttributes.map(\.name) == (try Xattr.names(tree.root + "/f.txt")).map { Array($0.utf8) })
        #expect(file.attribute("user.alpha") == Array("one".utf8))
        #expect(file.attribute("user.binary") == [0, 0xFF, 0x0A, 0])
        #expect(file.attribute("user.empty") == [])
        #expect(entries["tree"]?.attribute("user.directory") == Array("D".utf8))
        #expect(entries["tree/sub"]?.attribute("user.deep") == Array("x".utf8))
        #expect(entries["tree/plain.txt"]?.extendedAttributes == [], "a file without attributes has none")
        if geteuid() == 0 {
            // Root reads trusted.*; Linux allows no user.* on symlinks, other namespaces are kept.
            #expect(file.attribute("trusted.secret") == Array("T".utf8))
            #expect(entries["tree/link"]?.attribute("trusted.link") == Array("L".utf8))
        }
    }

    @Test("collectsExtendedAttributes = false archives none")
    func createSkips() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-xattr")
        defer { work.remove() }
        let tree = try XattrTree.make(in: work.appending("src"))
        let archive = work.appending("a.cairn")
        var configuration = Archiver.Configuration()
        configuration.collectsExtendedAttributes = false
        try await Self.archive(tree.root, to: archive, configuration: configuration)
        let entries = try Self.entries(of: archive)
        #expect(!entries.isEmpty)
        #expect(entries.values.allSatisfy { $0.extendedAttributes.isEmpty })
    }

    @Test("more than 128 attributes: the first 128 are archived, the rest left out with a warning each")
    func createCountLimit() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-xattr")
        defer { work.remove() }
        let path = work.appending("many")
        try RawFileSystem.writeFile(Array(path.utf8), Array("m".utf8))
        for i in 0..<130 { try Xattr.set(path, "user.a\(String(format: "%03d", i))", []) }
        let listed = try Xattr.names(path)
        #expect(listed.count == 130)
        let archive = work.appending("a.cairn")
        let properties = try await Self.archive(path, to: archive)
        let entry = try #require(try Self.entries(of: archive)["many"])
        #expect(entry.extendedAttributes.map(\.name) == listed.prefix(128).map { Array($0.utf8) })
        #expect(properties.warnings.count == 2)
        for (warning, name) in zip(properties.warnings, listed.suffix(2)) {
            #expect(warning.code == .limitExceeded)
            #expect(warning.path == path)
            #expect(warning.message.contains(name), "\(warning)")
        }
    }

    @Test("attributes over the name or value limit are left out with a warning naming file and attribute")
    func limits() {
        let attributes = [
            ArchiveEntry.ExtendedAttribute(name: Array("user.ok".utf8), value: [1]),
            ArchiveEntry.ExtendedAttribute(
                name: Array("user.big".utf8), value: [UInt8](repeating: 7, count: FormatLimits.maximumExtendedAttributeValueLength + 1)),
            ArchiveEntry.ExtendedAttribute(
                name: Array("user.max".utf8), value: [UInt8](repeating: 7, count: FormatLimits.maximumExtendedAttributeValueLength)),
            ArchiveEntry.ExtendedAttribute(name: Array("user.".utf8) + [UInt8](repeating: 0x6E, count: 251), value: []),
            ArchiveEntry.ExtendedAttribute(name: [], value: []),
        ]
        let (kept, warnings) = ExtendedAttributes.withinLimits(attributes, display: "dir/file")
        #expect(kept.map(\.name) == [Array("user.ok".utf8), Array("user.max".utf8)])
        #expect(warnings.count == 3)
        #expect(warnings.allSatisfy { $0.code == .limitExceeded && $0.path == "dir/file" })
        #expect(warnings.first?.message.contains("user.big") == true)
        #expect(warnings.first?.message.contains("65537") == true)
    }

    // MARK: - Extract

    @Test("extraction restores the attributes, streaming and seekable", arguments: [false, true])
    func extractRestores(selecting: Bool) async throws {
        let work = try TemporaryDirectory(prefix: "cairn-xattr")
        defer { work.remove() }
        let tree = try XattrTree.make(in: work.appending("src"))
        let archive = work.appending("a.cairn")
        try await Self.archive(tree.root, to: archive)
        let destination = work.appending("out")
        let extractor = try await Extractor(at: .file(path: archive))
        defer { extractor.close() }
        let warnings = WarningBox()
        var options = ExtractionOptions()
        options.onWarning = { warnings.append($0) }
        if selecting {
            // A selection goes through the seekable writer, everything through the stream checker.
            try await extractor.extractItem(atPathInArchive: "tree", to: URL(fileURLWithPath: destination), options: options)
        } else {
            try await extractor.extractAll(to: URL(fileURLWithPath: destination), options: options)
        }
        #expect(warnings.all.isEmpty, "\(warnings.all)")
        let out = destination + "/tree"
        #expect(try Xattr.names(out + "/f.txt") == (try Xattr.names(tree.root + "/f.txt")))
        #expect(Xattr.get(out + "/f.txt", "user.binary") == [0, 0xFF, 0x0A, 0])
        #expect(Xattr.get(out + "/f.txt", "user.empty") == [])
        #expect(Xattr.get(out, "user.directory") == Array("D".utf8))
        #expect(Xattr.get(out + "/sub", "user.deep") == Array("x".utf8))
        #expect(Xattr.get(out + "/readonly.txt", "user.ro") == Array("r".utf8))
        #expect(try RawFileSystem.status(Array((out + "/readonly.txt").utf8)).st_mode & 0o777 == 0o444)
        #expect(try Xattr.names(out + "/plain.txt") == [])
        if geteuid() == 0 {
            #expect(Xattr.get(out + "/f.txt", "trusted.secret") == Array("T".utf8))
            #expect(Xattr.get(out + "/link", "trusted.link") == Array("L".utf8))
        }
    }

    @Test("restoresExtendedAttributes = false sets none")
    func extractSkips() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-xattr")
        defer { work.remove() }
        let tree = try XattrTree.make(in: work.appending("src"))
        let archive = work.appending("a.cairn")
        try await Self.archive(tree.root, to: archive)
        let extractor = try await Extractor(at: .file(path: archive))
        defer { extractor.close() }
        var options = ExtractionOptions()
        options.restoresExtendedAttributes = false
        try await extractor.extractAll(to: URL(fileURLWithPath: work.appending("out")), options: options)
        #expect(try Xattr.names(work.appending("out/tree/f.txt")) == [])
        #expect(try Xattr.names(work.appending("out/tree")) == [])
    }

    @Test("a value the destination refuses is a warning to onWarning; the extraction completes")
    func extractRefusedIsWarning() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-xattr")
        defer { work.remove() }
        try #require(Xattr.refusesLargeValues(in: work.path), "this test needs a file system that refuses 60 KiB values (ext4)")
        let archive = work.appending("big.cairn")
        try Data(try Self.archiveWithLargeValue()).write(to: URL(fileURLWithPath: archive))
        for streaming in [true, false] {
            let destination = work.appending(streaming ? "stream" : "seekable")
            let extractor = try await Extractor(at: .file(path: archive))
            defer { extractor.close() }
            let warnings = WarningBox()
            var options = ExtractionOptions()
            options.onWarning = { warnings.append($0) }
            if streaming {
                try await extractor.extractAll(to: URL(fileURLWithPath: destination), options: options)
            } else {
                try await extractor.extractItem(atPathInArchive: "big.txt", to: URL(fileURLWithPath: destination), options: options)
            }
            #expect(warnings.all.count == 1)
            let warning = try #require(warnings.all.first)
            #expect(warning.code == .io)
            #expect(warning.path == "big.txt")
            #expect(warning.message == "cannot set extended attribute user.big")
            #expect(Xattr.get(destination + "/big.txt", "user.small") == Array("s".utf8), "the other attribute is set")
            #expect(try RawFileSystem.contents(ofFile: Array((destination + "/big.txt").utf8)) == Array("content".utf8))
        }
    }

    // MARK: - Command line

    @Test("cairn create --no-xattrs and extract --no-xattrs skip attributes; by default they round-trip; list --json shows them")
    func commandLineFlags() throws {
        let work = try TemporaryDirectory(prefix: "cairn-xattr")
        defer { work.remove() }
        let tree = try XattrTree.make(in: work.appending("src"))
        let with = work.appending("with.cairn")
        let without = work.appending("without.cairn")
        #expect(try CLI.run(["create", "-q", "-o", with, "tree"], in: work.appending("src")).status == 0)
        #expect(try CLI.run(["create", "-q", "--no-xattrs", "-o", without, "tree"], in: work.appending("src")).status == 0)
        #expect(try Self.entries(of: with)["tree/f.txt"]?.attribute("user.alpha") == Array("one".utf8))
        #expect(try Self.entries(of: without).values.allSatisfy { $0.extendedAttributes.isEmpty })

        let list = try CLI.run(["list", "--json", with])
        #expect(list.status == 0, "\(list.stderr)")
        let array = try #require(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]])
        let listed = try #require(array.first { $0["path"] as? String == "tree/f.txt" })
        let xattrs = try #require(listed["xattrs"] as? [[String: String]])
        #expect(xattrs.first(where: { $0["name"] == "user.binary" })?["value"] == Data([0, 0xFF, 0x0A, 0]).base64EncodedString())
        #expect(array.first { $0["path"] as? String == "tree/plain.txt" }?["xattrs"] == nil, "no key without attributes")

        let plain = try CLI.run(["extract", with, "-C", work.appending("out")])
        #expect(plain.status == 0, "\(plain.stderr)")
        #expect(Xattr.get(work.appending("out/tree/f.txt"), "user.alpha") == Array("one".utf8))
        let skipped = try CLI.run(["extract", "--no-xattrs", with, "-C", work.appending("skipped")])
        #expect(skipped.status == 0, "\(skipped.stderr)")
        #expect(try Xattr.names(work.appending("skipped/tree/f.txt")) == [])
        let streamed = try CLI.run(["extract", "--no-xattrs", "-", "-C", work.appending("streamed")], standardInput: with)
        #expect(streamed.status == 0, "\(streamed.stderr)")
        #expect(try Xattr.names(work.appending("streamed/tree/f.txt")) == [])
        _ = tree
    }

    @Test("cairn create: an attribute past the limit is a warning naming file and attribute, exit 3")
    func commandLineCreateWarning() throws {
        let work = try TemporaryDirectory(prefix: "cairn-xattr")
        defer { work.remove() }
        let path = work.appending("many")
        try RawFileSystem.writeFile(Array(path.utf8), [])
        for i in 0..<129 { try Xattr.set(path, "user.b\(String(format: "%03d", i))", [1]) }
        let last = try #require(try Xattr.names(path).last)
        let result = try CLI.run(["create", "-q", "-o", work.appending("a.cairn"), "many"], in: work.path)
        #expect(result.status == 3, "\(result.stderr)")
        #expect(result.stderr.contains("cairn: warning: many: extended attribute \(last) is past the limit of 128"), "\(result.stderr)")
    }

    @Test("cairn extract: an attribute the destination refuses is a warning, exit 3, for both readers")
    func commandLineExtractWarning() throws {
        let work = try TemporaryDirectory(prefix: "cairn-xattr")
        defer { work.remove() }
        try #require(Xattr.refusesLargeValues(in: work.path), "this test needs a file system that refuses 60 KiB values (ext4)")
        let archive = work.appending("big.cairn")
        try Data(try Self.archiveWithLargeValue()).write(to: URL(fileURLWithPath: archive))
        let seekable = try CLI.run(["extract", "-q", archive, "-C", work.appending("seekable")])
        let streamed = try CLI.run(["extract", "-q", "-", "-C", work.appending("streamed")], standardInput: archive)
        for result in [seekable, streamed] {
            #expect(result.status == 3, "\(result.stderr)")
            #expect(result.stderr.hasPrefix("cairn: warning: big.txt: cannot set extended attribute user.big: "), "\(result.stderr)")
        }
        #expect(FileManager.default.fileExists(atPath: work.appending("seekable/big.txt")))
        #expect(FileManager.default.fileExists(atPath: work.appending("streamed/big.txt")))
    }

    @Test(
        "as a user: trusted.* is refused with a warning and exit 3; user.* is set before a read-only mode",
        .enabled(if: geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")))
    func commandLineUnprivileged() throws {
        let work = try TemporaryDirectory(prefix: "cairn-xattr")
        defer { work.remove() }
        chmod(work.path, 0o755)
        let tree = try XattrTree.make(in: work.appending("src"))
        let archive = work.appending("a.cairn")
        #expect(try CLI.run(["create", "-q", "-o", archive, "tree"], in: work.appending("src")).status == 0)
        chmod(archive, 0o644)
        let drop = ["--reuid=65534", "--regid=65534", "--clear-groups"]
        let cairn = try ChildProcess.cairnExecutable(besideBundle: Bundle.module.bundleURL).path
        // Everything (read front to back), a selection (the seekable writer), standard input.
        for (mode, operands) in [("all", [archive]), ("selection", [archive, "tree"]), ("stdin", ["-"])] {
            let destination = work.appending(mode)
            mkdir(destination, 0o777)
            chmod(destination, 0o777)
            let result = try ChildProcess.run(
                URL(fileURLWithPath: "/usr/bin/setpriv"),
                drop + [cairn, "extract", "-q"] + operands + ["-C", destination + "/x"],
                standardInput: mode == "stdin" ? archive : nil)
            #expect(result.status == 3, "\(result.stderr)")
            let lines = result.stderr.split(separator: "\n").map(String.init).sorted()
            #expect(
                lines == [
                    "cairn: warning: tree/f.txt: cannot set extended attribute trusted.secret: Operation not permitted",
                    "cairn: warning: tree/link: cannot set extended attribute trusted.link: Operation not permitted",
                ], "\(result.stderr)")
            let out = destination + "/x/tree"
            // Set before the mode 0o444: afterwards the kernel would refuse it (EACCES).
            #expect(Xattr.get(out + "/readonly.txt", "user.ro") == Array("r".utf8))
            #expect(Xattr.get(out + "/f.txt", "user.alpha") == Array("one".utf8))
            #expect(Xattr.get(out + "/f.txt", "trusted.secret") == nil)
        }
        _ = tree
    }

    @Test(
        "security.capability is restored as root and silently left out as a user, like set-ID bits",
        .enabled(if: geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")))
    func capabilityOnlyAsRoot() throws {
        let work = try TemporaryDirectory(prefix: "cairn-xattr")
        defer { work.remove() }
        chmod(work.path, 0o755)
        // vfs_cap_data revision 2: CAP_NET_BIND_SERVICE (bit 10) permitted, nothing inherited.
        let capability: [UInt8] = [0, 0, 0, 2, 0x00, 0x04, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        let archive = work.appending("cap.cairn")
        try Data(
            try Self.archiveWithOneFile(
                named: "tool", attributes: [.init(name: Array("security.capability".utf8), value: capability)])
        ).write(to: URL(fileURLWithPath: archive))
        chmod(archive, 0o644)

        let asRoot = try CLI.run(["extract", "-q", archive, "-C", work.appending("root")])
        #expect(asRoot.status == 0, "\(asRoot.stderr)")
        #expect(Xattr.get(work.appending("root/tool"), "security.capability") != nil, "set after the content, which would clear it")

        let destination = work.appending("user")
        mkdir(destination, 0o777)
        chmod(destination, 0o777)
        let cairn = try ChildProcess.cairnExecutable(besideBundle: Bundle.module.bundleURL).path
        let asUser = try ChildProcess.run(
            URL(fileURLWithPath: "/usr/bin/setpriv"),
            ["--reuid=65534", "--regid=65534", "--clear-groups", cairn, "extract", "-q", archive, "-C", destination + "/x"])
        // Attempted, it would be refused (EPERM without CAP_SETFCAP): a warning and exit 3.
        #expect(asUser.status == 0, "\(asUser.stderr)")
        #expect(asUser.stderr.isEmpty, "\(asUser.stderr)")
        #expect(Xattr.get(destination + "/x/tool", "security.capability") == nil)
        #expect(Xattr.get(destination + "/x/tool", "user.kept") == Array("k".utf8))
    }

    // MARK: - Helpers

    @discardableResult
    static func archive(_ source: String, to archive: String, configuration: Archiver.Configuration = Archiver.Configuration())
        async throws -> ExportProperties
    {
        let archiver = try await Archiver(writingTo: .file(path: archive), configuration: configuration)
        try await archiver.appendItem(at: URL(fileURLWithPath: source))
        return try await archiver.finish()
    }

    /// The entries of `archive` (its manifest rows, checked against the entry records when
    /// opened), by path.
    static func entries(of archive: String) throws -> [String: ArchiveEntry] {
        let extractor = try Extractor(reader: ArchiveReader(path: archive))
        defer { extractor.close() }
        return Dictionary(uniqueKeysWithValues: extractor.entries.map { ($0.path, $0) })
    }

    /// One file, `big.txt`, with `user.small` and a 60 KiB `user.big` (within the format's
    /// limits, over what ext4 holds without `ea_inode`).
    static func archiveWithLargeValue() throws -> [UInt8] {
        try archiveWithOneFile(
            named: "big.txt",
            attributes: [
                .init(name: Array("user.big".utf8), value: [UInt8](repeating: 0x42, count: 60 * 1024)),
                .init(name: Array("user.small".utf8), value: Array("s".utf8)),
            ])
    }

    /// One file `name` holding `content`, with `attributes` and `user.kept`, written by the
    /// package-level ``ArchiveWriter`` (which checks only the format's limits).
    static func archiveWithOneFile(named name: String, attributes: [ArchiveEntry.ExtendedAttribute]) throws -> [UInt8] {
        let writer = try ArchiveWriter(header: ArchiveHeader())
        let content = Array("content".utf8)
        try writer.beginEntry(
            ArchiveEntry(
                pathBytes: Array(name.utf8), kind: .file, permissions: 0o755, modificationTime: 1_000,
                size: UInt64(content.count),
                extendedAttributes: attributes + [.init(name: Array("user.kept".utf8), value: Array("k".utf8))]))
        try content.withUnsafeBytes { raw in
            try writer.appendChunk(id: try SHA256.hash(content), rawLength: content.count, codec: .none, stored: raw)
        }
        try writer.endFile()
        try writer.finish()
        return writer.takeOutput()
    }
}

/// `tree/` with attributes on files, directories and (as root) a symlink, and files without.
private struct XattrTree {
    let root: String

    static func make(in parent: String) throws -> XattrTree {
        let root = parent + "/tree"
        try FileManager.default.createDirectory(atPath: root + "/sub", withIntermediateDirectories: true)
        try RawFileSystem.writeFile(Array((root + "/f.txt").utf8), Array("hello\n".utf8))
        try RawFileSystem.writeFile(Array((root + "/plain.txt").utf8), Array("plain\n".utf8))
        try RawFileSystem.writeFile(Array((root + "/readonly.txt").utf8), Array("ro\n".utf8))
        try RawFileSystem.writeFile(Array((root + "/sub/deep.txt").utf8), Array("deep\n".utf8))
        symlink("f.txt", root + "/link")
        try Xattr.set(root + "/f.txt", "user.alpha", Array("one".utf8))
        try Xattr.set(root + "/f.txt", "user.binary", [0, 0xFF, 0x0A, 0])
        try Xattr.set(root + "/f.txt", "user.empty", [])
        try Xattr.set(root, "user.directory", Array("D".utf8))
        try Xattr.set(root + "/sub", "user.deep", Array("x".utf8))
        try Xattr.set(root + "/readonly.txt", "user.ro", Array("r".utf8))
        chmod(root + "/readonly.txt", 0o444)
        if geteuid() == 0 {
            try Xattr.set(root + "/f.txt", "trusted.secret", Array("T".utf8))
            try Xattr.set(root + "/link", "trusted.link", Array("L".utf8))
        }
        return XattrTree(root: root)
    }
}

extension ArchiveEntry {
    fileprivate func attribute(_ name: String) -> [UInt8]? {
        extendedAttributes.first { $0.name == Array(name.utf8) }?.value
    }
}

/// Collects ``ExtractionOptions/onWarning`` calls.
private final class WarningBox: Sendable {
    private let warnings = Mutex<[CairnError]>([])
    func append(_ warning: CairnError) { warnings.withLock { $0.append(warning) } }
    var all: [CairnError] { warnings.withLock { $0 } }
}

/// The C library's `l*xattr` calls, never following a symlink, found with `dlsym` (Swift's Glibc
/// module does not import `<sys/xattr.h>`).
enum Xattr {
    private typealias SetCall = @convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafeRawPointer?, Int, Int32) -> Int32
    private typealias GetCall = @convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafeMutableRawPointer?, Int) -> Int
    private typealias ListCall = @convention(c) (UnsafePointer<CChar>?, UnsafeMutablePointer<CChar>?, Int) -> Int

    private static func call<T>(_ name: String, as type: T.Type) throws -> T {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) else {
            throw CairnError(.notFound, "\(name) not found in the C library")
        }
        return unsafeBitCast(symbol, to: type)
    }

    static func set(_ path: String, _ name: String, _ value: [UInt8]) throws {
        let lsetxattr = try call("lsetxattr", as: SetCall.self)
        let rc = value.withUnsafeBytes { lsetxattr(path, name, $0.baseAddress, $0.count, 0) }
        guard rc == 0 else { throw CairnError(.io, "lsetxattr \(name)", path: path, cause: String(cString: strerror(errno))) }
    }

    /// The value, or nil when the item has no such attribute.
    static func get(_ path: String, _ name: String) -> [UInt8]? {
        guard let lgetxattr = try? call("lgetxattr", as: GetCall.self) else { return nil }
        var buffer = [UInt8](repeating: 0, count: 65536)
        let n = buffer.withUnsafeMutableBytes { lgetxattr(path, name, $0.baseAddress, $0.count) }
        return n < 0 ? nil : Array(buffer[0..<n])
    }

    /// The names `llistxattr` gives, in its order.
    static func names(_ path: String) throws -> [String] {
        let llistxattr = try call("llistxattr", as: ListCall.self)
        var buffer = [CChar](repeating: 0, count: 65536)
        let n = buffer.withUnsafeMutableBufferPointer { llistxattr(path, $0.baseAddress, $0.count) }
        guard n >= 0 else { throw CairnError(.io, "llistxattr", path: path, cause: String(cString: strerror(errno))) }
        return buffer[0..<n].split(separator: 0).map { String(decoding: $0.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
    }

    /// Whether the file system of `directory` refuses a 60 KiB value (ext4 without `ea_inode`
    /// holds one block of attributes).
    static func refusesLargeValues(in directory: String) -> Bool {
        let probe = directory + "/.probe"
        defer { unlink(probe) }
        guard (try? RawFileSystem.writeFile(Array(probe.utf8), [])) != nil else { return false }
        return (try? set(probe, "user.probe", [UInt8](repeating: 0, count: 60 * 1024))) == nil
    }
}

private enum CLI {
    static func run(_ arguments: [String], in directory: String? = nil, standardInput: String? = nil) throws
        -> ChildProcess.Result
    {
        try ChildProcess.run(
            ChildProcess.cairnExecutable(besideBundle: Bundle.module.bundleURL), arguments, in: directory,
            standardInput: standardInput)
    }
}
