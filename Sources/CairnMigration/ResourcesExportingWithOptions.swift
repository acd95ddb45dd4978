import Foundation

/// An app's exporter, with options the destination can ask for: it names its data's size,
/// format version and compressibility, and appends its files to a ``ResourcesArchiver``.
///
/// The export session calls ``exportResources(to:request:)`` once. Append each item as it is
/// ready (``ResourcesArchiver/appendItem(at:pathInArchive:)``): progress follows the bytes
/// appended. Do not make temporary copies of large files; append them where they are.
///
/// - Important: Cancellation arrives as `CancellationError` from the archiver; do not catch it.
public protocol ResourcesExportingWithOptions {
    /// The exporter's options (for an exporter without any: ``MigrationDefaultSupportedOptions``).
    associatedtype OptionsType: CaseIterable & Hashable & RawRepresentable & Sendable where OptionsType.RawValue == String

    /// An upper estimate of the bytes the export appends (content bytes, before compression).
    /// The session checks that the destination has this much free space before writing and
    /// uses it as the progress total.
    var resourcesSizeEstimate: Int { get }
    /// The format version of the exported data (for example `"3"`), handed to the importer as
    /// ``ResourcesImportRequest/sourceVersion``.
    var resourcesVersion: String { get }
    /// Whether the data compresses (false for media or already compressed files): when false,
    /// chunks are stored uncompressed.
    var resourcesCompressible: Bool { get }

    /// Appends the app's data to `archiver`.
    ///
    /// - Throws: any error; the session abandons the archive (nothing appears at the
    ///   destination) and rethrows it. `CancellationError` when the export was cancelled.
    nonisolated(nonsending) func exportResources(to archiver: ResourcesArchiver, request: MigrationRequestWithOptions<OptionsType>) async throws
}
