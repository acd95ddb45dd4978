import Foundation

@testable import cairn_bench

/// Hand-made measurements for the report's arithmetic, without running any tool.
enum Fixture {
    static func process(wall: Double, cpu: Double = 1, rss: UInt64 = 64 << 20, status: Int32 = 0) -> ProcessResult {
        ProcessResult(
            exitStatus: status, wallSeconds: wall, userSeconds: cpu * 0.75, systemSeconds: cpu * 0.25, peakRSSBytes: rss,
            standardOutput: "", standardError: status == 0 ? "" : "failed")
    }

    /// An operation with one measurement per round: `walls[i]` is round i + 1's wall time, nil
    /// for a failed run (exit 1).
    static func operation(
        _ tool: String, _ name: String, _ kind: OperationResult.Kind, walls: [Double?], archiveBytes: UInt64? = nil,
        rssMiB: [UInt64] = []
    ) -> OperationResult {
        var result = OperationResult(tool: tool, operation: name, kind: kind, command: "\(tool) \(name)")
        for (index, wall) in walls.enumerated() {
            let rss = (index < rssMiB.count ? rssMiB[index] : 64) << 20
            let p = wall.map { process(wall: $0, cpu: $0 * 1.5, rss: rss) } ?? process(wall: 9, status: 1)
            result.measurements.append(Measurement(round: index + 1, result: p, archiveBytes: wall == nil ? nil : archiveBytes))
        }
        return result
    }

    static func benchCase(_ kind: BenchCase.Kind = .corpus, bytes: UInt64 = 100_000_000) -> BenchCase {
        BenchCase(
            kind: kind, title: "fixture \(kind.rawValue)", path: "/nonexistent/\(kind.rawValue)", generated: true, seed: 1,
            fileCount: 1000, directoryCount: 10, totalBytes: bytes, generationSeconds: nil)
    }

    /// A corpus case where cairn (lz4) and tar | lz4 ran `walls.count` rounds.
    static func caseResult(
        kind: BenchCase.Kind = .corpus, cairnCreate: [Double?], tarCreate: [Double?], cairnBytes: UInt64 = 600 << 20,
        tarBytes: UInt64 = 660 << 20
    ) -> CaseResult {
        CaseResult(
            benchCase: benchCase(kind), warmRead: (bytes: 100_000_000, seconds: 0.1),
            operations: [
                operation(ToolName.cairnLZ4, "create", .create, walls: cairnCreate, archiveBytes: cairnBytes),
                operation(ToolName.cairnLZ4, "list", .list, walls: cairnCreate.map { $0.map { $0 / 20 } }),
                operation(ToolName.cairnLZ4, "extract", .extract, walls: cairnCreate),
                operation(ToolName.tarLZ4, "create", .create, walls: tarCreate, archiveBytes: tarBytes),
                operation(ToolName.tarLZ4, "extract", .extract, walls: tarCreate),
            ], peers: [.tarLZ4])
    }

    static func report(runs: Int, cases: [CaseResult], date: Date = Date(timeIntervalSince1970: 1_796_120_100)) -> Report {
        Report(
            date: date, machine: Machine(processors: 2, cpuModel: "test CPU", kernel: "Linux test", memoryMiB: 1024, hostname: "test"),
            command: "cairn-bench --test", runs: runs, cases: cases)
    }
}
