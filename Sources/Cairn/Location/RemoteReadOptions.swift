/// How a remote archive (`http(s)://` or `s3://`) is read at random: how many range requests
/// are kept in flight, and how long a connection or a transfer may take
/// (`Spec/0001-container-format.md §13.9`).
///
/// ```swift
/// var remote = RemoteReadOptions()
/// remote.connections = 8
/// let extractor = try await Extractor(at: ArchiveLocation(parsing: "https://example.com/a.cairn"), remote: remote)
/// ```
///
/// A local archive ignores these options.
public struct RemoteReadOptions: Sendable, Equatable {
    /// The most requests a reader keeps in flight.
    public static let maximumConnections = 64
    /// The default number of requests in flight: 4 (issue 26: a link that caps each connection
    /// at a quarter of its speed is filled by four).
    public static let defaultConnections = 4

    /// Range requests kept in flight at once, from 1 to ``maximumConnections`` (a value outside
    /// is taken as the nearest bound). Each asks for at most 8 MiB, so the bytes in flight are
    /// at most `connections × 8 MiB`. Default ``defaultConnections``.
    public var connections: Int {
        get { storedConnections }
        set { storedConnections = min(Self.maximumConnections, max(1, newValue)) }
    }
    /// Seconds to wait for a TCP (and TLS) connection. Default 10.
    public var connectTimeout: Double
    /// Seconds without a byte of an answer before its transfer counts as cut (and is retried).
    /// Default 30.
    public var stallTimeout: Double

    private var storedConnections = RemoteReadOptions.defaultConnections

    /// - Parameters:
    ///   - connections: requests in flight (clamped to 1...64).
    ///   - connectTimeout: seconds to connect.
    ///   - stallTimeout: seconds without a byte.
    public init(connections: Int = RemoteReadOptions.defaultConnections, connectTimeout: Double = 10, stallTimeout: Double = 30) {
        self.connectTimeout = connectTimeout
        self.stallTimeout = stallTimeout
        self.connections = connections
    }

    /// The configuration of the client the requests go through.
    package var http: HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration()
        configuration.connectTimeout = connectTimeout
        configuration.stallTimeout = stallTimeout
        return configuration
    }
}
