import Testing

@testable import cairn_bench

@Suite("Benchmark statistics")
struct StatisticsTests {
    @Test("the median of an odd count is the middle value, of an even count the mean of the two middle ones")
    func median() throws {
        let odd = try #require(Spread([3.0, 1.0, 2.0]))
        #expect(odd.median == 2 && odd.minimum == 1 && odd.maximum == 3 && odd.count == 3)
        let even = try #require(Spread([4.0, 1.0, 3.0, 2.0]))
        #expect(even.median == 2.5)
        #expect(Spread([]) == nil)
        #expect(try #require(Spread([2.3, 2.57, 2.35])).formatted() == "2.35 (2.30–2.57)")
        #expect(try #require(Spread([1.0])).formatted() == "1.00")
    }

    @Test("a Cairn/peer ratio is the median of the per-round ratios, rounds where either failed left out")
    func perRoundRatio() throws {
        // Round ratios 0.5, 1.0, (peer failed), 0.25, 2.0 → median of [0.5, 1.0, 0.25, 2.0] = 0.75.
        let result = Fixture.caseResult(cairnCreate: [1, 2, 3, 1, 4], tarCreate: [2, 2, nil, 4, 2])
        let ratio = try #require(Ratio.all(in: result, runs: 5).first { $0.measure == .wallTime && $0.peer == "\(ToolName.tarLZ4) create" })
        #expect(ratio.perRound == [0.5, 1.0, 0.25, 2.0])
        let spread = try #require(ratio.spread)
        #expect(spread.median == 0.75 && spread.minimum == 0.25 && spread.maximum == 2.0)
        #expect(ratio.target == Target(limit: 0.45, source: "issue 9", minimumRounds: 5), "issue 9: create ≤ 0.45× tar | lz4 on the corpus")
    }

    @Test("archive sizes are compared in bytes, per round")
    func archiveSizeRatio() throws {
        let result = Fixture.caseResult(
            kind: .smallFiles, cairnCreate: [1, 1, 1], tarCreate: [1, 1, 1], cairnBytes: 207_000_000, tarBytes: 108_000_000)
        let op = try #require(result.operation(ToolName.cairnLZ4, "create"))
        #expect(op.archiveBytes?.median == 207_000_000, "bytes as a number, not reinterpreted bits")
        let size = try #require(Ratio.all(in: result, runs: 3).first { $0.measure == .archiveSize })
        #expect(abs((size.spread?.median ?? 0) - 207.0 / 108.0) < 1e-12)
        #expect(size.target == Target(limit: 1.0, source: "issue 9", minimumRounds: 5))
    }

    @Test("a verdict is about the median: PASS or FAIL from the target's rounds, indicative below, ≤ and ≥ alike")
    func verdicts() throws {
        let atMost = Target(limit: 0.5, source: "issue 9", minimumRounds: 5)
        #expect(Verdict(Spread([0.4, 0.45, 0.9, 0.1, 0.5]), target: atMost) == .pass, "median 0.45")
        #expect(Verdict(Spread([0.4, 0.55, 0.6, 0.1, 0.7]), target: atMost) == .fail, "median 0.55")
        #expect(Verdict(Spread([0.5, 0.5, 0.5, 0.5, 0.5]), target: atMost) == .pass, "the limit itself meets ≤")
        #expect(Verdict(Spread([0.1, 0.2, 0.9]), target: atMost) == .indicative(met: true, rounds: 3, needed: 5))
        #expect(Verdict(Spread([0.9]), target: atMost).text == "fail (indicative: 1 round, needs 5)")
        #expect(Verdict(nil, target: atMost) == .notMeasured("no successful round"))
        let atLeast = Target(limit: 0.9, source: "issue 9", comparison: .atLeast, minimumRounds: 5)
        #expect(Verdict(Spread([0.95, 0.91, 0.8, 1.2, 0.9]), target: atLeast) == .pass, "median 0.91 ≥ 0.9")
        #expect(Verdict(Spread([0.85, 0.91, 0.8, 1.2, 0.7]), target: atLeast) == .fail, "median 0.85 < 0.9")
        #expect(atLeast.formatted() == "≥ 0.90" && Target(limit: 64, source: "issue 9").formatted("%.0f", unit: "MiB") == "≤ 64 MiB")
        let issue3 = Target(limit: 0.25, source: "issue 3")
        #expect(Verdict(Spread([0.1, 0.2, 0.3]), target: issue3) == .pass, "issue 3's targets count from 3 rounds")
    }

    @Test("only operations that read the content have a throughput")
    func throughputKinds() {
        #expect(OperationResult.Kind.create.readsContent)
        #expect(OperationResult.Kind.extract.readsContent)
        #expect(OperationResult.Kind.verify.readsContent)
        #expect(!OperationResult.Kind.list.readsContent)
        #expect(!OperationResult.Kind.resume.readsContent)
    }

    @Test("chart axes end on a round number with about five ticks")
    func axis() {
        #expect(Chart.axis(upTo: 0.88) == (1.0, 0.2))
        #expect(Chart.axis(upTo: 13.07) == (15.0, 5.0))
        #expect(Chart.axis(upTo: 653.2) == (800.0, 200.0))
        #expect(Chart.axis(upTo: 0) == (1.0, 0.2))
    }
}
