extension Archiver {
    /// Header metadata keys starting with this prefix are Cairn's own (`Spec/0001 §5 rule 3`);
    /// the command line refuses them in `--meta`.
    public static let reservedMetadataPrefix = "cairn."

    /// The reserved header metadata key holding the source operands of the run that made the
    /// archive (``Configuration/sourcePaths``), so that a resume can check it is given the same.
    public static let sourcesMetadataKey = "cairn.sources"

    /// The `cairn.sources` value for `sources`: each raw path escaped with `\xHH`/`\\` (as `list`
    /// prints names) and joined with `"\n"`; when that is longer than
    /// ``FormatLimits/maximumMetadataValueLength``, `"sha256:"` and the SHA-256 of it in hex.
    static func sourcesMetadataValue(_ sources: [[UInt8]]) -> String {
        let joined = sources.map(PathBytes.escaped).joined(separator: "\n")
        guard joined.utf8.count > FormatLimits.maximumMetadataValueLength else { return joined }
        let digest = (try? SHA256.hash(Array(joined.utf8)))?.hexString ?? ""
        return "sha256:" + digest
    }

    /// What a resume is expected to continue: the options the caller gave explicitly and the
    /// sources. Each field that is set must equal the interrupted archive's; nil fields are not
    /// compared (the archive's own values are used, as always when resuming).
    /// The reserved header key recording the options that decide which items and bytes go in
    /// (`--exclude`, `--one-file-system`, `--no-xattrs`, `--no-sqlite-snapshot`), so that a resume can neither drop nor
    /// add what the interrupted run had (`Spec/0001 §5` rule 3). Absent when all are at their
    /// defaults, so such archives are unchanged.
    public static let selectionMetadataKey = "cairn.selection"

    /// The options that decide which items and bytes an archive holds.
    public struct SelectionOptions: Sendable, Equatable {
        public var exclusions: [String] = []
        public var staysOnOneFileSystem = false
        public var collectsExtendedAttributes = true
        /// ``Archiver/Configuration/snapshotsSQLiteDatabases``: whether a database's `-shm` and
        /// `-journal` are left out and its `-wal` follows it.
        public var snapshotsSQLiteDatabases = true

        public init(
            exclusions: [String] = [], staysOnOneFileSystem: Bool = false, collectsExtendedAttributes: Bool = true,
            snapshotsSQLiteDatabases: Bool = true
        ) {
            self.exclusions = exclusions
            self.staysOnOneFileSystem = staysOnOneFileSystem
            self.collectsExtendedAttributes = collectsExtendedAttributes
            self.snapshotsSQLiteDatabases = snapshotsSQLiteDatabases
        }

        /// The header value: one line per setting that is not the default (`exclude=PATTERN`,
        /// `one-file-system`, `no-xattrs`, `no-sqlite-snapshot`), or nil when all are defaults.
        public var recorded: String? {
            var lines = exclusions.map { "exclude=" + $0 }
            if staysOnOneFileSystem { lines.append("one-file-system") }
            if !collectsExtendedAttributes { lines.append("no-xattrs") }
            if !snapshotsSQLiteDatabases { lines.append("no-sqlite-snapshot") }
            return lines.isEmpty ? nil : lines.joined(separator: "\n")
        }

        /// Parses a recorded value (nil: the defaults).
        public init(recorded: String?) {
            for line in (recorded ?? "").split(separator: "\n", omittingEmptySubsequences: true) {
                if line.hasPrefix("exclude=") {
                    exclusions.append(String(line.dropFirst("exclude=".count)))
                } else if line == "one-file-system" {
                    staysOnOneFileSystem = true
                } else if line == "no-xattrs" {
                    collectsExtendedAttributes = false
                } else if line == "no-sqlite-snapshot" {
                    snapshotsSQLiteDatabases = false
                }
            }
        }

        var words: String {
            var parts = exclusions.map { "--exclude \($0)" }
            if staysOnOneFileSystem { parts.append("--one-file-system") }
            if !collectsExtendedAttributes { parts.append("--no-xattrs") }
            if !snapshotsSQLiteDatabases { parts.append("--no-sqlite-snapshot") }
            return parts.isEmpty ? "none" : parts.joined(separator: " ")
        }
    }

    public struct ResumeExpectation: Sendable {
        /// The source operands, raw file-system paths, in order; compared with the archive's
        /// `cairn.sources` metadata when it has one.
        public var sourcePaths: [[UInt8]]?
        /// Compared with the header's chunking policy.
        public var chunking: ChunkingPolicy?
        /// Compared with the header's codec and level (`none` when the archive is not compressible).
        public var compression: CompressionMethod?
        /// Compared with the header's compressible hint.
        public var isCompressible: Bool?
        /// Compared with the header's size estimate.
        public var sizeEstimate: UInt64?
        /// Compared with the header's resources version.
        public var resourcesVersion: String?
        /// Compared with the header's app identifier.
        public var appIdentifier: String?
        /// Compared with the header's metadata pairs, leaving out the reserved `cairn.` keys.
        public var metadata: [String: String]?
        /// The selection options the resuming caller gives; nil to take the archive's.
        public var selection: SelectionOptions?

        public init() {}

        /// What differs from `header`, one phrase each ("compression zstd:3 differs from the
        /// archive's lz4"); empty when everything given matches.
        package func differences(from header: ArchiveHeader) -> [String] {
            var found: [String] = []
            if let sourcePaths, let recorded = header.metadata[Archiver.sourcesMetadataKey],
                Archiver.sourcesMetadataValue(sourcePaths) != recorded
            {
                let given = sourcePaths.map(PathBytes.escaped).joined(separator: ", ")
                let archived =
                    recorded.hasPrefix("sha256:") ? "a different list" : recorded.split(separator: "\n").joined(separator: ", ")
                found.append("sources differ: the archive was made from \(archived), not \(given)")
            }
            if let selection {
                let recorded = SelectionOptions(recorded: header.metadata[Archiver.selectionMetadataKey])
                if selection != recorded {
                    found.append("selection options \(selection.words) differ from the archive's \(recorded.words)")
                }
            }
            if let chunking, chunking != header.chunking {
                found.append("chunking \(chunking) differs from the archive's \(header.chunking)")
            }
            if let isCompressible, isCompressible != header.isCompressible {
                found.append(
                    "compressible hint \(isCompressible ? "on" : "off") differs from the archive's \(header.isCompressible ? "on" : "off")")
            }
            // A store-raw archive records `none`, whatever codec was asked for alongside the hint.
            if let compression, header.isCompressible, isCompressible != false, compression != header.compression {
                found.append("compression \(compression) differs from the archive's \(header.compression)")
            }
            if let sizeEstimate, sizeEstimate != header.sizeEstimate {
                found.append("size estimate \(sizeEstimate) differs from the archive's \(header.sizeEstimate.map(String.init) ?? "none")")
            }
            if let resourcesVersion, resourcesVersion != header.resourcesVersion {
                found.append("resources version '\(resourcesVersion)' differs from the archive's '\(header.resourcesVersion)'")
            }
            if let appIdentifier, appIdentifier != header.appIdentifier {
                found.append("app id '\(appIdentifier)' differs from the archive's '\(header.appIdentifier)'")
            }
            if let metadata {
                let own = header.metadata.filter { !$0.key.hasPrefix(Archiver.reservedMetadataPrefix) }
                if metadata != own {
                    found.append("metadata \(Self.pairs(metadata)) differs from the archive's \(Self.pairs(own))")
                }
            }
            return found
        }

        private static func pairs(_ metadata: [String: String]) -> String {
            "{" + metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ", ") + "}"
        }
    }
}

extension Archiver.Configuration {
    /// Takes from `header` (an interrupted archive's) every option `given` leaves unset (nil):
    /// what a resume that re-makes the archive (an object store's upload, `Spec/0003 §3.3`) needs
    /// so that "options not given are taken from the archive" holds as for a local resume.
    package mutating func adopt(_ header: ArchiveHeader, except given: Archiver.ResumeExpectation) {
        if given.compression == nil { compression = header.compression }
        if given.chunking == nil { chunking = header.chunking }
        if given.isCompressible == nil { isCompressible = header.isCompressible }
        if given.sizeEstimate == nil { sizeEstimate = header.sizeEstimate }
        if given.resourcesVersion == nil { resourcesVersion = header.resourcesVersion }
        if given.appIdentifier == nil { appIdentifier = header.appIdentifier }
        if given.metadata == nil { metadata = header.metadata.filter { !$0.key.hasPrefix(Archiver.reservedMetadataPrefix) } }
        if given.selection == nil {
            let recorded = Archiver.SelectionOptions(recorded: header.metadata[Archiver.selectionMetadataKey])
            exclusions = recorded.exclusions
            staysOnOneFileSystem = recorded.staysOnOneFileSystem
            collectsExtendedAttributes = recorded.collectsExtendedAttributes
            snapshotsSQLiteDatabases = recorded.snapshotsSQLiteDatabases
        }
    }
}
