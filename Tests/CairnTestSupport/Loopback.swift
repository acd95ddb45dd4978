import Foundation
import Glibc

/// A test server (nginx, the fault proxy) that could not be started or used, with what it said.
public struct TestServerError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Ports and connections on 127.0.0.1 for the test servers.
public enum Loopback {
    /// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, read back, closed).
    /// Another process may take it before the caller binds it: callers retry on a bind failure.
    public static func freePort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestServerError("socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var address = loopbackAddress(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else { throw TestServerError("bind 127.0.0.1:0: \(String(cString: strerror(errno)))") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { throw TestServerError("getsockname: \(String(cString: strerror(errno)))") }
        return UInt16(bigEndian: address.sin_port)
    }

    /// Whether a TCP connection to `host` (an IPv4 address, 127.0.0.1 by default):`port` is
    /// accepted now.
    public static func accepts(port: UInt16, host: String = "127.0.0.1") -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopbackAddress(port: port)
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else { return false }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        return connected == 0
    }

    /// Waits until 127.0.0.1:`port` accepts connections, polling every 10 ms; gives up as soon
    /// as `stillRunning` says the server died, or after `timeout` seconds (only a bound against a
    /// hang: a server starting on a loaded machine can take many seconds).
    /// - Returns: whether it accepts.
    public static func waitUntilAccepting(
        port: UInt16, host: String = "127.0.0.1", timeout: Double = Await.safetyBound, stillRunning: () -> Bool
    ) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if accepts(port: port, host: host) { return true }
            if !stillRunning() { return false }
            usleep(10_000)
        }
        return false
    }

    private static func loopbackAddress(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }
}

extension Process {
    /// Sends `signal` and waits up to `timeout` seconds for the process to end, then SIGKILLs it
    /// and waits for that.
    func stop(with signal: Int32, timeout: Double = 5) {
        guard isRunning else { return }
        kill(processIdentifier, signal)
        let deadline = Date().addingTimeInterval(timeout)
        while isRunning, Date() < deadline { usleep(5_000) }
        if isRunning { kill(processIdentifier, SIGKILL) }
        waitUntilExit()
    }
}
