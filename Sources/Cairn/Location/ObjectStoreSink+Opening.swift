extension ObjectStoreSink {
    /// Starts a new multipart upload to `location`, sending `HeadObject` and
    /// `CreateMultipartUpload` on a dedicated thread, so the caller's executor never waits on the
    /// network.
    ///
    /// - Parameters:
    ///   - location: the bucket and key the archive goes to.
    ///   - configuration: the store, region and credentials.
    ///   - overwrite: whether an existing object at the key may be replaced (by the final
    ///     `CompleteMultipartUpload` only).
    ///   - statePath: the local state file (refused when one is already there, unless
    ///     `overwrite`: then the upload it records is aborted first).
    ///   - sizeEstimate: the archive's expected size in bytes, which picks the part size.
    ///   - options: parts in flight (memory about `(M + 1) × part size`) and the stall timeout.
    /// - Returns: the sink, to hand to `Archiver(sink:configuration:)`.
    /// - Throws: ``CairnError`` `.alreadyExists` naming the object when it exists and `overwrite`
    ///   is false, or naming the state file when an interrupted upload is recorded there;
    ///   `.httpStatus` (403 for bad credentials, 404 for a missing bucket) and `.network` naming
    ///   the endpoint.
    public static func startUpload(
        to location: S3Location, configuration: S3Configuration, overwrite: Bool = false, statePath: String,
        sizeEstimate: UInt64? = nil, options: UploadOptions = UploadOptions()
    ) async throws(CairnError) -> ObjectStoreSink {
        try await DedicatedThread.run { () throws(CairnError) in
            try ObjectStoreSink(
                location: location, configuration: configuration, overwrite: overwrite, statePath: statePath,
                sizeEstimate: sizeEstimate, options: options)
        }
    }

    /// Continues the upload recorded in `statePath` (`ListParts` tells which recorded parts the
    /// store still holds; a store that no longer knows the upload gets a new one), on a
    /// dedicated thread. Run the archiver again from the start with the same sources: each part
    /// the store already holds is skipped instead of sent.
    ///
    /// - Parameters:
    ///   - location: the bucket and key, as recorded.
    ///   - configuration: the store, as recorded (the same endpoint).
    ///   - overwrite: whether the final `CompleteMultipartUpload` may replace an object at the key.
    ///   - statePath: the state file the interrupted upload kept.
    ///   - options: parts in flight and the stall timeout (need not be the interrupted run's).
    /// - Throws: ``CairnError`` `.notFound` when there is no state file; `.invalidArgument` when it
    ///   records another object or store; `.corrupted` for a state file that does not parse;
    ///   `.httpStatus` and `.network` naming the endpoint.
    public static func resumeUpload(
        of location: S3Location, configuration: S3Configuration, overwrite: Bool = false, statePath: String,
        options: UploadOptions = UploadOptions()
    ) async throws(CairnError) -> ObjectStoreSink {
        try await DedicatedThread.run { () throws(CairnError) in
            try ObjectStoreSink(resuming: location, configuration: configuration, overwrite: overwrite, statePath: statePath, options: options)
        }
    }

    /// What the upload recorded in `statePath` has become (`HeadObject`, then, for an object of
    /// the archive's length, ranged reads of its first bytes and its last part), asked on a
    /// dedicated thread: whether a resume can continue it, has nothing to do, or would replace
    /// another object. The state file is removed only when the object is confirmed as the
    /// upload's.
    ///
    /// - Parameters:
    ///   - statePath: the state file to look at.
    ///   - location: the object it records.
    ///   - configuration: the store it records.
    ///   - options: the stall timeout of the requests.
    /// - Throws: ``CairnError`` `.busy` when another process is uploading with the state file;
    ///   `.corrupted` for a state file that does not parse; `.httpStatus`, `.network`,
    ///   `.sourceChanged` naming the endpoint (the state file is then kept).
    public static func recordedUpload(
        at statePath: String, location: S3Location, configuration: S3Configuration, options: UploadOptions = UploadOptions()
    ) async throws(CairnError) -> RecordedUpload {
        try await DedicatedThread.run { () throws(CairnError) in
            try recordedUpload(at: statePath, location: location, configuration: configuration, options: options)
        }
    }
}
