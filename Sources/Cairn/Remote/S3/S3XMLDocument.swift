import Foundation
import FoundationXML

/// A small XML document of an S3 answer (`InitiateMultipartUploadResult`, `ListPartsResult`,
/// `CompleteMultipartUploadResult`, `Error`), parsed with Foundation's `XMLParser` (libxml2) into
/// a tree of elements with their text. Namespaces are dropped: elements are found by local name.
package struct S3XMLDocument {
    /// One element: its local name, its text (the concatenated character data directly inside
    /// it, trimmed) and its child elements in order.
    final class Element {
        let name: String
        var text = ""
        var children: [Element] = []

        init(name: String) { self.name = name }

        /// The first child named `name`.
        func child(_ name: String) -> Element? { children.first { $0.name == name } }

        /// Every child named `name`.
        func children(named name: String) -> [Element] { children.filter { $0.name == name } }

        /// The text of the first child named `name`, or nil.
        func text(of name: String) -> String? { child(name)?.text }
    }

    /// `text` with the five XML special characters escaped (the one XML escaper of the
    /// package: the benchmark's SVG charts use it too).
    package static func escaped(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            default: out.append(character)
            }
        }
        return out
    }

    /// The root element.
    let root: Element

    /// Parses `bytes`, nil when they are not well-formed XML. Entities are not resolved from
    /// outside the document (the parser is told not to load external entities).
    init?(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return nil }
        let parser = XMLParser(data: Data(bytes))
        parser.shouldResolveExternalEntities = false
        parser.shouldProcessNamespaces = true
        let builder = Builder()
        parser.delegate = builder
        guard parser.parse(), let root = builder.root else { return nil }
        self.root = root
    }

    private final class Builder: NSObject, XMLParserDelegate {
        var root: Element?
        var stack: [Element] = []

        func parser(
            _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            let local = elementName.split(separator: ":").last.map(String.init) ?? elementName
            let element = Element(name: local)
            if let parent = stack.last { parent.children.append(element) } else if root == nil { root = element }
            stack.append(element)
        }

        func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
            if let element = stack.popLast() { element.text = element.text.trimmingCharacters(in: .whitespacesAndNewlines) }
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            stack.last?.text += string
        }
    }
}
