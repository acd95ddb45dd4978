import Cairn
import Glibc
import Synchronization

/// Signing keys and trusted public keys named on the command line, and their passwords
/// (`Spec/0003-command-line.md §14`): one place for every command that signs or checks.
enum KeyOptions {
    /// The environment variable naming a file whose first line is the secret key's password.
    static let passwordFileVariable = "CAIRN_KEY_PASSWORD_FILE"
    /// The longest password read, in bytes (minisign's `PASSWORDMAXBYTES`).
    static let passwordByteLimit = 1024

    /// The signing key in the minisign secret key file at `path`, asking for its password when
    /// it is encrypted: from the file `CAIRN_KEY_PASSWORD_FILE` names, else on the terminal.
    ///
    /// - Throws: `CairnError` naming the file (exit 1): unreadable, not a secret key, wrong
    ///   password, or no password file and no terminal to ask on.
    static func signingKey(atPath path: String) throws -> SigningKey {
        guard try SigningKey.secretKeyFileNeedsPassword(path) else {
            return try SigningKey.read(secretKeyFile: path, password: nil)
        }
        let password = try password(prompt: "Password for \(path): ", confirming: false)
        return try SigningKey.read(secretKeyFile: path, password: password)
    }

    /// The keys in the public key files at `paths` (each a minisign `.pub` file or a file of
    /// keys), in order.
    ///
    /// - Throws: `CairnError` naming the first file that cannot be read or holds no key (exit 1).
    static func trustedKeys(atPaths paths: [String]) throws(CairnError) -> [PublicKey] {
        var keys: [PublicKey] = []
        for path in paths { keys += try PublicKey.readKeys(fromFile: path) }
        return keys
    }

    /// `--trusted-key PUBFILE` (repeatable): the keys a reading command requires a signature by
    /// (`Spec/0004-trusted-archives.md §4`).
    static let trustedKeyOption = "--trusted-key"

    /// The keys `--trusted-key` names in `args`; empty when none is given.
    ///
    /// - Throws: as ``trustedKeys(atPaths:)``.
    static func trustedKeys(_ args: Arguments) throws(CairnError) -> [PublicKey] {
        try trustedKeys(atPaths: args.allValues(trustedKeyOption))
    }

    /// The help paragraph of `--trusted-key`, the same in every command that takes it.
    static let trustedKeyHelp = """
        --trusted-key PUBFILE
                    require the archive to be signed by this minisign public key (repeatable:
                    any of them). An archive that is not signed, or signed by another key, is
                    refused (exit 1, naming the key ids), and nothing is written; only what a
                    verified signature covers is used (Spec/0004 §4).
        """

    /// A password: the first line of the file `CAIRN_KEY_PASSWORD_FILE` names (without its line
    /// end), else typed on the terminal (`/dev/tty`) without echo, twice when `confirming`.
    ///
    /// - Throws: `CairnError` `.invalidArgument` when there is neither a password file nor a
    ///   terminal, or the two typed passwords differ; `.io` naming the file when it cannot be read.
    static func password(prompt: String, confirming: Bool) throws -> [UInt8] {
        if let file = getenv(passwordFileVariable).map({ String(cString: $0) }), !file.isEmpty {
            let text = try SmallFile.read(file, limit: passwordByteLimit * 4, what: "password file")
            var line = Array(text.prefix { $0 != UInt8(ascii: "\n") })
            if line.last == UInt8(ascii: "\r") { line.removeLast() }
            guard line.count <= passwordByteLimit else {
                throw CairnError(.limitExceeded, "the password is longer than \(passwordByteLimit) bytes", path: file)
            }
            return line
        }
        let first = try TerminalPassword.read(prompt: prompt)
        if confirming {
            let second = try TerminalPassword.read(prompt: "Password (one more time): ")
            guard first == second else { throw CairnError(.invalidArgument, "the passwords do not match") }
        }
        return first
    }
}

/// A password typed on the controlling terminal with echo turned off.
///
/// Ctrl-C at the prompt (SIGINT, or SIGTERM) restores the echo at once (``restoreEcho()``,
/// called by ``Interruption``, whose handler gets the signal, not this thread), and the read
/// ends within 0.1 s, so the terminal is never left silent, even by the forced exit.
enum TerminalPassword {
    /// The terminal a prompt silenced and its settings before, while a prompt is open.
    private static let silenced = Mutex<(descriptor: Int32, saved: termios)?>(nil)

    /// Puts back the echo a prompt turned off, if one is open; harmless otherwise.
    static func restoreEcho() {
        silenced.withLock { open in
            guard var open else { return }
            _ = tcsetattr(open.descriptor, TCSANOW, &open.saved)
        }
    }

    /// What ``read(prompt:withoutTerminal:)`` says by default without a terminal.
    static let keyPasswordWithoutTerminal =
        "the secret key needs a password and there is no terminal to ask it on; set \(KeyOptions.passwordFileVariable) to a file holding it"

    /// Prints `prompt` on `/dev/tty`, reads one line without echo, and restores the terminal.
    ///
    /// - Parameters:
    ///   - prompt: what is asked.
    ///   - withoutTerminal: the error's message when the process has no terminal: what is asked
    ///     for and how to give it instead (a key's password by default).
    /// - Throws: `CairnError` `.invalidArgument` when the process has no terminal, or when a
    ///   signal interrupted the prompt; `.limitExceeded` for a line over 1024 bytes.
    static func read(prompt: String, withoutTerminal: String = keyPasswordWithoutTerminal) throws(CairnError) -> [UInt8] {
        let tty = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY)
        guard tty >= 0, isatty(tty) == 1 else {
            if tty >= 0 { close(tty) }
            throw CairnError(.invalidArgument, withoutTerminal)
        }
        defer { close(tty) }
        var saved = termios()
        let canSilence = tcgetattr(tty, &saved) == 0
        if canSilence {
            var silent = saved
            silent.c_lflag &= ~tcflag_t(ECHO)
            silenced.withLock { $0 = (tty, saved) }
            _ = tcsetattr(tty, TCSANOW, &silent)
        }
        defer {
            if canSilence {
                silenced.withLock { $0 = nil }
                _ = tcsetattr(tty, TCSANOW, &saved)
            }
            _ = write(tty, "\n", 1)
        }
        _ = prompt.utf8CString.withUnsafeBufferPointer { write(tty, $0.baseAddress, $0.count - 1) }
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            // Wait at most 0.1 s at a time, so that a signal (which Interruption handles on
            // another thread) ends the prompt instead of leaving it blocked.
            var ready = pollfd(fd: tty, events: Int16(POLLIN), revents: 0)
            let polled = poll(&ready, 1, 100)
            if Interruption.isInterrupted {
                line.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) }
                throw CairnError(.invalidArgument, "interrupted at the password prompt")
            }
            if polled == 0 || (polled < 0 && errno == EINTR) { continue }
            let count = Glibc.read(tty, &byte, 1)
            if count < 0, errno == EINTR { continue }
            if count <= 0 || byte == UInt8(ascii: "\n") { break }
            line.append(byte)
            guard line.count <= KeyOptions.passwordByteLimit else {
                throw CairnError(.limitExceeded, "the password is longer than \(KeyOptions.passwordByteLimit) bytes")
            }
        }
        if line.last == UInt8(ascii: "\r") { line.removeLast() }
        return line
    }
}
