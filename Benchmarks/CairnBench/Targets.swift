/// One target an issue sets, on every case of one kind: what is measured, per round, and the
/// limit its median must meet. ``all`` is the one list of targets; the ratio table and the
/// verdict table both read it.
struct TargetSpec {
    /// What is measured in each round.
    enum Quantity: Equatable {
        /// Cairn / peer wall time or archive size (a ``RatioPair``), a plain ratio.
        case ratio(RatioPair)
        /// The speed of the pair's first operation relative to its second: the peer's wall time
        /// divided by Cairn's (the inverse of the pair's ratio), so higher is faster.
        case speed(RatioPair)
        /// Peak RSS of one operation of one tool, MiB (2^20 bytes).
        case peakRSS(tool: String, operation: String)
    }

    /// The target in words, e.g. "create wall time vs tar | lz4".
    var title: String
    var kind: BenchCase.Kind
    var quantity: Quantity
    var target: Target

    /// "×" for ratios and speeds, "MiB" for memory.
    var unit: String {
        if case .peakRSS = quantity { return "MiB" }
        return "×"
    }

    /// The per-round values on `result` (rounds `1...runs`, failed rounds left out); nil when
    /// the case lacks the operations.
    func values(in result: CaseResult, runs: Int) -> [Double]? {
        switch quantity {
        case .ratio(let pair):
            return pair.perRound(in: result, runs: runs)
        case .speed(let pair):
            return pair.perRound(in: result, runs: runs, inverted: true)
        case .peakRSS(let tool, let operation):
            guard let op = result.operation(tool, operation) else { return nil }
            return op.successful.map { Double($0.result.peakRSSBytes) / 1_048_576 }
        }
    }

    static let issue3 = "issue 3"
    static let issue9 = "issue 9"
    static let issue25 = "issue 25"

    /// Issue 9's rule: a target counts from the median of at least 5 interleaved rounds.
    static let issue9Rounds = 5

    /// Every target, in report order: issue 9's "Targets" list (archive sizes on every tree,
    /// create and extract times on the corpus and the small files, peak RSS for a 4 GiB file
    /// and for 100,000 files, incompressible data), then issue 3's peer targets.
    static let all: [TargetSpec] = {
        let lz4 = ToolName.cairnLZ4
        let zstd = ToolName.cairnZstd
        func nine(_ limit: Double, _ comparison: Target.Comparison = .atMost) -> Target {
            Target(limit: limit, source: issue9, comparison: comparison, minimumRounds: issue9Rounds)
        }
        var list: [TargetSpec] = []
        for kind in [BenchCase.Kind.corpus, .smallFiles, .tree] {
            list.append(
                TargetSpec(title: "archive size, cairn lz4 vs tar | lz4", kind: kind, quantity: .ratio(.size(lz4, ToolName.tarLZ4)), target: nine(1.0)))
            list.append(
                TargetSpec(
                    title: "archive size, cairn zstd:3 vs tar | zstd -3", kind: kind, quantity: .ratio(.size(zstd, ToolName.tarZstd)),
                    target: nine(1.0)))
        }
        let create = RatioPair.wall(lz4, "create", ToolName.tarLZ4, "create")
        let extract = RatioPair.wall(lz4, "extract", ToolName.tarLZ4, "extract")
        list += [
            TargetSpec(title: "create wall time vs tar | lz4", kind: .corpus, quantity: .ratio(create), target: nine(0.45)),
            TargetSpec(title: "create wall time vs tar | lz4", kind: .smallFiles, quantity: .ratio(create), target: nine(0.6)),
            TargetSpec(title: "extract wall time vs lz4 -d | tar -x", kind: .corpus, quantity: .ratio(extract), target: nine(0.5)),
            TargetSpec(title: "extract wall time vs lz4 -d | tar -x", kind: .smallFiles, quantity: .ratio(extract), target: nine(0.5)),
            TargetSpec(title: "peak RSS, cairn create", kind: .largeFile, quantity: .peakRSS(tool: lz4, operation: "create"), target: nine(64)),
            TargetSpec(title: "peak RSS, cairn extract", kind: .largeFile, quantity: .peakRSS(tool: lz4, operation: "extract"), target: nine(64)),
            TargetSpec(title: "peak RSS, cairn create", kind: .smallFiles, quantity: .peakRSS(tool: lz4, operation: "create"), target: nine(80)),
            TargetSpec(title: "peak RSS, cairn extract", kind: .smallFiles, quantity: .peakRSS(tool: lz4, operation: "extract"), target: nine(80)),
            TargetSpec(
                title: "create speed, lz4 vs --compression none", kind: .randomData,
                quantity: .speed(.wall(lz4, "create", ToolName.cairnNone, "create")), target: nine(0.9, .atLeast)),
        ]
        func three(_ limit: Double) -> Target { Target(limit: limit, source: issue3, minimumRounds: 3) }
        list += [
            TargetSpec(
                title: "create wall time vs casync make", kind: .corpus, quantity: .ratio(.wall(lz4, "create", ToolName.casync, "make")),
                target: three(0.25)),
            TargetSpec(
                title: "create wall time vs borg create", kind: .corpus, quantity: .ratio(.wall(lz4, "create", ToolName.borg, "create")),
                target: three(0.5)),
            TargetSpec(
                title: "create wall time vs restic backup", kind: .corpus,
                quantity: .ratio(.wall(lz4, "create", ToolName.restic, "backup")), target: three(0.5)),
        ]
        // Issue 25: a signed archive costs at most 15% more time than the plain one of the same
        // run (medians of 5 interleaved rounds), and about nothing in size (plain + 0.5% + 1 KiB:
        // the ratio's limit is the 0.5%, the KiB is below a ratio's digits at these sizes).
        func twentyFive(_ limit: Double) -> Target { Target(limit: limit, source: issue25, minimumRounds: issue9Rounds) }
        let signed = ToolName.cairnSigned
        let encrypted = ToolName.cairnEncrypted
        for kind in [BenchCase.Kind.corpus, .smallFiles] {
            list += [
                TargetSpec(
                    title: "signed create wall time vs plain", kind: kind, quantity: .ratio(.wall(signed, "create", lz4, "create")),
                    target: twentyFive(1.15)),
                TargetSpec(
                    title: "signed extract wall time vs plain", kind: kind, quantity: .ratio(.wall(signed, "extract", lz4, "extract")),
                    target: twentyFive(1.15)),
                TargetSpec(title: "signed archive size vs plain", kind: kind, quantity: .ratio(.size(signed, lz4)), target: twentyFive(1.005)),
                TargetSpec(
                    title: "signed+encrypted create wall time vs plain", kind: kind,
                    quantity: .ratio(.wall(encrypted, "create", lz4, "create")), target: twentyFive(1.15)),
                TargetSpec(
                    title: "signed+encrypted extract wall time vs plain", kind: kind,
                    quantity: .ratio(.wall(encrypted, "extract", lz4, "extract")), target: twentyFive(1.15)),
                TargetSpec(
                    title: "signed+encrypted create wall time vs tar | lz4 -1 | age", kind: kind,
                    quantity: .ratio(.wall(encrypted, "create", ToolName.tarLZ4Age, "create")), target: twentyFive(0.8)),
                TargetSpec(
                    title: "signed+encrypted archive size vs plain", kind: kind, quantity: .ratio(.size(encrypted, lz4)),
                    target: twentyFive(1.005)),
            ]
        }
        // Peak RSS within the plain archive's limits (issue 9's: 80 MiB for 100,000 files, 64
        // MiB for a 4 GiB file).
        for (kind, limit) in [(BenchCase.Kind.smallFiles, 80.0), (.largeFile, 64)] {
            for operation in ["create", "extract"] {
                list.append(
                    TargetSpec(
                        title: "peak RSS, signed+encrypted \(operation)", kind: kind, quantity: .peakRSS(tool: encrypted, operation: operation),
                        target: twentyFive(limit)))
            }
        }
        return list
    }()

    /// The target ``all`` sets for the plain ratio `pair` on a case of `kind`, if any.
    static func target(for pair: RatioPair, on kind: BenchCase.Kind) -> Target? {
        all.first { $0.kind == kind && $0.quantity == .ratio(pair) }?.target
    }

    /// The tool and operation of every measurement the target needs, as "tool operation".
    var operationsNeeded: [(tool: String, operation: String)] {
        switch quantity {
        case .ratio(let pair), .speed(let pair): [(pair.cairnTool, pair.cairnOperation), (pair.peerTool, pair.peerOperation)]
        case .peakRSS(let tool, let operation): [(tool, operation)]
        }
    }

    /// Why no case of `kind` was measured, for the verdict table.
    static func missingReason(_ kind: BenchCase.Kind) -> String {
        switch kind {
        case .corpus: "no corpus case"
        case .smallFiles: "no small-files case (--small-files 0)"
        case .tree: "no tree case (pass --targets or --tree PATH)"
        case .largeFile: "the 4 GiB file case is opt-in: add --large-file"
        case .randomData: "no random-data case (pass --targets or --random-mib N)"
        }
    }
}

/// One row of the verdict table: a target on one case (or on no case, when none of its kind ran).
struct VerdictRow {
    var spec: TargetSpec
    /// The case's title, or nil when no case of the target's kind ran.
    var caseTitle: String?
    var values: [Double]
    var verdict: Verdict

    var spread: Spread? { Spread(values) }

    /// The rows of every target from `source` (issue 9 by default), in ``TargetSpec/all``'s
    /// order, each on every case of its kind in `cases`; a target with no case of its kind
    /// gets one "not measured" row.
    static func rows(for cases: [CaseResult], runs: Int, source: String = TargetSpec.issue9) -> [VerdictRow] {
        var rows: [VerdictRow] = []
        for spec in TargetSpec.all where spec.target.source == source {
            let matching = cases.filter { $0.benchCase.kind == spec.kind }
            if matching.isEmpty {
                rows.append(VerdictRow(spec: spec, caseTitle: nil, values: [], verdict: .notMeasured(TargetSpec.missingReason(spec.kind))))
                continue
            }
            for result in matching {
                guard let values = spec.values(in: result, runs: runs) else {
                    rows.append(
                        VerdictRow(spec: spec, caseTitle: result.benchCase.title, values: [], verdict: .notMeasured(missing(spec, in: result))))
                    continue
                }
                rows.append(VerdictRow(spec: spec, caseTitle: result.benchCase.title, values: values, verdict: Verdict(Spread(values), target: spec.target)))
            }
        }
        return rows
    }

    /// "tar | lz4 -1 create did not run on this case (not installed?)".
    private static func missing(_ spec: TargetSpec, in result: CaseResult) -> String {
        let absent = spec.operationsNeeded.filter { result.operation($0.tool, $0.operation) == nil }.map { "\($0.tool) \($0.operation)" }
        return "\(absent.joined(separator: " and ")) did not run on this case"
    }
}
