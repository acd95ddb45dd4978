import Cairn
import Glibc

/// Passes an archive's bytes to another sink and injects a ``MigrationFault``: a write past the
/// limit fails with `ENOSPC` (disk full), or the limit cancels the exporting task.
final class FaultInjectingSink: ArchiveSink {
    private let base: any ArchiveSink
    private let limit: Int
    private let failsWrites: Bool
    private let onLimit: @Sendable () -> Void
    private var written = 0

    init(base: any ArchiveSink, limit: Int, failsWrites: Bool, onLimit: @escaping @Sendable () -> Void) {
        self.base = base
        self.limit = limit
        self.failsWrites = failsWrites
        self.onLimit = onLimit
    }

    nonisolated(nonsending) func write(_ bytes: [UInt8]) async throws {
        if failsWrites, written + bytes.count > limit {
            let room = max(0, limit - written)
            if room > 0 { try await base.write(Array(bytes.prefix(room))) }
            written = limit
            throw CairnError(
                .io, "cannot write the archive", cause: CairnError.Errno.noSpace.description + " (injected)",
                underlyingCause: .errno(.noSpace))
        }
        try await base.write(bytes)
        let before = written
        written += bytes.count
        if !failsWrites, before < limit, written >= limit { onLimit() }
    }

    nonisolated(nonsending) func finish() async throws { try await base.finish() }
    nonisolated(nonsending) func abandon() async { await base.abandon() }
}
