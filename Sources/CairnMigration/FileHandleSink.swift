import Cairn
import Foundation

/// Writes an archive to an open file handle (a pipe, a socket, a file), in order, through
/// Cairn's `FileDescriptor.writeAll` (which retries `EINTR` and short writes). The handle stays
/// open; the caller closes it.
final class FileHandleSink: ArchiveSink {
    private let descriptor: FileDescriptor

    /// - Parameter name: how write errors name the output.
    init(_ handle: FileHandle, name: String) {
        descriptor = FileDescriptor(rawValue: handle.fileDescriptor, path: name)
    }

    nonisolated(nonsending) func write(_ bytes: [UInt8]) async throws {
        try descriptor.writeAll(bytes)
    }

    nonisolated(nonsending) func finish() async throws {}

    nonisolated(nonsending) func abandon() async {}
}
