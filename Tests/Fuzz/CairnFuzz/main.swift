import Foundation
import Glibc

#if FUZZING
import CFuzzer
#endif

// cairn-fuzz: libFuzzer targets for Cairn's parsers (see Tests/Fuzz/README.md).
//
//   CAIRN_FUZZ_TARGET=records|manifest|extract|entries|keys|age|sealed cairn-fuzz [libFuzzer options] [CORPUS_DIR...]
//
// Built with -sanitize=fuzzer and -DFUZZING it runs libFuzzer's driver. Built normally, it
// replays the files and directories named on the command line through the same target, so the
// plain build doubles as a regression runner for the corpus and the kept crashers.

nonisolated(unsafe) var selectedTarget = FuzzTarget.records

let environment = ProcessInfo.processInfo.environment
if let name = environment["CAIRN_FUZZ_TARGET"] {
    guard let target = FuzzTarget(rawValue: name) else {
        FileHandle.standardError.write(Data("cairn-fuzz: unknown target \(name); use records, manifest, extract, entries, keys, age or sealed\n".utf8))
        exit(2)
    }
    selectedTarget = target
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    selectedTarget.run(UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size))
    return 0
}

#if FUZZING
var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzOneInput(data, size) })
#else
var replayed = 0
for argument in CommandLine.arguments.dropFirst() where !argument.hasPrefix("-") {
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: argument, isDirectory: &isDirectory) else { continue }
    let files = isDirectory.boolValue
        ? ((try? FileManager.default.contentsOfDirectory(atPath: argument)) ?? []).sorted().map { argument + "/" + $0 }
        : [argument]
    for file in files {
        guard let data = FileManager.default.contents(atPath: file) else { continue }
        data.withUnsafeBytes { raw in
            _ = fuzzOneInput(raw.bindMemory(to: UInt8.self).baseAddress, raw.count)
        }
        replayed += 1
    }
}
print("cairn-fuzz: \(selectedTarget.rawValue): replayed \(replayed) inputs without a crash")
try? FileManager.default.removeItem(atPath: FuzzScratch.shared.root)
#endif
