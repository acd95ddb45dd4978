import Cairn
import Foundation
import Glibc

/// Runs an executable (in the tests: the built `cairn`) as a child process, with its standard
/// output and error captured through files, so a large output can never fill a pipe.
public enum ChildProcess {
    /// What a finished child left.
    public struct Result: Sendable {
        public var status: Int32
        /// Whether a signal ended it (SIGKILL from a test, say).
        public var killed: Bool
        public var stdoutBytes: [UInt8]
        public var stderr: String
        public var stdout: String { String(decoding: stdoutBytes, as: UTF8.self) }
        /// Standard output split into lines, without the empty string after a final newline.
        public var stdoutLines: [String] {
            let lines = stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            return lines.last == "" ? Array(lines.dropLast()) : lines
        }
    }

    /// A started child.
    public final class Child {
        public let process: Process
        private let io: URL
        public var pid: pid_t { process.processIdentifier }

        init(process: Process, io: URL) {
            self.process = process
            self.io = io
        }

        /// What the child has written to standard error so far, while it runs: lines a test can
        /// wait for.
        public var stderrSoFar: String {
            let err = (try? Data(contentsOf: io.appendingPathComponent("stderr"))) ?? Data()
            return String(decoding: err, as: UTF8.self)
        }

        /// Waits for the child and collects its output.
        public func wait() -> Result {
            process.waitUntilExit()
            defer { try? FileManager.default.removeItem(at: io) }
            let out = (try? Data(contentsOf: io.appendingPathComponent("stdout"))) ?? Data()
            let err = (try? Data(contentsOf: io.appendingPathComponent("stderr"))) ?? Data()
            return Result(
                status: process.terminationStatus, killed: process.terminationReason == .uncaughtSignal,
                stdoutBytes: Array(out), stderr: String(decoding: err, as: UTF8.self))
        }
    }

    /// The `cairn` executable built next to a test bundle (`Bundle.module.bundleURL`).
    ///
    /// - Throws: `CairnError.notFound` naming where it looked.
    public static func cairnExecutable(besideBundle bundle: URL) throws -> URL {
        let candidates = [
            bundle.deletingLastPathComponent().appendingPathComponent("cairn"),
            Bundle.main.bundleURL.appendingPathComponent("cairn"),
        ]
        for candidate in candidates where FileManager.default.isExecutableFile(atPath: candidate.path) {
            return candidate
        }
        throw CairnError(
            .notFound,
            "the cairn executable was not found at \(candidates.map(\.path).joined(separator: " or ")); build it with 'swift build --build-tests' (the test target depends on it)"
        )
    }

    /// Starts `executable arguments` in `directory`.
    ///
    /// - Parameters:
    ///   - standardInput: a file to read standard input from; /dev/null when nil.
    ///   - fileSizeLimitKiB: run under `ulimit -f` (units of 1024 bytes), through bash.
    ///   - environment: variables set (or replaced) in the child's environment, which is
    ///     otherwise this process's.
    public static func start(
        _ executable: URL, _ arguments: [String], in directory: String? = nil, standardInput: String? = nil,
        fileSizeLimitKiB: Int? = nil, environment: [String: String] = [:]
    ) throws -> Child {
        let io = FileManager.default.temporaryDirectory.appendingPathComponent("cairn-child-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: io, withIntermediateDirectories: true)
        let outURL = io.appendingPathComponent("stdout")
        let errURL = io.appendingPathComponent("stderr")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        let process = Process()
        if let fileSizeLimitKiB {
            process.executableURL = URL(fileURLWithPath: "/bin/bash")
            process.arguments = ["-c", "ulimit -f \(fileSizeLimitKiB) && exec \"$0\" \"$@\"", executable.path] + arguments
        } else {
            process.executableURL = executable
            process.arguments = arguments
        }
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, given in given }
        }
        process.standardInput =
            try standardInput.map { try FileHandle(forReadingFrom: URL(fileURLWithPath: $0)) } ?? FileHandle.nullDevice
        let out = try FileHandle(forWritingTo: outURL)
        let err = try FileHandle(forWritingTo: errURL)
        defer {
            try? out.close()
            try? err.close()
        }
        process.standardOutput = out
        process.standardError = err
        try process.run()
        return Child(process: process, io: io)
    }

    /// Runs `executable arguments` to completion; a child still running after `timeout` seconds
    /// (a generous bound against hangs, ``Await/safetyBound`` by default) is killed, and that throws.
    public static func run(
        _ executable: URL, _ arguments: [String], in directory: String? = nil, standardInput: String? = nil,
        fileSizeLimitKiB: Int? = nil, timeout: Double = Await.safetyBound, environment: [String: String] = [:]
    ) throws -> Result {
        let child = try start(
            executable, arguments, in: directory, standardInput: standardInput, fileSizeLimitKiB: fileSizeLimitKiB,
            environment: environment)
        return try child.wait(bound: timeout, for: "\(executable.lastPathComponent) \(arguments.joined(separator: " ")) ends")
    }
}
