/// An exporter without custom options: implement ``ResourcesExportingWithOptions``'s members with
/// `request: ResourcesExportRequest`.
///
/// ```swift
/// struct NotesExporter: ResourcesExporting {
///     var resourcesSizeEstimate: Int { 4 << 20 }
///     var resourcesVersion: String { "3" }
///     var resourcesCompressible: Bool { true }
///     func exportResources(to archiver: ResourcesArchiver, request: ResourcesExportRequest) async throws {
///         try await archiver.appendItem(at: container.documentsDirectory, pathInArchive: "Documents")
///     }
/// }
/// ```
public protocol ResourcesExporting: ResourcesExportingWithOptions where OptionsType == MigrationDefaultSupportedOptions {}
