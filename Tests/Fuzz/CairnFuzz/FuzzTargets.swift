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
    /// The seekable reader: prelude, header, footer, manifest tables (`Extractor(reader:)`), then
    /// the extraction plan's checks and every entry lookup.
    case manifest
    /// Whole extraction into a scratch directory, seekable and streaming; afterwards nothing may
    /// exist outside the scratch directory.
    case extract
    /// The format 2.0 decoders on their own, in memory: the input as an entry list and an entry
    /// record (`EntryCodec`), a pack item table (`PackItemTable`), a pack prefix and whole pack
    /// payload (`PackRecordPrefix`, `PackContent.read`), a manifest body and a manifest record
    /// payload (`Manifest.decodeBody`, `Manifest.decodeSegment`). If the input is an archive,
    /// each of its entry, pack and manifest records' payloads (whatever their CRCs say) and the
    /// manifest body they form go through the same decoders, so archive seeds reach them too.
    case entries
    /// minisign's key and signature parsers, in memory (`Spec/0004-trusted-archives.md §2`):
    /// the input as a file of public keys, a secret key file, a signature file, and as the
    /// 158 bytes of a secret key (see `KeyDecoders`).
    case keys
    /// The age v1 parsers of the encrypted archive's key block, in memory
    /// (`Spec/0004-trusted-archives.md §6`): the input as an age file (header, stanzas, MAC,
    /// payload; decrypted with a fixed identity and, under small work factors, a passphrase),
    /// an identity file, a recipients file and a Bech32 string (see `AgeDecoders`).
    case age
    /// The outer layer of an encrypted archive (`Spec/0004-trusted-archives.md §6.2`-§6.3): the
    /// envelope record, the key block (a fixed identity, or the keys in clear), the sealed blocks
    /// through the seekable and the stream reader (see `SealedDecoders`).
    case sealed

    func run(_ data: UnsafeRawBufferPointer) {
        if self == .entries {
            EntryDecoders.run(Array(data))
            return
        }
        if self == .keys {
            KeyDecoders.run(Array(data))
            return
        }
        if self == .age {
            AgeDecoders.run(Array(data))
            return
        }
        let input = FuzzScratch.shared.write(data)
        switch self {
        case .entries, .keys, .age:
            return
        case .sealed:
            SealedDecoders.run(path: input)
        case .records:
            FuzzScratch.blocking { _ = try? await Extractor.verifyArchive(at: .file(path: input)) }
            FuzzScratch.blocking { _ = try? await Extractor.verifyPrefix(at: .file(path: input)) }
            if let fd = try? FileDescriptor.open(input, flags: O_RDONLY) {
                _ = try? ArchiveRecovery.scan(fd, path: input, keying: nil)
                _ = try? fd.close()
            }
        case .manifest:
            guard let extractor = try? Extractor(reader: ArchiveReader(path: input)) else { return }
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
                guard let extractor = try? await Extractor(at: .file(path: input)) else { return }
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

/// The `entries` target: every 2.0 decoder that takes bytes, fed directly.
enum EntryDecoders {
    /// The most records of an archive input whose payloads are decoded.
    static let maximumRecords = 256

    static func run(_ bytes: [UInt8]) {
        // One per input (its contexts are made on first use): nothing carries over between inputs.
        let decompressor = ChunkDecompressor()
        decodeAll(bytes, using: decompressor)
        guard bytes.count >= 12, Array(bytes[0..<8]) == Prelude.magic else { return }
        // Walk the framing (Spec §3.1) without checking CRCs, so a mutated payload still
        // reaches its decoder.
        var offset = 12
        var body: [UInt8] = []
        var chunks: UInt64 = 0
        var count = 0
        while offset + RecordFraming.overhead <= bytes.count, count < maximumRecords {
            let type = bytes[offset]
            let length = (0..<4).reduce(0) { $0 | Int(bytes[offset + 4 + $1]) << (8 * $1) }
            guard length <= bytes.count - offset - RecordFraming.overhead else { break }
            let payload = Array(bytes[(offset + RecordFraming.headerLength)..<(offset + RecordFraming.headerLength + length)])
            switch RecordType(rawValue: type) {
            case .entry?:
                var r = ByteReader(payload, baseOffset: UInt64(offset), what: "entry record")
                _ = try? EntryCodec.decodeRecord(&r)
            case .chunk?:
                chunks += 1
            case .pack?:
                if let pack = try? PackContent.read(
                    payload: payload, offset: UInt64(offset), chunkCount: chunks, contentIDs: .sha256, using: decompressor) {
                    chunks += UInt64(pack.items.filter { $0.content == .inline }.count)
                }
            case .manifest?:
                if let segment = try? Manifest.decodeSegment(payload, offset: UInt64(offset), decompressor: decompressor) {
                    body += segment
                }
            default:
                break
            }
            offset += RecordFraming.overhead + length
            count += 1
        }
        if !body.isEmpty {
            _ = try? Manifest.decodeBody(body, offset: 0)
            // Single-byte damage in the body (which the CRCs of real records hide from the
            // other targets): flip one byte chosen by the input's length.
            var damaged = body
            damaged[bytes.count % damaged.count] ^= 0x01
            _ = try? Manifest.decodeBody(damaged, offset: 0)
        }
    }

    /// The input as each decoder's whole input.
    static func decodeAll(_ bytes: [UInt8], using decompressor: ChunkDecompressor) {
        var r = ByteReader(bytes, baseOffset: 0, what: "entry list")
        _ = try? EntryCodec.decode(&r)
        r = ByteReader(bytes, baseOffset: 0, what: "entry record")
        _ = try? EntryCodec.decodeRecord(&r)
        for chunkCount: UInt64 in [0, 3, 1 << 40] {
            _ = try? PackItemTable.decode(bytes, packOffset: 0, chunkCount: chunkCount)
        }
        r = ByteReader(bytes, baseOffset: 0, what: "pack record")
        _ = try? PackRecordPrefix.decode(&r, payloadLength: bytes.count)
        _ = try? PackContent.read(payload: bytes, offset: 0, chunkCount: 2, contentIDs: .sha256, using: decompressor)
        _ = try? Manifest.decodeBody(bytes, offset: 0)
        _ = try? Manifest.decodeSegment(bytes, offset: 0, decompressor: decompressor)
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
