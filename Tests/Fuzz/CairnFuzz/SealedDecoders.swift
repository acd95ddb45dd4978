import Foundation
import Glibc

import Cairn

/// The `sealed` target: the outer layer of an encrypted archive (`Spec/0004-trusted-archives.md
/// §6.2`, §6.3), the input taken as an archive file. Its envelope record is read by the one
/// parser of both readers (`OpenedEnvelope`); its key block is opened with the `age` target's
/// identity (32 bytes of 0x42), or, when it is exactly a secrets record (97 bytes), taken as the
/// keys in clear, so that mutations of a seed get past the key block to the sealed blocks. Then
/// the seekable reader (`SealedArchiveSource`, complete and partial: block layout, every block
/// opened, the inner archive read and verified) and the stream reader (`SealedBlockStream`, the
/// inner archive verified as it is released) each read it. Each must return or throw
/// `CairnError`.
enum SealedDecoders {
    static func openKeyBlock(_ record: EnvelopeRecord) throws(CairnError) -> [UInt8] {
        if record.keyBlock.count == ArchiveSecrets.encodedLength { return record.keyBlock }
        guard let identity = AgeDecoders.identity else { throw CairnError(.untrusted, "no identity") }
        return try AgeFile.decrypt(record.keyBlock, with: [identity], what: "key block")
    }

    static func run(path: String) {
        for partial in [false, true] {
            FuzzScratch.blocking {
                guard let source = try? SealedArchiveSource.open(LocalArchiveSource(path: path), partial: partial, openKeyBlock: openKeyBlock)
                else { return }
                guard let reader = try? ArchiveReader(source: source, keying: nil) else {
                    // The inner archive's start, read through the blocks, even without a footer.
                    var prefix = [UInt8](repeating: 0, count: 4096)
                    _ = try? prefix.withUnsafeMutableBytes { try source.read(fromAbsoluteOffset: 0, into: $0) }
                    source.close()
                    return
                }
                let extractor = Extractor(reader: reader)
                defer { extractor.close() }
                _ = try? await extractor.verify()
            }
        }
        FuzzScratch.blocking {
            guard let descriptor = try? FileDescriptor.open(path, flags: O_RDONLY) else { return }
            defer { _ = try? descriptor.close() }
            let outer = SequentialArchiveBytes(descriptor: descriptor, finish: {}, cancel: {})
            guard let (bytes, _) = try? SealedBlockStream.open(outer, name: "fuzz", openKeyBlock: openKeyBlock) else { return }
            _ = try? await Extractor.verify(bytes, path: "fuzz", keying: nil)
        }
    }
}
