import Glibc

// Raw argument bytes, so file names that are not UTF-8 survive.
var rawArguments: [[UInt8]] = []
for index in 1..<Int(CommandLine.argc) {
    guard let pointer = CommandLine.unsafeArgv[index] else { continue }
    rawArguments.append(Array(UnsafeBufferPointer(start: UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self), count: strlen(pointer))))
}
let status = await CommandLineTool.run(rawArguments)
exit(status.rawValue)
