import Foundation
import Glibc

/// A network link with a capped rate between this machine and a network namespace, for tests
/// and benchmarks of transfers on links slower than loopback (issue 26).
///
/// It creates the network namespace `cairn-link-TAG` and a veth pair between it and this
/// namespace: `clh-TAG` here with ``hostAddress`` (10.213.N.1/24), `cln-TAG` inside with
/// ``namespaceAddress`` (10.213.N.2/24). On both ends a token bucket filter (`tc qdisc ... tbf`)
/// caps what leaves at ``bytesPerSecond``, so downloads and uploads through the link share the
/// cap as on a real link. Servers listen here on ``hostAddress`` (a ``FaultProxy`` with
/// `address:` in front of ``NginxServer`` or ``RcloneS3Server``, which listen on 127.0.0.1);
/// clients run inside the namespace (``command(_:_:)``) and connect to ``hostAddress``.
///
/// The other parts of a real link come from elsewhere: a per-connection cap from nginx
/// `limit_rate` (``NginxServer``'s `/slow/` at its `slowRate`) or the proxy's
/// ``FaultProxy/Mode/shape(delay:bytesPerSecond:)``; latency from the same proxy mode (the netem
/// qdisc, which would add it here, does not exist on every machine).
///
/// Names depend only on `TAG`, so a run that crashed before ``stop()`` is cleaned up by the next
/// one with the same tag (``init(tag:bytesPerSecond:)`` removes what it finds first).
///
/// - Important: Needs root, `ip` and `tc` (``unavailableReason``). Call ``stop()`` when done
///   (also run by `deinit`, as a safety net).
public final class ShapedLink {
    /// The namespace's name (`cairn-link-TAG`).
    public let namespace: String
    /// This side's end of the pair (`clh-TAG`).
    public let hostInterface: String
    /// The namespace's end of the pair (`cln-TAG`).
    public let namespaceInterface: String
    /// The address of this side, where servers for the namespace's clients listen.
    public let hostAddress: String
    /// The address of the namespace's side.
    public let namespaceAddress: String
    /// The cap, in bytes per second, each way.
    public let bytesPerSecond: Int
    private var stopped = false

    /// The `ip` executable (iproute2).
    public static let ip = "/usr/sbin/ip"
    /// The `tc` executable (iproute2).
    public static let tc = "/usr/sbin/tc"

    /// Why a link cannot be made here (not root, `ip` or `tc` missing), or nil when it can.
    public static var unavailableReason: String? {
        if getuid() != 0 { return "a shaped link needs root (network namespaces, tc)" }
        for tool in [ip, tc] where !FileManager.default.isExecutableFile(atPath: tool) {
            return "a shaped link needs \(tool) (Debian's iproute2)"
        }
        return nil
    }

    /// Makes the link.
    ///
    /// - Parameters:
    ///   - tag: names the namespace and interfaces: 1 to 11 letters or digits (an interface name
    ///     has at most 15 bytes).
    ///   - bytesPerSecond: the cap each way (more than 0).
    /// - Throws: ``TestServerError`` naming the command that failed and what it said; what
    ///   was made before is removed.
    public init(tag: String, bytesPerSecond: Int) throws {
        guard (1...11).contains(tag.utf8.count), tag.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }), bytesPerSecond > 0 else {
            throw TestServerError("a shaped link's tag is 1 to 11 letters or digits and its rate more than 0, not '\(tag)', \(bytesPerSecond)")
        }
        if let reason = Self.unavailableReason { throw TestServerError(reason) }
        namespace = "cairn-link-" + tag
        hostInterface = "clh-" + tag
        namespaceInterface = "cln-" + tag
        // A /24 of its own per tag (a stable hash of it), so two tags do not share addresses.
        let subnet = tag.utf8.reduce(UInt32(17)) { ($0 &* 31 &+ UInt32($1)) % 250 } + 1
        hostAddress = "10.213.\(subnet).1"
        namespaceAddress = "10.213.\(subnet).2"
        self.bytesPerSecond = bytesPerSecond
        Self.remove(namespace: namespace, hostInterface: hostInterface)
        do {
            try build()
        } catch {
            Self.remove(namespace: namespace, hostInterface: hostInterface)
            stopped = true
            throw error
        }
    }

    deinit { stop() }

    private func build() throws {
        let bits = String(bytesPerSecond * 8) + "bit"
        // The bucket holds at least a GSO packet (64 KiB) and 10 ms of the rate.
        let burst = String(max(128 << 10, bytesPerSecond / 100))
        let tbf = ["tbf", "rate", bits, "burst", burst, "latency", "200ms"]
        try Self.run(Self.ip, ["netns", "add", namespace])
        try Self.run(Self.ip, ["link", "add", hostInterface, "type", "veth", "peer", "name", namespaceInterface, "netns", namespace])
        try Self.run(Self.ip, ["addr", "add", hostAddress + "/24", "dev", hostInterface])
        try Self.run(Self.ip, ["link", "set", hostInterface, "up"])
        try inside(Self.ip, ["addr", "add", namespaceAddress + "/24", "dev", namespaceInterface])
        try inside(Self.ip, ["link", "set", namespaceInterface, "up"])
        try inside(Self.ip, ["link", "set", "lo", "up"])
        try Self.run(Self.tc, ["qdisc", "replace", "dev", hostInterface, "root"] + tbf)
        try inside(Self.tc, ["qdisc", "replace", "dev", namespaceInterface, "root"] + tbf)
    }

    /// `executable arguments` run inside the namespace: the executable and arguments to start
    /// (`ip netns exec NAMESPACE executable arguments...`).
    public func command(_ executable: String, _ arguments: [String]) -> (executable: URL, arguments: [String]) {
        (URL(fileURLWithPath: Self.ip), ["netns", "exec", namespace, executable] + arguments)
    }

    /// Removes the namespace (and with it both ends of the pair and their qdiscs). Calling it
    /// again does nothing.
    public func stop() {
        guard !stopped else { return }
        stopped = true
        Self.remove(namespace: namespace, hostInterface: hostInterface)
    }

    private func inside(_ executable: String, _ arguments: [String]) throws {
        try Self.run(Self.ip, ["netns", "exec", namespace, executable] + arguments)
    }

    /// Removes what a link with these names left, ignoring what is not there.
    private static func remove(namespace: String, hostInterface: String) {
        _ = try? ChildProcess.run(URL(fileURLWithPath: ip), ["link", "del", hostInterface], timeout: 30)
        _ = try? ChildProcess.run(URL(fileURLWithPath: ip), ["netns", "del", namespace], timeout: 30)
    }

    private static func run(_ executable: String, _ arguments: [String]) throws {
        let result = try ChildProcess.run(URL(fileURLWithPath: executable), arguments, timeout: 30)
        guard result.status == 0 else {
            throw TestServerError("\(executable) \(arguments.joined(separator: " ")) failed (\(result.status)): \(result.stderr)")
        }
    }
}
