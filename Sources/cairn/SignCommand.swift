import Cairn
import Glibc

/// `cairn sign -s SECFILE [-x SIGFILE] [-f] FILE` (`Spec/0003-command-line.md §14.2`).
enum SignCommand {
    static let usage = """
        usage: cairn sign -s SECFILE [-x SIGFILE] [-f] FILE

        Writes a detached minisign signature of FILE (an archive, or any file) to FILE.minisig:
        a prehashed Ed25519 signature of the file's BLAKE2b-512 with the trusted comment
        timestamp:<seconds>, file:<name>, hashed, as minisign -S writes it (Spec/0004 §2.4).
        minisign -Vm FILE -p PUBFILE and cairn verify --minisig FILE -p PUBFILE check it.

        -s SECFILE   the minisign secret key file (cairn key generate, minisign -G); an
                     encrypted key's password is read from the file CAIRN_KEY_PASSWORD_FILE
                     names, or asked on the terminal
        -x SIGFILE   write the signature there instead of FILE.minisig
        -f, --force  replace an existing signature file; without it an existing one is an error
                     and nothing is written (minisign itself replaces it)
        """

    static func run(_ raw: [[UInt8]]) async throws -> ExitStatus {
        let args = try Arguments(raw, valued: ["-s", "-x"], flags: ["-f", "--force", "-q", "--quiet"])
        guard args.operands.count == 1, let file = args.operands.first.map({ String(decoding: $0, as: UTF8.self) }) else {
            throw UsageError(args.operands.isEmpty ? "missing FILE" : "sign takes one FILE")
        }
        guard let secretPath = args.value("-s") else { throw UsageError("sign needs -s SECFILE") }
        let output = args.value("-x") ?? MinisignSignature.defaultSignaturePath(for: file)
        let replacing = args.flag("-f", "--force")
        if !replacing, access(output, F_OK) == 0 {
            // Before asking for a password; checked again when writing.
            throw CairnError(.alreadyExists, "already exists; give -f to replace the signature (nothing was written)", path: output)
        }
        let key = try KeyOptions.signingKey(atPath: secretPath)
        let signature = try MinisignSignature.sign(fileAt: file, with: key, signatureFile: output, replacing: replacing)
        if !args.flag("-q", "--quiet") {
            Output.out("Signed \(file) with key \(key.keyID): \(output)")
            Output.out("Trusted comment: \(signature.trustedComment)")
        }
        return .success
    }
}
