/// What the import session tells an importer about the archive it imports, read from the
/// archive's header before anything was extracted.
public struct ResourcesImportRequest: Sendable, Equatable {
    /// The app that exported the data.
    public let sourceAppIdentifier: MigrationAppIdentifier
    /// The exporter's ``ResourcesExportingWithOptions/resourcesVersion``.
    public let sourceVersion: String

    /// A request, for a session or a unit test.
    public init(sourceAppIdentifier: MigrationAppIdentifier, sourceVersion: String) {
        self.sourceAppIdentifier = sourceAppIdentifier
        self.sourceVersion = sourceVersion
    }
}
