import Foundation
import Testing

/// Replays the fuzz seed corpus and every kept crasher through the three fuzz targets with the
/// plain build of `cairn-fuzz` (Tests/Fuzz/README.md), so a fixed crash stays fixed.
@Suite("Fuzz corpus replay")
struct FuzzCorpusTests {
    static var fuzzBinary: URL {
        Bundle.module.bundleURL.deletingLastPathComponent().appendingPathComponent("cairn-fuzz")
    }

    static var fuzzDirectory: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fuzz")
    }

    @Test("Every seed and every kept crasher passes each target", arguments: ["records", "manifest", "extract"])
    func replay(target: String) throws {
        let binary = Self.fuzzBinary
        try #require(FileManager.default.isExecutableFile(atPath: binary.path), "cairn-fuzz not built at \(binary.path)")
        let corpus = Self.fuzzDirectory.appendingPathComponent("Corpus").path
        let crashers = Self.fuzzDirectory.appendingPathComponent("Crashers").path
        let seeds = try FileManager.default.contentsOfDirectory(atPath: corpus).filter { !$0.hasPrefix(".") }
        #expect(seeds.count >= 5, "the seed corpus is missing")
        let process = Process()
        process.executableURL = binary
        process.arguments = [corpus, crashers]
        var environment = ProcessInfo.processInfo.environment
        environment["CAIRN_FUZZ_TARGET"] = target
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(text)")
        #expect(text.contains("replayed"), "\(text)")
    }
}
