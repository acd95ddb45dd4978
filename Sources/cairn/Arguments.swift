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
    }

    func flag(_ names: String...) -> Bool { names.contains { flags.contains($0) } }

    func value(_ names: String...) -> String? {
        for name in names { if let v = values[name]?.last { return v } }
        return nil
    }

    func allValues(_ name: String) -> [String] { values[name] ?? [] }

    /// The raw bytes given for a valued option (for paths).
    func rawValue(_ names: String...) -> [UInt8]? {
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
