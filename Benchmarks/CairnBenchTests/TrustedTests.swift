import Foundation
import Testing

@testable import cairn_bench

@Suite("Issue 25: trusted archives side by side")
struct TrustedTests {
    @Test("--only trusted: 5 rounds, the plain, signed, encrypted and age tools, the seeded delta, no extras")
    func options() throws {
        let trusted = try BenchOptions(["--only", "trusted", "--small-files", "2000"])
        #expect(trusted.runs == 5 && trusted.smallFiles == 2000)
        #expect(trusted.runsEndToEnd && trusted.runsTransfer && !trusted.runsStages && !trusted.corpusExtras)
        #expect(trusted.peerChoice == [.tarLZ4, .cairnSigned, .cairnEncrypted, .tarLZ4Age])
        #expect(try BenchOptions(["--only", "trusted", "--peers", "tar-lz4-age"]).peerChoice == [.tarLZ4Age], "--peers still chooses")
        #expect(try BenchOptions(["--only", "trusted", "--runs", "3"]).runs == 3)
        #expect(try BenchOptions(["--peers", "cairn-encrypted,tar-lz4-age"]).peers == [.cairnEncrypted, .tarLZ4Age])
        let plain = try BenchOptions([])
        #expect(plain.peerChoice == nil && !plain.runsTransfer, "nothing changes without --only trusted")
        #expect(Peer.forCase(.largeFile, chosen: Peer.trusted, targets: false) == [.cairnEncrypted])
        #expect(Peer.forCase(.largeFile, chosen: nil, targets: true).isEmpty)
        #expect(Peer.forCase(.randomData, chosen: Peer.trusted, targets: false).isEmpty)
    }

    @Test("the encrypted archive is signed and made for the recipient of an age-keygen identity, and read with both keys")
    func tools() throws {
        let e2e = EndToEnd(cairn: "/bin/cairn", work: "/tmp/unused", runs: 5, keep: false, pauseSeconds: 0, peerChoice: Peer.trusted)
        let runner = ProcessRunner(logDirectory: "/tmp/unused")
        let tools = e2e.tools(for: Fixture.benchCase(.smallFiles), in: "/w/case", peers: Peer.trusted, round: 2, runner: runner)
        #expect(tools.map(\.name).contains(ToolName.cairnSigned))
        let encrypted = try #require(tools.first { $0.name == ToolName.cairnEncrypted })
        let create = try #require(encrypted.steps.first { $0.operation == "create" }).arguments
        #expect(create.contains("--sign") && create.contains("/w/case/keys/bench.key"))
        #expect(create.contains("--recipients-file") && create.contains("/w/case/keys/recipients.txt"))
        #expect(create[create.index(after: try #require(create.firstIndex(of: "--compression")))] == "lz4", "the plain archive's codec")
        let extract = try #require(encrypted.steps.first { $0.operation == "extract" }).arguments
        #expect(extract.contains("--identity") && extract.contains("/w/case/keys/identity.txt"))
        #expect(extract.contains("--trusted-key") && extract.contains("/w/case/keys/bench.pub"))
        #expect(extract.contains("/w/case/cairn-encrypted/out-2"))
        let age = try #require(tools.first { $0.name == ToolName.tarLZ4Age })
        let pipeline = age.steps.map { $0.arguments.joined(separator: " ") }
        #expect(pipeline[0].contains("tar -cf - -C") && pipeline[0].contains("| lz4 -1 -q -c | age -R '/w/case/keys/recipients.txt' >"))
        #expect(pipeline[1].hasSuffix("> '/w/case/tar-lz4-age/x.tar.lz4.age' && sync '/w/case/tar-lz4-age/x.tar.lz4.age'"), "cairn fsyncs too")
        #expect(pipeline[2].contains("age -d -i '/w/case/keys/identity.txt'") && pipeline[2].contains("| lz4 -dc -q | tar -xf - -C"))
        #expect(age.executables.contains("age") && encrypted.executables.contains("age-keygen"))
        let large = e2e.tools(for: Fixture.benchCase(.largeFile), in: "/w/large", peers: [.cairnEncrypted], round: 1, runner: runner)
        #expect(large.map(\.name) == [ToolName.cairnLZ4, ToolName.cairnEncrypted], "peak RSS of the 4 GiB file, plain and encrypted")
    }

    /// A case where every trusted tool ran 5 rounds.
    static func trustedCase(
        kind: BenchCase.Kind = .corpus, plain: [Double], encrypted: [Double], age: [Double], plainBytes: UInt64, encryptedBytes: UInt64,
        encryptedRSS: [UInt64] = []
    ) -> CaseResult {
        CaseResult(
            benchCase: Fixture.benchCase(kind), warmRead: (bytes: 1, seconds: 1),
            operations: [
                Fixture.operation(ToolName.cairnLZ4, "create", .create, walls: plain, archiveBytes: plainBytes),
                Fixture.operation(ToolName.cairnLZ4, "extract", .extract, walls: plain),
                Fixture.operation(ToolName.cairnSigned, "create", .create, walls: plain, archiveBytes: plainBytes + 600),
                Fixture.operation(ToolName.cairnSigned, "extract", .extract, walls: plain),
                Fixture.operation(ToolName.cairnEncrypted, "create", .create, walls: encrypted, archiveBytes: encryptedBytes, rssMiB: encryptedRSS),
                Fixture.operation(ToolName.cairnEncrypted, "extract", .extract, walls: encrypted, rssMiB: encryptedRSS),
                Fixture.operation(ToolName.tarLZ4Age, "create", .create, walls: age, archiveBytes: plainBytes),
                Fixture.operation(ToolName.tarLZ4Age, "extract", .extract, walls: age),
            ], peers: [.cairnSigned, .cairnEncrypted, .tarLZ4Age])
    }

    @Test("issue 25's targets: encrypted time ≤ 1.15× plain, create ≤ 0.8× tar | lz4 | age, size and RSS limits; medians of 5")
    func verdicts() throws {
        // Per-round encrypted / plain: 1.1, 1.2, 1.1, 1.3, 1.0 → median 1.1: PASS although two rounds are over.
        let result = Self.trustedCase(
            plain: [10, 10, 10, 10, 10], encrypted: [11, 12, 11, 13, 10], age: [10, 20, 10, 10, 10], plainBytes: 1_000_000,
            encryptedBytes: 1_006_000)
        let small = Self.trustedCase(
            kind: .smallFiles, plain: [1, 1, 1, 1, 1], encrypted: [1, 1, 1, 1, 1], age: [2, 2, 2, 2, 2], plainBytes: 1_000_000,
            encryptedBytes: 1_000_500, encryptedRSS: [70, 90, 85, 81, 60])
        let report = Fixture.report(runs: 5, cases: [result, small])
        let rows = report.trustedVerdictRows()
        func row(_ title: String, _ kind: BenchCase.Kind) -> VerdictRow? {
            rows.first { $0.spec.title == title && $0.spec.kind == kind }
        }
        #expect(try #require(row("signed+encrypted create wall time vs plain", .corpus)).verdict == .pass)
        #expect(row("signed+encrypted create wall time vs plain", .corpus)?.values.map { ($0 * 100).rounded() / 100 } == [1.1, 1.2, 1.1, 1.3, 1])
        // 11/10, 12/20, 11/10, 13/10, 10/10 → median 1.1 > 0.8: FAIL.
        #expect(row("signed+encrypted create wall time vs tar | lz4 -1 | age", .corpus)?.verdict == .fail)
        #expect(row("signed+encrypted create wall time vs tar | lz4 -1 | age", .smallFiles)?.verdict == .pass)
        #expect(row("signed+encrypted archive size vs plain", .corpus)?.verdict == .fail, "1.006 > 1.005")
        #expect(row("signed+encrypted archive size vs plain", .smallFiles)?.verdict == .pass)
        #expect(row("peak RSS, signed+encrypted create", .smallFiles)?.verdict == .fail, "median 81 MiB > 80")
        #expect(row("peak RSS, signed+encrypted create", .largeFile) == nil, "a case that did not run is left out")
        #expect(rows.allSatisfy { $0.spec.target.minimumRounds == 5 && $0.spec.target.source == TargetSpec.issue25 })
        let text = report.markdown()
        #expect(text.contains("## Trusted archives (issue 25): plain / signed / signed+encrypted / tar | lz4 -1 | age"))
        #expect(text.contains("| | cairn (lz4) | cairn (lz4, signed) | cairn (lz4, signed+encrypted) | tar \\| lz4 -1 \\| age |"))
        #expect(text.contains("| create: wall s | 10.00 (10.00–10.00) | 10.00 (10.00–10.00) | 11.00 (10.00–13.00) | 10.00 (10.00–20.00) |"))
        #expect(text.contains("| archive bytes | 1000000 | 1000600 | 1006000 | 1000000 |"))
        #expect(text.contains("allowance plain + 0.5 % + 1 KiB = 1006024 bytes: within."), "1,006,000 ≤ 1,006,024: the KiB counts")
        #expect(text.contains("1000500 bytes, plain 1000000 bytes (+0.050 %, +500 bytes); allowance plain + 0.5 % + 1 KiB = 1006024 bytes: within."))
        #expect(text.contains("### Issue 25 targets: verdicts"))
        let json = report.json()
        let trusted = try #require(json["trustedVerdicts"] as? [[String: Any]])
        #expect(trusted.count == rows.count && trusted.allSatisfy { $0["source"] as? String == "issue 25" })
    }

    @Test("a report without trusted tools has no trusted section")
    func absentWithoutTools() {
        let report = Fixture.report(runs: 5, cases: [Fixture.caseResult(cairnCreate: [1, 1, 1, 1, 1], tarCreate: [2, 2, 2, 2, 2])])
        #expect(!report.markdown().contains("Trusted archives"))
        #expect(report.json()["trustedVerdicts"] == nil)
    }

    @Test("the encrypted seeded fetch is 'not available' when fetch refuses --identity, and a real failure stays a failure")
    func seededDeltaGuard() {
        let refused = ProcessResult(
            exitStatus: 2, wallSeconds: 0.01, userSeconds: 0, systemSeconds: 0, peakRSSBytes: 0, standardOutput: "",
            standardError: "cairn fetch: unknown option --identity\nusage: cairn fetch URL -o FILE")
        #expect(TransferBenchmark.encryptedFetchUnavailable(refused)?.hasPrefix("not available: ") == true)
        let broken = ProcessResult(
            exitStatus: 1, wallSeconds: 0.01, userSeconds: 0, systemSeconds: 0, peakRSSBytes: 0, standardOutput: "",
            standardError: "cairn fetch: checksum mismatch at offset 4096")
        #expect(TransferBenchmark.encryptedFetchUnavailable(broken) == nil)
        let target = TransferTarget.all.first { $0.title == "seeded delta bytes, two encrypted exports / two plain ones" }
        #expect(target?.target.limit == 1.1 && target?.target.source == "issue 25")
    }
}
