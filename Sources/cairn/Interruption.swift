import Cairn
import Dispatch
import Foundation
import Glibc
import Synchronization

/// SIGINT and SIGTERM during a command (`Spec/0003-command-line.md §2`): the running command's
/// task is cancelled (the library throws `CancellationError` and leaves a resumable state), and
/// one line says what was kept, where, and the exact command that continues it. The exit status
/// is 128 + the signal number: 130 for SIGINT, 143 for SIGTERM.
///
/// Once a signal arrived, ``Output`` prints nothing more, so the line from ``report(_:)`` is the
/// only one after it (the cancelled command's own "cancelled" error is not shown).
enum Interruption {
    /// How a command run under ``run(grace:_:)`` ended.
    enum Outcome: Sendable {
        /// It returned this status without a signal (or completed despite one).
        case finished(ExitStatus)
        /// A signal (its number) stopped it.
        case interrupted(signal: Int32)
    }

    /// The first signal received, 0 before any.
    private static let received = Mutex<Int32>(0)

    /// Whether SIGINT or SIGTERM has arrived.
    static var isInterrupted: Bool { received.withLock { $0 != 0 } }

    /// Runs `body` as a task; on the first SIGINT or SIGTERM cancels it and waits for it at most
    /// `grace` seconds (a task blocked reading a pipe cannot notice its cancellation; what it
    /// kept on disk is as resumable as after a kill). A second signal stops waiting at once.
    ///
    /// - Parameters:
    ///   - grace: seconds to wait for the cancelled task to return.
    ///   - body: the command.
    /// - Returns: ``Outcome/finished(_:)`` when the command returned and no signal came, or it
    ///   completed (status 0 or 3) although one came; ``Outcome/interrupted(signal:)`` otherwise.
    static func run(grace: Double = 2, _ body: @escaping @Sendable () async -> ExitStatus) async -> Outcome {
        // The default action would end the process at once; ignore it and watch with Dispatch.
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        let (outcomes, continuation) = AsyncStream.makeStream(of: Outcome.self, bufferingPolicy: .bufferingOldest(1))
        let work = Task {
            let status = await body()
            let signal = received.withLock { $0 }
            let completed = status.rawValue == ExitStatus.success.rawValue || status.rawValue == ExitStatus.warnings.rawValue
            continuation.yield(signal == 0 || completed ? .finished(status) : .interrupted(signal: signal))
        }
        var sources: [any DispatchSourceSignal] = []
        for number in [SIGINT, SIGTERM] {
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                let first = received.withLock { value -> Bool in
                    guard value == 0 else { return false }
                    value = number
                    return true
                }
                guard first else {
                    continuation.yield(.interrupted(signal: received.withLock { $0 }))
                    return
                }
                // A password prompt's thread may be blocked: give the terminal its echo back now.
                TerminalPassword.restoreEcho()
                work.cancel()
                DispatchQueue.global().asyncAfter(deadline: .now() + grace) {
                    continuation.yield(.interrupted(signal: number))
                }
                // If even that cannot be handled (every thread of the cooperative pool blocked in
                // a system call, a stalled server say), end the process from here: what is on disk
                // is as resumable as after a kill.
                DispatchQueue.global().asyncAfter(deadline: .now() + grace + 3) {
                    let text = lastResort.withLock { $0 }?() ?? "cairn: interrupted; what was verified is kept: run the same command again to continue"
                    FileHandle.standardError.write(Data((text + "\n").utf8))
                    fflush(nil)
                    _exit(128 + number)
                }
            }
            source.resume()
            sources.append(source)
        }
        defer { for source in sources { source.cancel() } }
        for await outcome in outcomes { return outcome }
        return .finished(.failure)
    }

    /// The exit status for a signal: 128 + its number.
    static func exitStatus(for signal: Int32) -> ExitStatus { ExitStatus(rawValue: 128 + signal) }


    /// What ``report()`` prints; a command sets it once it knows what it would keep.
    private static let line = Mutex<(@Sendable () async -> String)?>(nil)

    /// What the process prints when it must end without waiting for the command (no task can
    /// run): made without `await`, so it says less than ``report()``'s line.
    private static let lastResort = Mutex<(@Sendable () -> String)?>(nil)

    /// Sets what the interruption line says (called by a command before its long work starts),
    /// and optionally the line said when the process must end before `make` can run.
    static func describe(lastResort quick: (@Sendable () -> String)? = nil, _ make: @escaping @Sendable () async -> String) {
        line.withLock { $0 = make }
        lastResort.withLock { $0 = quick }
    }

    /// Prints the one line after an interruption (erasing a progress bar on a terminal first).
    static func report() async {
        let make = line.withLock { $0 }
        let text = await make?() ?? "cairn: interrupted"
        let erase = Output.standardErrorIsTerminal ? "\r\u{1B}[K" : ""
        FileHandle.standardError.write(Data((erase + text + "\n").utf8))
    }

    /// The line for an interrupted `create`, from its raw arguments: the `.partial` kept and how
    /// much of it is committed (`Extractor.verifyPrefix`), and the `create --resume` command.
    static func createLine(_ arguments: [[UInt8]]) async -> String {
        guard let output = Arguments.rawValue(of: ["-o", "--output"], in: arguments), output != Array("-".utf8) else {
            return "cairn: interrupted; the archive written to standard output is incomplete and cannot be resumed"
        }
        let target = String(decoding: output, as: UTF8.self)
        if ArchiveLocation.kind(of: target) == .object {
            let given = Arguments.rawValue(of: ["--upload-state"], in: arguments).map { String(decoding: $0, as: UTF8.self) }
            let endpoint = Arguments.rawValue(of: [ArchiveOperand.endpointOption], in: arguments).map { String(decoding: $0, as: UTF8.self) }
            guard let statePath = try? CreateCommand.uploadStatePath(target, given: given, endpoint: endpoint),
                let state = try? MultipartUploadState.load(from: statePath)
            else {
                return "cairn: interrupted before the upload began; run again: \(continuation("create", arguments, resume: false))"
            }
            let sent = state.parts.reduce(0) { $0 + $1.size }
            return "cairn: interrupted; the multipart upload to \(target) is kept (\(state.parts.count) parts, \(Output.bytes(sent)), recorded in \(Shell.quoted(Array(statePath.utf8)))); continue with: "
                + continuation("create", arguments, resume: true)
        }
        let partial = ArchiveLocation.partialPath(of: target)
        guard FileManager.default.fileExists(atPath: partial) else {
            return "cairn: interrupted before anything was written; run again: \(continuation("create", arguments, resume: false))"
        }
        var committed = ""
        if let prefix = try? await Extractor.verifyPrefix(at: .file(path: partial)) {
            committed = " (\(Output.bytes(prefix.verifiedLength)) committed, \(Output.entries(prefix.entryCount)))"
        }
        return createResumeLine(arguments, output: output, committed: committed)
    }

    /// The line for an interrupted `create` to a file when the process must end at once
    /// (``describe(lastResort:_:)``): what ``createLine(_:)`` says without the committed size.
    static func createLastResortLine(_ arguments: [[UInt8]]) -> String {
        guard let output = Arguments.rawValue(of: ["-o", "--output"], in: arguments), output != Array("-".utf8),
            ArchiveLocation.kind(of: String(decoding: output, as: UTF8.self)) != .object,
            FileManager.default.fileExists(atPath: ArchiveLocation.partialPath(of: String(decoding: output, as: UTF8.self)))
        else { return "cairn: interrupted; what was verified is kept: run the same command again to continue" }
        return createResumeLine(arguments, output: output, committed: "")
    }

    /// "kept ARCHIVE.partial; continue with: cairn create --resume …", with the placeholder for
    /// an identity explained when the recipients were taken out (``resumingCreate(_:)``).
    private static func createResumeLine(_ arguments: [[UInt8]], output: [UInt8], committed: String) -> String {
        let resuming = resumingCreate(arguments)
        let identity =
            resuming.needsIdentity
            ? " (\(identityPlaceholder): an age identity file of one of its recipients)" : ""
        return "cairn: interrupted; kept \(Shell.quoted(ArchiveLocation.partialPath(of: output)))\(committed); continue with: "
            + continuation("create", resuming.arguments, resume: true) + identity
    }

    /// What stands for the identity file in a printed `create --resume` command.
    static let identityPlaceholder = "IDENTITY_FILE"

    /// The arguments of the `create --resume` that continues a `create` given `items`. An
    /// encrypted archive resumes with its own key block (`Spec/0004-trusted-archives.md §6.9`),
    /// and `--resume` refuses the options that make a new one: `--recipient`,
    /// `--recipients-file` and `--maker-key` are taken out with their values, and
    /// `--identity IDENTITY_FILE` stands where the first recipient was (`needsIdentity`), for
    /// the user to fill in. A passphrase's options are kept: they open the archive.
    static func resumingCreate(_ items: [[UInt8]]) -> (arguments: [[UInt8]], needsIdentity: Bool) {
        let dropped = [EncryptionOptions.recipientOption, EncryptionOptions.recipientsFileOption, EncryptionOptions.makerKeyOption]
        var kept: [[UInt8]] = []
        var needsIdentity = false
        var index = 0
        while index < items.count {
            let item = items[index]
            index += 1
            if item == Array("--".utf8) {
                kept += items[(index - 1)...]
                break
            }
            let text = String(decoding: item, as: UTF8.self)
            guard let name = dropped.first(where: { text == $0 || text.hasPrefix($0 + "=") }) else {
                kept.append(item)
                continue
            }
            if text == name { index += 1 }  // its value
            if name != EncryptionOptions.makerKeyOption, !needsIdentity {
                needsIdentity = true
                kept += [Array(EncryptionOptions.identityOption.utf8), Array(identityPlaceholder.utf8)]
            }
        }
        return (kept, needsIdentity)
    }

    /// The line for an interrupted `extract`: the staging directory kept and the
    /// `extract --resume` command.
    ///
    /// - Parameters:
    ///   - arguments: the command's raw arguments.
    ///   - staging: where `StagingLocation.path(for:)` puts the staging directory (computed
    ///     before the extraction started).
    ///   - fromStandardInput: whether the archive is `-` (the whole stream must be given again).
    static func extractLine(_ arguments: [[UInt8]], staging: [UInt8], fromStandardInput: Bool) -> String {
        var status = stat()
        let kept = staging.withNullTerminated { lstat($0, &status) } == 0
        guard kept else {
            return "cairn: interrupted before anything was staged; nothing was kept; run again: \(continuation("extract", arguments, resume: false))"
        }
        let again = fromStandardInput ? " (with the whole stream on standard input again)" : ""
        // A run that started over with --force is continued with --resume, which excludes it.
        let continuing = arguments.filter { $0 != Array("--force".utf8) && $0 != Array("-f".utf8) }
        return "cairn: interrupted; kept what verified in \(Shell.quoted(staging)); continue with: "
            + continuation("extract", continuing, resume: true) + again
    }
}

extension Interruption {
    /// The line for an interrupted `fetch` (§2.3's form): the partial file kept, and the same
    /// command (a rerun continues a fetch; it has no `--resume`).
    static func fetchLine(_ arguments: [[UInt8]], partial: String) -> String {
        "cairn: interrupted; kept what verified in \(Shell.quoted(Array(partial.utf8))); continue with: "
            + continuation("fetch", arguments, resume: false)
    }
}

/// `cairn COMMAND --resume ARGS...` (or without `--resume`) with every argument shell-quoted
/// and `--resume` given once: the command to paste to continue.
private func continuation(_ name: String, _ items: [[UInt8]], resume: Bool) -> String {
    let rest = items.filter { $0 != Array("--resume".utf8) }
    return (["cairn", name] + (resume ? ["--resume"] : []) + rest.map(Shell.quoted)).joined(separator: " ")
}

/// Quoting for commands printed for the user to paste.
enum Shell {
    /// `bytes` as one shell word: as it is when it holds only safe characters, else in single
    /// quotes (a `'` written `'\''`); bytes that are not UTF-8 are written with `$'\xHH'`.
    static func quoted(_ bytes: [UInt8]) -> String {
        let safe = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%".utf8)
        if !bytes.isEmpty, bytes.allSatisfy(safe.contains) { return String(decoding: bytes, as: UTF8.self) }
        if String(validating: bytes, as: UTF8.self) == nil {
            return "$'" + bytes.map { String(format: "\\x%02x", $0) }.joined() + "'"
        }
        return "'" + String(decoding: bytes, as: UTF8.self).replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}
