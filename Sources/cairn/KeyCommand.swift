import Cairn
import Glibc

/// `cairn key generate -p PUBFILE -s SECFILE [-W] [-f]` and `cairn key generate --maker FILE
/// [-f]` (`Spec/0003-command-line.md §14.1`).
enum KeyCommand {
    static let usage = """
        usage: cairn key generate -p PUBFILE -s SECFILE [-W] [-f]
               cairn key generate --maker FILE [-f]

        Generates an Ed25519 key pair in minisign's formats (Spec/0004 §2): the secret key file
        (mode 0600) to sign with (cairn sign, cairn create --sign), and the public key file to
        give to readers (cairn verify --minisig -p, --trusted-key; minisign -V -p).

        -p PUBFILE   the public key file to write
        -s SECFILE   the secret key file to write
        -W           do not encrypt the secret key with a password; otherwise the password is
                     read from the file CAIRN_KEY_PASSWORD_FILE names (its first line), or asked
                     twice on the terminal. Encryption uses scrypt with minisign's limits (about
                     1 GiB of memory and a few seconds).
        -f, --force  replace existing key files; without it an existing file is an error and
                     nothing is written

        --maker FILE instead writes a maker key file (mode 0600; Spec/0004 §6.5): one line,
                     'cairn-maker-key-v1 ' and 32 random bytes in base64. Give it to
                     'cairn create --maker-key FILE' so that a maker's encrypted archives share
                     chunk ids and chunk boundaries without signing them. Keep it secret.
        """

    static func run(_ raw: [[UInt8]]) async throws -> ExitStatus {
        let args = try Arguments(raw, valued: ["-p", "-s", "--maker"], flags: ["-W", "-f", "--force"])
        guard args.operands.map({ String(decoding: $0, as: UTF8.self) }) == ["generate"] else {
            throw UsageError("the only key subcommand is 'generate'")
        }
        if let makerPath = args.value("--maker") {
            guard args.value("-p") == nil, args.value("-s") == nil, !args.flag("-W") else {
                throw UsageError("--maker writes a maker key alone: not with -p, -s or -W")
            }
            let replacing = args.flag("-f", "--force")
            try requireWritable(makerPath, option: "--maker")
            if !replacing, access(makerPath, F_OK) == 0 {
                throw CairnError(.alreadyExists, "already exists; give -f to replace the maker key (nothing was written)", path: makerPath)
            }
            try MakerKey.generate().write(toFile: makerPath, replacing: replacing)
            Output.out("The maker key was saved as \(makerPath) - keep it secret; give it to cairn create --maker-key.")
            return .success
        }
        guard let publicPath = args.value("-p"), let secretPath = args.value("-s") else {
            throw UsageError("key generate needs -p PUBFILE and -s SECFILE")
        }
        guard publicPath != secretPath else { throw UsageError("-p and -s name the same file") }
        // Both checked before either is written: a pair half replaced loses the old secret key.
        try requireWritable(publicPath, option: "-p")
        try requireWritable(secretPath, option: "-s")
        let replacing = args.flag("-f", "--force")
        if !replacing {
            // Checked before asking for a password; checked again when writing.
            for path in [publicPath, secretPath] where access(path, F_OK) == 0 {
                throw CairnError(.alreadyExists, "already exists; give -f to replace the key pair (nothing was written)", path: path)
            }
        }
        var password: [UInt8]?
        if !args.flag("-W") {
            password = try KeyOptions.password(prompt: "Password for the new secret key: ", confirming: true)
            if password?.isEmpty == true {
                throw CairnError(.invalidArgument, "the password is empty; give -W for a secret key without a password")
            }
        }
        let key = try SigningKey.generate()
        try key.writeKeyPair(publicKeyFile: publicPath, secretKeyFile: secretPath, password: password, replacing: replacing)
        Output.out("The secret key was saved as \(secretPath) - keep it secret.")
        Output.out("The public key was saved as \(publicPath) - give it to readers.")
        Output.out("Key id \(key.keyID); public key \(key.publicKey.minisignBase64)")
        return .success
    }

    /// Refuses, before anything is written, a key file name that cannot be written: empty (a
    /// usage error), an existing directory, or in a directory that does not exist.
    ///
    /// - Throws: ``UsageError`` for an empty name; `CairnError` naming the path (exit 1).
    private static func requireWritable(_ path: String, option: String) throws {
        guard !path.isEmpty else { throw UsageError("\(option) needs a file name") }
        var status = stat()
        if stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFDIR {
            throw CairnError(.invalidArgument, "is a directory: name a file (nothing was written)", path: path)
        }
        let directory = path.contains("/") ? String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)]) : "."
        var parent = stat()
        guard stat(directory.isEmpty ? "/" : directory, &parent) == 0, parent.st_mode & S_IFMT == S_IFDIR else {
            throw CairnError(.notFound, "its directory does not exist (nothing was written)", path: path)
        }
    }
}
