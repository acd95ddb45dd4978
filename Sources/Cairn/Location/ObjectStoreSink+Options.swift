extension ObjectStoreSink {
    /// How an upload moves its parts (`Spec/0003-command-line.md §1.3, §3.3`): how many are in
    /// flight at once and how long a request may stall.
    public struct UploadOptions: Sendable, Equatable {
        /// The default parts in flight: 4 (`--upload-concurrency`; issue 26: a store caps each
        /// connection, so several parts in flight are what fill a link).
        public static let defaultUploadConcurrency = 4
        /// The most parts in flight: 64.
        public static let maximumUploadConcurrency = 64

        /// Parts uploaded at once, `M`, 1 to ``maximumUploadConcurrency`` (values outside are
        /// clamped), each on a thread of its own; the archiver waits while `M` are in flight.
        ///
        /// Memory: at most `M` parts in flight plus the one being filled, about
        /// `(M + 1) × part size` bytes beyond the archiver's own budget (part size: 8 MiB, or the
        /// first parts' size from the estimate, `Spec/0003 §3.3` item 2; an archive that outgrows
        /// its estimate has larger parts after its 8,000th). With the defaults, 5 × 8 MiB = 40 MiB.
        public var uploadConcurrency: Int {
            didSet { uploadConcurrency = min(max(uploadConcurrency, 1), Self.maximumUploadConcurrency) }
        }
        /// Seconds without a byte of a request or its answer before the transfer counts as cut
        /// (then retried: 5 tries), more than 0 (default 30; `--timeout`).
        public var stallTimeout: Double

        /// - Parameters:
        ///   - uploadConcurrency: parts in flight at once, clamped to 1...64 (default 4).
        ///   - stallTimeout: seconds without a byte before a request counts as cut (default 30).
        public init(uploadConcurrency: Int = defaultUploadConcurrency, stallTimeout: Double = 30) {
            self.uploadConcurrency = min(max(uploadConcurrency, 1), Self.maximumUploadConcurrency)
            self.stallTimeout = stallTimeout > 0 ? stallTimeout : 30
        }

        /// The client of the store that these options configure.
        package func client(for configuration: S3Configuration) -> S3Client {
            var http = HTTPClient.Configuration()
            http.stallTimeout = stallTimeout
            return S3Client(configuration: configuration, http: http)
        }
    }
}
