import Cairn
import Glibc

/// `cairn key generate -p PUBFILE -s SECFILE [-W] [-f]` (`Spec/0003-command-line.md §14.1`).
enum KeyCommand {
    static let usage = """
        usage: cairn key generate -p PUBFILE -s SECFILE [-W] [-f]

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
        """

    static func run(_ raw: [[UInt8]]) async throws -> ExitStatus {
        let args = try Arguments(raw, valued: ["-p", "-s"], flags: ["-W", "-f", "--force"])
        guard args.operands.map({ String(decoding: $0, as: UTF8.self) }) == ["generate"] else {
            throw UsageError("the only key subcommand is 'generate'")
        }
        guard let publicPath = args.value("-p"), let secretPath = args.value("-s") else {
            throw UsageError("key generate needs -p PUBFILE and -s SECFILE")
        }
        guard publicPath != secretPath else { throw UsageError("-p and -s name the same file") }
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
}
