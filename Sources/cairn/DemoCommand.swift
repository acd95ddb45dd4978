import Cairn
import Foundation

/// `cairn demo`: placeholder until the sample corpus lands.
enum DemoCommand {
    static let usage = "usage: cairn demo [--size-mib N] [--keep DIR]"
    static func run(_ raw: [[UInt8]]) async throws -> ExitStatus { .success }
}
