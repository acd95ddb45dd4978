import Glibc

/// Retries transient failures with exponential backoff: `.network` errors and the statuses RFC 9110
/// §15 marks as worth repeating (408 Request Timeout, 429 Too Many Requests, 500, 502, 503, 504).
///
/// The delay before retry `n` (1-based) is `initialDelay × 2^(n-1)`, capped at `maximumDelay`.
package struct RetryPolicy: Sendable {
    /// Total tries, the first included (1 = no retry). Values below 1 count as 1.
    package var attempts: Int = 4
    /// Seconds before the first retry, doubled for each further one.
    package var initialDelay: Double = 0.2
    /// Seconds: the longest delay between two tries.
    package var maximumDelay: Double = 5

    /// A policy of `attempts` tries with the default delays (0.2 s doubling up to 5 s).
    package init(attempts: Int = 4) {
        self.attempts = attempts
    }

    /// The HTTP statuses retried.
    private static let transientStatuses: Set<Int> = [408, 429, 500, 502, 503, 504]

    /// The error codes S3 documents as worth repeating whatever the status (a `400
    /// RequestTimeout` on a slow link, a `200` CompleteMultipartUpload whose body is an
    /// `InternalError`), as an object store's signer puts them in an error's detail.
    static let transientServiceCodes = ["RequestTimeout", "InternalError", "SlowDown", "ServiceUnavailable", "OperationAborted"]

    /// Whether `error` may go away when the request is repeated: `.network`, `.httpStatus` with
    /// status 408, 429, 500, 502, 503 or 504, and `.httpStatus` whose detail names one of
    /// ``transientServiceCodes``. The one rule of every reader, fetch and upload.
    package static func isTransient(_ error: CairnError) -> Bool {
        if error.code == .network { return true }
        guard let status = error.httpStatusCode else { return false }
        if transientStatuses.contains(status) { return true }
        return transientServiceCodes.contains { error.message.contains("(\($0):") || error.message.contains("(\($0))") }
    }

    /// Seconds to wait before retry `retry` (1-based).
    package func delay(beforeRetry retry: Int) -> Double {
        var delay = max(0, initialDelay)
        for _ in 1..<max(1, retry) {
            delay *= 2
            if delay >= maximumDelay { break }
        }
        return min(delay, max(0, maximumDelay))
    }

    /// Runs `body` until it succeeds, throws a non-transient error, or has been tried `attempts`
    /// times, sleeping between tries (blocking the calling thread).
    ///
    /// - Parameters:
    ///   - body: the operation; each try must start over (a range request resumes by itself only
    ///     if `body` computes its range anew).
    ///   - onRetry: told of each retry before its delay: the error of the failed try and the
    ///     1-based number of the retry about to start.
    /// - Returns: what `body` returned.
    /// - Throws: the last error: the first non-transient one, or the transient one of the last try.
    package func run<T>(
        _ body: () throws(CairnError) -> T, onRetry: ((CairnError, Int) -> Void)? = nil,
        isTransient: (CairnError) -> Bool = RetryPolicy.isTransient
    ) throws(CairnError) -> T {
        var retry = 0
        while true {
            do {
                return try body()
            } catch {
                retry += 1
                guard isTransient(error), retry < max(1, attempts) else { throw error }
                onRetry?(error, retry)
                Self.sleep(seconds: delay(beforeRetry: retry))
            }
        }
    }

    /// `nanosleep(2)` for `seconds`, resumed after signals.
    private static func sleep(seconds: Double) {
        guard seconds > 0, seconds.isFinite else { return }
        let whole = min(seconds.rounded(.down), 86_400)
        var request = timespec(tv_sec: Int(whole), tv_nsec: Int((seconds - whole) * 1e9))
        var remaining = timespec()
        while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
    }
}
