/// The option type of an exporter without custom options (``ResourcesExporting``): it has no
/// values, so its ``allCases`` is empty and no request can carry one.
public enum MigrationDefaultSupportedOptions: CaseIterable, Hashable, Sendable, RawRepresentable {
    /// Always nil: there are no options.
    public init?(rawValue: String) { nil }
    /// Never called: there are no values.
    public var rawValue: String { switch self {} }
    /// Empty.
    public static var allCases: [MigrationDefaultSupportedOptions] { [] }
}
