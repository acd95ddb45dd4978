import Cairn
import Glibc

/// Recipients, identities and passphrases named on the command line (`Spec/0003-command-line.md
/// §14`, `Spec/0004-trusted-archives.md §6`): one place for `create` and every reading command.
enum EncryptionOptions {
    static let recipientOption = "--recipient"
    static let recipientsFileOption = "--recipients-file"
    static let identityOption = "--identity"
    static let passphraseFileOption = "--passphrase-file"
    static let passphraseFlag = "--passphrase"
    /// The valued options of a reading command.
    static let readingOptions: Set<String> = [identityOption, passphraseFileOption]
    /// The valued options of `create`.
    static let writingOptions: Set<String> = [recipientOption, recipientsFileOption, passphraseFileOption, makerKeyOption]
    /// `create --maker-key FILE`: the maker key file the chunk id and chunker keys are derived
    /// from (`Spec/0004 §6.5`).
    static let makerKeyOption = "--maker-key"

    /// What `create` encrypts for: `--recipient age1…` (repeatable), `--recipients-file FILE`
    /// (repeatable), or a passphrase (`--passphrase-file FILE`, or `--passphrase` to type it
    /// twice on the terminal); nil when none is given.
    ///
    /// - Throws: `CairnError` naming the bad recipient or file; `UsageError` for a passphrase
    ///   with recipients.
    static func encryption(_ args: Arguments) throws -> ArchiveEncryption? {
        var recipients: [AgeRecipient] = []
        for text in args.allValues(recipientOption) {
            // A recipient is public: the error repeats it (cut short), so the bad one is found.
            do throws(CairnError) { recipients.append(try AgeRecipient(text)) } catch {
                let shown = text.count > 80 ? text.prefix(80) + "..." : text
                throw CairnError(.invalidArgument, "\(recipientOption) '\(shown)': \(error.message)")
            }
        }
        for path in args.allValues(recipientsFileOption) { recipients += try AgeRecipient.readRecipients(fromFile: path) }
        let passphrase = try passphrase(args, confirming: true)
        if passphrase != nil, !recipients.isEmpty {
            throw UsageError("a passphrase cannot be combined with recipients (age's rule: a passphrase is the only way in)")
        }
        let makerKey = try args.value(makerKeyOption).map { (path) throws(CairnError) in try MakerKey.read(fromFile: path) }
        guard passphrase != nil || !recipients.isEmpty else {
            if makerKey != nil {
                throw UsageError("--maker-key keys an encrypted archive's chunk ids: give --recipient, --recipients-file or --passphrase")
            }
            return nil
        }
        return ArchiveEncryption(recipients: recipients, passphrase: passphrase, makerKey: makerKey)
    }

    /// What a reading command opens an encrypted archive with: `--identity FILE` (repeatable,
    /// files as `age-keygen` writes them), or the passphrase; empty when none is given (the
    /// archive must then be plain).
    ///
    /// `--identity -` reads the identity file from standard input, as `age -i -` does (a pipe,
    /// or a file given with `<`: no mode check, ``Arguments`` refuses it where the archive is read
    /// from standard input too, ``refuseSharedStandardInput(identities:operands:)``).
    ///
    /// - Throws: `CairnError` naming the file that cannot be read or holds no identity.
    static func decryption(_ args: Arguments) throws(CairnError) -> ArchiveDecryption {
        var identities: [AgeIdentity] = []
        for path in args.allValues(identityOption) {
            if path == standardInput {
                let text = try SmallFile.read("/dev/stdin", limit: AgeKeyFile.byteLimit, what: "age identity file")
                identities += try AgeIdentity.identities(parsingFileText: text, source: "standard input")
            } else {
                identities += try AgeIdentity.readIdentities(fromFile: path)
            }
        }
        return ArchiveDecryption(identities: identities, passphrase: try passphrase(args, confirming: false))
    }

    /// The operand and `--identity` value that name standard input.
    static let standardInput = "-"

    /// `--identity -` where the archive operand (the first) is `-` too, or `--identity -` given
    /// twice: standard input can carry one of them, once (age's rule for `-i -`).
    ///
    /// - Throws: `UsageError` (exit 2) naming standard input.
    static func refuseSharedStandardInput(identities: [String], operands: [[UInt8]]) throws(UsageError) {
        let fromInput = identities.filter { $0 == standardInput }.count
        guard fromInput > 0 else { return }
        if fromInput > 1 { throw UsageError("\(identityOption) - is given twice: standard input carries one identity file") }
        if operands.first == Array(standardInput.utf8) {
            throw UsageError(
                "\(identityOption) - and the archive - cannot both be read from standard input: give the identity as a file")
        }
    }

    /// `--passphrase-file FILE` (its first line) or `--passphrase` (typed on the terminal).
    /// (`Arguments` refuses both.)
    ///
    /// - Throws: `CairnError` for a file that cannot be read, an empty first line, or
    ///   `--passphrase` without a terminal to type it on.
    private static func passphrase(_ args: Arguments, confirming: Bool) throws(CairnError) -> AgePassphrase? {
        if let file = args.value(passphraseFileOption) {
            let text = try SmallFile.read(file, limit: 64 * 1024, what: "passphrase file")
            var line = Array(text.prefix { $0 != UInt8(ascii: "\n") })
            if line.last == UInt8(ascii: "\r") { line.removeLast() }
            guard !line.isEmpty else { throw CairnError(.invalidArgument, "the passphrase file's first line is empty", path: file) }
            return try AgePassphrase(line)
        }
        guard args.flag(passphraseFlag) else { return nil }
        let withoutTerminal = "\(passphraseFlag) asks the passphrase on the terminal and there is none; give \(passphraseFileOption) FILE (its first line is the passphrase)"
        let first = try TerminalPassword.read(prompt: "Passphrase: ", withoutTerminal: withoutTerminal)
        if confirming {
            let second = try TerminalPassword.read(prompt: "Passphrase (one more time): ", withoutTerminal: withoutTerminal)
            guard first == second else { throw CairnError(.invalidArgument, "the passphrases do not match") }
        }
        return try AgePassphrase(first)
    }

    /// The help paragraph of the reading options, the same in every command that takes them.
    static let readingHelp = """
        --identity FILE   open an encrypted archive with an age identity file (as age-keygen
                    writes it, mode 0600; repeatable; - reads it from standard input, unless the
                    archive is read from there). The archive must then be encrypted: a plain one
                    is refused (exit 1). Without it, an encrypted archive is refused (Spec/0004 §6).
        --passphrase, --passphrase-file FILE
                    open an encrypted archive made with a passphrase (typed, or the file's first
                    line)
        """
}
