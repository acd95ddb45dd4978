import Foundation
import Synchronization

/// Runs blocking work (an HTTP transfer) on a thread of its own and awaits it, so that the
/// cooperative pool's threads (two on a two-core machine) never block on the network.
package enum DedicatedThread {
    /// Runs `body` on a new thread and returns what it returns (a value that is not `Sendable`,
    /// a sink say, is handed over: nothing else holds it).
    ///
    /// - Throws: what `body` throws.
    package static func run<T>(_ body: @escaping @Sendable () throws(CairnError) -> sending T) async throws(CairnError) -> sending T {
        let result: Result<T, CairnError> = await withCheckedContinuation { continuation in
            let thread = Thread {
                continuation.resume(returning: Result { () throws(CairnError) in try body() })
            }
            thread.start()
        }
        return try result.get()
    }
}
