/// Identifies an app on one platform: the platform, its bundle (or package) identifier and the
/// store it is distributed through.
///
/// The export session stores it in the archive header (`appIdentifier` holds
/// ``bundleIdentifier``, `sourcePlatform` the platform, the metadata key
/// ``MigrationAppIdentifier/storeMetadataKey`` the store), and the import session hands it back in
/// ``ResourcesImportRequest/sourceAppIdentifier``.
public struct MigrationAppIdentifier: Hashable, Sendable, Codable, CustomStringConvertible {
    /// Where an app is distributed. Open set: `.googlePlay`, `.appStore`, `.none`, or any
    /// other through `StoreIdentifier("name")`.
    public struct StoreIdentifier: Hashable, Sendable, Codable, CustomStringConvertible {
        /// The store's name as stored, for example `"googlePlay"`; empty for ``none``.
        public var rawValue: String
        /// A store named `name`.
        public init(_ name: String) { rawValue = name }
        /// Google Play.
        public static let googlePlay = StoreIdentifier("googlePlay")
        /// Apple's App Store.
        public static let appStore = StoreIdentifier("appStore")
        /// No store (a distribution package, a build from source).
        public static let none = StoreIdentifier("")
        /// The name, or `none`.
        public var description: String { rawValue.isEmpty ? "none" : rawValue }

        /// Decodes the name from a single JSON string.
        ///
        /// - Throws: `DecodingError` when the value is not a string.
        public init(from decoder: any Decoder) throws {
            rawValue = try decoder.singleValueContainer().decode(String.self)
        }

        /// Encodes the name as a single string.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(rawValue)
        }
    }

    /// The header metadata key that holds ``storeIdentifier``.
    public static let storeMetadataKey = "cairn.migration.store"

    /// The platform the app runs on.
    public var platform: MigrationPlatform
    /// The bundle identifier (Android: the package name), for example `"org.example.notes"`.
    public var bundleIdentifier: String
    /// The store the app comes from.
    public var storeIdentifier: StoreIdentifier

    /// An app identifier.
    public init(platform: MigrationPlatform, bundleIdentifier: String, storeIdentifier: StoreIdentifier = .none) {
        self.platform = platform
        self.bundleIdentifier = bundleIdentifier
        self.storeIdentifier = storeIdentifier
    }

    /// `"<platform>/<bundle identifier>"`, with `@<store>` when there is one.
    public var description: String {
        storeIdentifier.rawValue.isEmpty
            ? "\(platform)/\(bundleIdentifier)" : "\(platform)/\(bundleIdentifier)@\(storeIdentifier.rawValue)"
    }
}
