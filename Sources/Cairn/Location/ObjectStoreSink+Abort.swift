import Glibc

extension ObjectStoreSink {
    /// Gives up the upload recorded in `statePath` (`Spec/0003-command-line.md §16`):
    /// `AbortMultipartUpload`, so the store drops its parts and stops charging for them, then the
    /// state file is removed. Only the recorded upload is aborted, never another in-progress
    /// upload to the same key (another tool's, or another machine's).
    ///
    /// - Parameters:
    ///   - statePath: the state file of the upload (locked while it is aborted).
    ///   - location: the object it must record.
    ///   - configuration: the store it must record (the same endpoint).
    ///   - options: the stall timeout of the request.
    /// - Returns: the state that was recorded (its upload id, parts and bytes, for a message).
    /// - Throws: `.notFound` when no upload is recorded there (no file, or no whole line);
    ///   `.busy` when a `cairn` process is uploading with it; `.invalidArgument` when it records
    ///   another object or store; `.corrupted`; `.httpStatus` and `.network` naming the endpoint
    ///   (the state file is then kept, so the abort can be tried again). An upload the store no
    ///   longer knows (404) counts as aborted.
    package static func abortRecordedUpload(
        at statePath: String, location: S3Location, configuration: S3Configuration, options: UploadOptions = UploadOptions()
    ) throws(CairnError) -> MultipartUploadState {
        let nothing = CairnError(.notFound, "no interrupted upload to \(location) is recorded here; nothing to abort", path: statePath)
        guard access(statePath, F_OK) == 0 else { throw nothing }
        let journal = try UploadJournal(path: statePath, creating: false)
        defer { journal.close() }
        guard let state = try MultipartUploadState.load(from: statePath) else { throw nothing }
        guard state.bucket == location.bucket, state.key == location.key, state.endpoint == configuration.endpoint else {
            throw CairnError(
                .invalidArgument,
                "records an upload to s3://\(state.bucket)/\(state.key) at \(state.endpoint), not to \(location) at \(configuration.endpoint)",
                path: statePath)
        }
        try options.client(for: configuration).abortMultipartUpload(location, uploadID: state.uploadID)
        unlink(statePath)
        return state
    }

    /// Gives up the upload recorded in `statePath` on a dedicated thread: `AbortMultipartUpload`
    /// (AWS S3 multipart upload API), then the state file removed (`Spec/0003-command-line.md §16`).
    ///
    /// - Parameters:
    ///   - statePath: the state file of the upload.
    ///   - location: the object it must record.
    ///   - configuration: the store it must record (the same endpoint).
    ///   - options: the stall timeout of the request.
    /// - Returns: the upload id that was aborted.
    /// - Throws: ``CairnError`` `.notFound` when no upload is recorded there; `.busy` when a
    ///   `cairn` process is uploading with it; `.invalidArgument` when it records another object
    ///   or store; `.corrupted`; `.httpStatus` and `.network` naming the endpoint (the state file
    ///   is kept).
    @discardableResult
    public static func abortUpload(
        recordedAt statePath: String, location: S3Location, configuration: S3Configuration, options: UploadOptions = UploadOptions()
    ) async throws(CairnError) -> String {
        try await DedicatedThread.run { () throws(CairnError) in
            try abortRecordedUpload(at: statePath, location: location, configuration: configuration, options: options).uploadID
        }
    }
}
