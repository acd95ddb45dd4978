import Foundation
import Glibc

import Cairn

/// The parsers a hostile archive reaches, each driven by one input (`Spec/0001 §13`).
///
/// Every target must return normally or throw ``CairnError``; a crash, a trap, a sanitizer report
/// or a hang is a bug. Inputs are written to a scratch file in `/dev/shm` (or `$TMPDIR`) because
/// the readers take descriptors, as they do in real use.
enum FuzzTarget: String, CaseIterable {
    /// The front-to-back verifier: record framing, every record kind, chain digests, manifest
    /// cross-check, footer (`Extractor.verifyArchive`), plus `verifyPrefix` and write recovery.
    case records
    /// The seekable reader: prelude, header, footer, manifest tables (`Extractor(path:)`), then
    /// the extraction plan's checks and every entry lookup.
    case manifest
    /// Whole extraction into a scratch directory, seekable and streaming; afterwards nothing may
    /// exist outside the scratch directory.
    case extract

    func run(_ data: UnsafeRawBufferPointer) {
        let input = FuzzScratch.shared.write(data)
        switch self {
        case .records:
            FuzzScratch.blocking { _ = try? await Extractor.verifyArchive(atPath: input) }
            FuzzScratch.blocking { _ = try? await Extractor.verifyPrefix(atPath: input) }
            if let fd = try? FileDescriptor.open(input, flags: O_RDONLY) {
                _ = try? ArchiveRecovery.scan(fd, path: input)
                _ = try? fd.close()
            }
        case .manifest:
            guard let extractor = try? Extractor(path: input) else { return }
            defer { extractor.close() }
            _ = extractor.summary
            _ = try? extractor.makePlan(selection: nil)
            for entry in extractor.entries.prefix(64) {
                _ = extractor.entry(atPathInArchive: entry.path)
                _ = try? extractor.makePlan(selection: [entry.pathBytes])
            }
        case .extract:
            let destination = FuzzScratch.shared.freshDestination()
            FuzzScratch.blocking {
                guard let extractor = try? Extractor(path: input) else { return }
                defer { extractor.close() }
                var options = ExtractionOptions()
                options.maximumOutputBytes = 64 << 20
                try? await extractor.extractAll(to: URL(fileURLWithPath: destination + "/seekable"), options: options)
            }
            FuzzScratch.blocking {
                guard let handle = FileHandle(forReadingAtPath: input) else { return }
                defer { try? handle.close() }
                var options = ExtractionOptions()
                options.maximumOutputBytes = 64 << 20
                _ = try? await Extractor.extractStream(
                    from: handle, to: URL(fileURLWithPath: destination + "/stream"), options: options)
            }
            FuzzScratch.shared.checkNothingEscaped()
        }
    }
}

/// Scratch files for the fuzz targets, and a way to run async code from libFuzzer's callback.
final class FuzzScratch: @unchecked Sendable {
    // @unchecked: used only from libFuzzer's single driver thread.
    static let shared = FuzzScratch()

    let root: String
    private let input: String
    private var counter = 0

    private init() {
        let base = ProcessInfo.processInfo.environment["CAIRN_FUZZ_SCRATCH"]
            ?? (FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory())
        root = base + "/cairn-fuzz-\(getpid())"
        try? FileManager.default.removeItem(atPath: root)
        try? FileManager.default.createDirectory(atPath: root + "/out", withIntermediateDirectories: true)
        input = root + "/input.cairn"
    }

    /// Writes the input to the scratch file and returns its path.
    func write(_ data: UnsafeRawBufferPointer) -> String {
        let fd = open(input, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        if fd >= 0 {
            if let base = data.baseAddress, data.count > 0 { _ = Glibc.write(fd, base, data.count) }
            close(fd)
        }
        return input
    }

    /// A destination path that does not exist yet, inside `root/out`; earlier ones are removed.
    func freshDestination() -> String {
        try? FileManager.default.removeItem(atPath: root + "/out")
        try? FileManager.default.createDirectory(atPath: root + "/out", withIntermediateDirectories: true)
        counter += 1
        let path = root + "/out/d\(counter)"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// Traps if extraction wrote anything in `root` other than `input.cairn` and `out/`.
    func checkNothingEscaped() {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        for name in names where name != "input.cairn" && name != "out" {
            fatalError("extraction wrote outside its destination: \(root)/\(name)")
        }
    }

    /// Runs `body` on a detached task and waits for it (libFuzzer's callback is synchronous).
    static func blocking(_ body: @escaping @Sendable () async -> Void) {
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            await body()
            done.signal()
        }
        done.wait()
    }
}
