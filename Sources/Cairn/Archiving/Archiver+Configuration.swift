import Foundation

extension Archiver {
    /// Options for a new archive. Every field has a sensible default.
    public struct Configuration: Sendable {
        /// How file contents are cut into chunks; default FastCDC 16/64/256 KiB.
        public var chunking: ChunkingPolicy = .default
        /// The per-chunk codec; default LZ4. Ignored (chunks stored raw) when
        /// ``isCompressible`` is false.
        public var compression: CompressionMethod = .lz4
        /// The creator's hint that the payload is worth compressing.
        public var isCompressible = true
        /// The creator's estimate of the total content bytes; used for progress when given.
        public var sizeEstimate: UInt64?
        /// The payload's own version string (AppMigrationKit's `resourcesVersion`).
        public var resourcesVersion = ""
        /// The identifier of the app making the archive.
        public var appIdentifier = ""
        /// The platform, by default `"Linux <machine>"`.
        public var sourcePlatform = Configuration.currentPlatform
        /// Free key/value pairs stored in the header. Keys starting with `cairn.` are reserved
        /// (``Archiver/reservedMetadataPrefix``).
        public var metadata: [String: String] = [:]
        /// The source operands (raw file-system paths, in the order they are appended), recorded
        /// in the header as `cairn.sources` so that a resume can check it is given the same
        /// (``Archiver/ResumeExpectation``). Nil records nothing.
        public var sourcePaths: [[UInt8]]?
        /// The maker's key: when set, the archive is signed (format 2.2): an Ed25519 signature
        /// after commit 0, after a commit at least every 4 MiB of archive, and a root signature
        /// over the whole archive, its manifest and footer at the end of the body
        /// (`Spec/0004-trusted-archives.md §3.4`). A reader given the matching ``PublicKey`` as a
        /// trusted key releases only what these signatures cover. Nil (the default): an unsigned
        /// format 2.1 archive. A resume must be given the same key (`Spec/0004 §3.5`).
        public var signingKey: SigningKey?
        /// Encrypts the archive for these recipients or this passphrase (format 3.0,
        /// `Spec/0004-trusted-archives.md §6`): a reader needs one of their identities
        /// (``ArchiveDecryption``). Nil (the default): a plain archive.
        public var encryption: ArchiveEncryption?
        /// The exact envelope and keys to seal with, for tests and vectors; when nil and
        /// ``encryption`` is set, the archiver makes them (`ArchiveSealing`).
        package var sealing: ArchiveSealing?
        /// The keys of a keyed archive (`Spec/0004-trusted-archives.md §6.6–§6.7`): chunk ids are
        /// HMAC-SHA-256 under its id key and FastCDC's gear table is derived from its chunker
        /// key. Every reader of the archive must be given the same value. Nil (the default): a
        /// plain archive, SHA-256 ids and the published gear table. Set by the encrypted
        /// archive's writer, which seals the result; a resume must be given the same keys.
        package var keying: ChunkKeying?
        /// How many bytes may be in flight (read, not yet written); default
        /// ``BackpressurePolicy/default``.
        public var backpressure: BackpressurePolicy = .default
        /// Bytes of content per batch, the unit of parallel work: each batch is hashed and
        /// compressed by its own task, so batches in flight use every core. Default 1 MiB;
        /// at least twice the maximum chunk length and at most the high watermark.
        public var batchBytes = 1024 * 1024
        /// Glob patterns (`fnmatch(3)`, `*` does not cross `/`) matched against each item's path
        /// in archive and against each of its components' tails; a match leaves the item (and,
        /// for a directory, everything below it) out. tar's `--exclude`.
        public var exclusions: [String] = []
        /// Whether directories on another file system than their parent are left out (their
        /// entry is kept, their contents are not). tar's `--one-file-system`.
        public var staysOnOneFileSystem = false
        /// Whether items' extended attributes are archived (`user.*`; `trusted.*` and
        /// `security.*` when readable; POSIX ACLs as `system.posix_acl_access` and
        /// `system.posix_acl_default`), in the order the file system lists them. Attributes over
        /// the format's limits are left out with a warning (``ExportProperties/warnings``).
        /// Default true; tar's `--xattrs`, and `--no-xattrs` in the CLI.
        public var collectsExtendedAttributes = true
        /// How many batches are hashed and compressed at once; nil for one per core.
        public var workerCount: Int?
        /// Called once per item as its entry is written (for `-v`), in archive order, on the
        /// task that called the append method.
        public var onEntry: (@Sendable (ArchiveEntry) -> Void)?
        /// Whether SQLite databases (files beginning with "SQLite format 3" and a NUL) are copied
        /// at a consistent point: each is opened read-only with libsqlite3 and a read transaction
        /// is held while its main file, and then its `-wal`, are read, so the archive holds one
        /// committed state (in rollback-journal mode no writer can commit meanwhile; in WAL
        /// mode the snapshot is pinned). Its `-shm` and `-journal` are left out. No temporary
        /// copy is made. A database that cannot be locked within
        /// ``sqliteLockTimeoutMilliseconds`` or opened is archived as a plain file with a
        /// warning naming it (``ExportProperties/warnings``). Default true; `--no-sqlite-snapshot`
        /// in the CLI turns it off. `Spec/0003-command-line.md §3.2`.
        public var snapshotsSQLiteDatabases = true
        /// How long a database's read transaction may wait for a writer's lock, in milliseconds
        /// (`sqlite3_busy_timeout`); default 3000.
        public var sqliteLockTimeoutMilliseconds: Int32 = 3000
        /// Test hook: called after each pass over a source file's bytes (source path, pass
        /// number from 0), before it is checked for changes, to change the file in between.
        package var afterReadPass: (@Sendable ([UInt8], Int) -> Void)?
        /// Test hook: for a source path, the byte offset at which reading it fails with `EIO`
        /// (nil: never), to exercise the read-error path.
        package var readFailure: (@Sendable ([UInt8]) -> UInt64?)?

        public init() {}

        static var currentPlatform: String {
            var info = utsname()
            uname(&info)
            let machine = withUnsafeBytes(of: info.machine) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            return "Linux \(machine)"
        }

        /// What the item producer takes from this configuration.
        var producerOptions: ItemProducer.Options {
            ItemProducer.Options(
                exclusions: ExclusionPatterns(exclusions), staysOnOneFileSystem: staysOnOneFileSystem,
                workerCount: workerCount, collectsExtendedAttributes: collectsExtendedAttributes, readFailure: readFailure,
                snapshotsSQLiteDatabases: snapshotsSQLiteDatabases,
                sqliteLockTimeoutMilliseconds: max(0, sqliteLockTimeoutMilliseconds), afterReadPass: afterReadPass)
        }

        /// The options that decide which items and bytes go in, as a resume must compare them.
        public var selectionOptions: Archiver.SelectionOptions {
            Archiver.SelectionOptions(
                exclusions: exclusions, staysOnOneFileSystem: staysOnOneFileSystem,
                collectsExtendedAttributes: collectsExtendedAttributes, snapshotsSQLiteDatabases: snapshotsSQLiteDatabases)
        }

        /// The compression method actually used for chunks.
        var effectiveCompression: CompressionMethod { isCompressible ? compression : .none }

        var header: ArchiveHeader {
            var pairs = metadata
            if let sourcePaths { pairs[Archiver.sourcesMetadataKey] = Archiver.sourcesMetadataValue(sourcePaths) }
            if let selection = selectionOptions.recorded { pairs[Archiver.selectionMetadataKey] = selection }
            return ArchiveHeader(
                chunking: chunking, compression: effectiveCompression, isCompressible: isCompressible,
                sizeEstimate: sizeEstimate, resourcesVersion: resourcesVersion, sourcePlatform: sourcePlatform,
                appIdentifier: appIdentifier, metadata: pairs)
        }
    }
}
