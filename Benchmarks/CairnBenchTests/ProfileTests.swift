import CairnTestSupport
import Foundation
import Testing

@testable import cairn_bench

@Suite("perf profiles")
struct ProfileTests {
    static let bySymbol = """
        # To display the perf.data header info, please use --header/--header-only options.
        #
        # Total Lost Samples: 0
        #
        # Samples: 12K of event 'cpu-clock'
        # Event count (approx.): 3012345678
        #
        # Overhead  Shared Object      Symbol                                IPC   [IPC Coverage]
        # ........  .................  ....................................  ....................
        #
            31.20%  cairn              [.] Cairn.FastCDC.nextBoundary(in:)    -      -
            12.05%  [kernel.kallsyms]  [k] copy_user_enhanced_fast_string     -      -
             9.15%  libc.so.6          [.] __memmove_avx_unaligned_erms
             0.40%  liblz4.so.1.9.4    [.] LZ4_compress_fast_extState

        """

    @Test("perf report lines become share, object and symbol; the sample count is read from the header")
    func parse() {
        let parsed = Profiler.parse(report: Self.bySymbol, symbols: true)
        #expect(parsed.samples == 12_000)
        #expect(
            parsed.lines == [
                Profile.Line(percent: 31.2, object: "cairn", symbol: "Cairn.FastCDC.nextBoundary(in:)"),
                Profile.Line(percent: 12.05, object: "[kernel.kallsyms]", symbol: "copy_user_enhanced_fast_string"),
                Profile.Line(percent: 9.15, object: "libc.so.6", symbol: "__memmove_avx_unaligned_erms"),
                Profile.Line(percent: 0.4, object: "liblz4.so.1.9.4", symbol: "LZ4_compress_fast_extState"),
            ])
        let objects = Profiler.parse(report: "# Samples: 174  of event 'cpu-clock'\n    60.00%  cairn\n    40.00%  [kernel.kallsyms]  \n", symbols: false)
        #expect(objects.samples == 174)
        #expect(objects.lines.map(\.object) == ["cairn", "[kernel.kallsyms]"] && objects.lines.map(\.percent) == [60, 40])
    }

    @Test("a profile is either perf's top symbols or a line saying perf is not available, never an error")
    func profileOrReason() throws {
        let directory = try TemporaryDirectory(prefix: "cairn-bench-perf")
        defer { directory.remove() }
        let profiler = Profiler(runner: ProcessRunner(logDirectory: directory.path))
        let busy = ["/bin/bash", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"]
        let profile = profiler.profile(label: "bash loop", arguments: busy, data: directory.appending("loop.perf"))
        if let reason = profile.unavailable {
            #expect(reason.hasPrefix("perf not available: "))
            #expect(profile.symbols.isEmpty)
        } else {
            #expect(!profile.symbols.isEmpty && profile.symbols.count <= profiler.topSymbols)
            #expect(profile.symbols.contains { $0.object.hasPrefix("bash") || $0.object.hasPrefix("libc") })
            #expect((profile.cpuSeconds ?? 0) > 0 && (profile.samples ?? 0) > 0)
            #expect(profile.symbols.map(\.percent) == profile.symbols.map(\.percent).sorted(by: >), "largest first")
        }
    }
}
