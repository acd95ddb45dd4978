import Cairn
import Foundation

/// A small command-line parser: options (`-o X`, `--name X`, `--name=X`, flags) and operands,
/// operands kept as raw bytes.
struct Arguments {
    private var items: [[UInt8]]
    private(set) var operands: [[UInt8]] = []
    private var values: [String: [String]] = [:]
    private var flags: Set<String> = []

    /// Parses `items` knowing which options take a value; everything after `--` is an operand.
    init(_ items: [[UInt8]], valued: Set<String>, flags known: Set<String>) throws(UsageError) {
        self.items = items
        var index = 0
        var onlyOperands = false
        while index < items.count {
            let item = items[index]
            index += 1
            let text = String(decoding: item, as: UTF8.self)
            if onlyOperands || item.first != UInt8(ascii: "-") || item == [UInt8(ascii: "-")] {
                operands.append(item)
                continue
            }
            if text == "--" {
                onlyOperands = true
                continue
            }
            var name = text
            var inline: String?
            if text.hasPrefix("--"), let eq = text.firstIndex(of: "=") {
                name = String(text[..<eq])
                inline = String(text[text.index(after: eq)...])
            }
            if valued.contains(name) {
                if let inline {
                    values[name, default: []].append(inline)
                } else {
                    guard index < items.count else { throw UsageError("option \(name) needs a value") }
                    values[name, default: []].append(String(decoding: items[index], as: UTF8.self))
                    index += 1
                }
            } else if known.contains(name) {
                guard inline == nil else { throw UsageError("option \(name) takes no value") }
                flags.insert(name)
            } else {
                throw UsageError("unknown option \(name)")
            }
        }
        for (one, other) in Self.exclusive where (values[one] != nil || flags.contains(one)) && (values[other] != nil || flags.contains(other)) {
            throw UsageError("give \(one) or \(other), not both")
        }
        try EncryptionOptions.refuseSharedStandardInput(identities: values[EncryptionOptions.identityOption] ?? [], operands: operands)
    }

    /// Options that say the same thing two ways, of which a command line gives one at most.
    static let exclusive = [(EncryptionOptions.passphraseFileOption, EncryptionOptions.passphraseFlag)]

    func flag(_ names: String...) -> Bool { names.contains { flags.contains($0) } }

    func value(_ names: String...) -> String? {
        for name in names { if let v = values[name]?.last { return v } }
        return nil
    }

    func allValues(_ name: String) -> [String] { values[name] ?? [] }

    /// The raw bytes given for a valued option (for paths).
    func rawValue(_ names: String...) -> [UInt8]? { Self.rawValue(of: names, in: items) }

    /// The raw bytes given last for any of `names` (`-o X`, `--output X`, `--output=X`) in
    /// `items`, without parsing the rest: for looking at a command line from outside the command.
    static func rawValue(of names: [String], in items: [[UInt8]]) -> [UInt8]? {
        var index = 0
        var found: [UInt8]?
        while index < items.count {
            let text = String(decoding: items[index], as: UTF8.self)
            for name in names {
                if text == name, index + 1 < items.count { found = items[index + 1] }
                if text.hasPrefix(name + "="), name.hasPrefix("--") { found = Array(items[index].dropFirst(name.utf8.count + 1)) }
            }
            index += 1
        }
        return found
    }
}

/// Byte sizes given on the command line (`--max-output`, `--size-estimate`): the one parser.
enum ByteSize {
    /// Parses `200M`, `1G`, `64KiB`, `4096`: a whole number of bytes, optionally followed by
    /// `K`, `M`, `G`, `T` (or `KiB`, `MiB`, `GiB`, `TiB`, any case, also `k`/`KB`...), each a
    /// power of 1024. A plain number is bytes; `B` may follow it.
    ///
    /// - Returns: the size in bytes, or nil when the text is not a size or the value does not fit
    ///   in 64 bits.
    static func parse(_ text: String) -> UInt64? {
        let digits = text.prefix(while: { $0.isASCII && $0.isNumber })
        guard !digits.isEmpty, let number = UInt64(digits) else { return nil }
        let suffix = text.dropFirst(digits.count).lowercased()
        let shifts: [String: UInt64] = [
            "": 0, "b": 0, "k": 10, "kb": 10, "kib": 10, "m": 20, "mb": 20, "mib": 20,
            "g": 30, "gb": 30, "gib": 30, "t": 40, "tb": 40, "tib": 40,
        ]
        guard let shift = shifts[suffix] else { return nil }
        let (value, overflow) = number.multipliedReportingOverflow(by: 1 << shift)
        return overflow ? nil : value
    }

    /// The size given for `option` in `args`, if any.
    ///
    /// - Throws: `UsageError` naming the option when the value is not a size.
    static func value(_ option: String, in args: Arguments) throws(UsageError) -> UInt64? {
        guard let text = args.value(option) else { return nil }
        guard let size = parse(text) else {
            throw UsageError("\(option) takes a size in bytes, optionally with K, M, G or T (powers of 1024): got '\(text)'")
        }
        return size
    }
}

/// An ARCHIVE operand: a path, an `http://` / `https://` URL, or an `s3://BUCKET/KEY` object
/// (`Spec/0003-command-line.md §1.1`, §1.2).
enum ArchiveOperand {
    /// The option naming an object store's endpoint, taken by every command that reads or
    /// writes archives.
    static let endpointOption = "--s3-endpoint"

    /// The location `archive` names, with the endpoint `args` gives.
    ///
    /// - Throws: `CairnError` for a malformed `s3://` operand or missing credentials.
    static func location(_ archive: String, _ args: Arguments) throws(CairnError) -> ArchiveLocation {
        try ArchiveLocation(parsing: archive, s3Endpoint: args.value(endpointOption))
    }

    /// Opens `archive` for random access: a local file, or a URL or object through range
    /// requests (which an HTTP server must support; the error says which commands work without),
    /// `remote`'s connections in flight (`TransferOptions.remoteReading(_:)`).
    ///
    /// - Throws: `CairnError` naming the path or URL.
    /// Refuses an output archive path that names an existing directory, before anything is
    /// read or downloaded: `create -o` and `fetch -o` write a file there.
    ///
    /// - Throws: `CairnError` `.alreadyExists` naming the path (exit 1).
    static func refuseDirectoryOutput(_ output: String) throws(CairnError) {
        if (try? FileManager.default.attributesOfItem(atPath: output)[.type] as? FileAttributeType) == .typeDirectory {
            throw CairnError(.alreadyExists, "is a directory; -o names the archive file", path: output)
        }
    }

    static func open(_ archive: String, _ args: Arguments, remote: RemoteReadOptions = RemoteReadOptions()) async throws(CairnError) -> Extractor {
        try await Extractor(
            at: location(archive, args), trustedKeys: KeyOptions.trustedKeys(args), decryption: EncryptionOptions.decryption(args), remote: remote)
    }
}
