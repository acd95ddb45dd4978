/// What the migration system asks of an exporter: where the data goes and, for an exporter
/// with custom options (``ResourcesExportingWithOptions``), which of them the destination wants.
///
/// `Options` is the exporter's option type: a `String`-backed enumeration (the raw values are
/// what a destination names).
public struct MigrationRequestWithOptions<Options: CaseIterable & Hashable & RawRepresentable & Sendable>: Sendable
where Options.RawValue == String {
    /// The platform the data is exported to.
    public var destinationPlatform: MigrationPlatform
    /// The options the destination asked for; empty for none.
    public var options: Set<Options>

    /// A request, for a session or a test.
    public init(destinationPlatform: MigrationPlatform = .linux, options: Set<Options> = []) {
        self.destinationPlatform = destinationPlatform
        self.options = options
    }
}

/// A request without custom options.
public typealias MigrationRequest = MigrationRequestWithOptions<MigrationDefaultSupportedOptions>

/// The request `ResourcesExporting.exportResources(to:request:)` receives: it carries
/// ``MigrationRequestWithOptions/destinationPlatform``.
public typealias ResourcesExportRequest = MigrationRequest
