/// The platform an app's data comes from or goes to, as AppMigrationKit names it.
///
/// An open set: `.linux`, `.android`, `.iOS`, `.macOS`, and any other through
/// `MigrationPlatform("name")`. It is stored in the archive header's `sourcePlatform` field as
/// its ``rawValue`` (for example `"linux"`).
public struct MigrationPlatform: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The platform's name as stored, for example `"android"`.
    public var rawValue: String

    /// A platform named `name` (stored as is; names compare exactly).
    public init(_ name: String) { rawValue = name }

    /// Linux.
    public static let linux = MigrationPlatform("linux")
    /// Android.
    public static let android = MigrationPlatform("android")
    /// iOS and iPadOS.
    public static let iOS = MigrationPlatform("iOS")
    /// macOS.
    public static let macOS = MigrationPlatform("macOS")

    /// The platform this process runs on: `.linux`.
    public static var current: MigrationPlatform { .linux }

    /// The name.
    public var description: String { rawValue }

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
