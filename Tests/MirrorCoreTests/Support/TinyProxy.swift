import Foundation

/// tinyproxy, a real forward HTTP proxy, inside a `NetworkNamespace` on 127.0.0.1:`port` there.
/// It resolves names from a hosts file of its own (bind-mounted over /etc/hosts in a mount
/// namespace of its own), so it can reach an origin by a name nothing else in the namespace
/// resolves: only the proxy reaches it, as in a network where all traffic leaves by a proxy.
enum TinyProxy {
    struct Unavailable: Error, CustomStringConvertible {
        var description: String
    }

    static let executable = "/usr/bin/tinyproxy"

    /// Starts it and returns once it accepts connections; `namespace.stop()` ends it.
    static func start(in namespace: NetworkNamespace, port: UInt16, hosts: [String: String]) throws {
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw Unavailable(description: "tinyproxy not found: install it with `apt-get install -y tinyproxy-bin` (make test does this)")
        }
        let configuration = """
            Port \(port)
            Listen 127.0.0.1
            Timeout 30
            MaxClients 20
            Allow 127.0.0.1
            LogLevel Info

            """
        let conf = try namespace.scratch.write(Data(configuration.utf8), to: "tinyproxy.conf")
        let hostsText = hosts.map { "\($0.value) \($0.key)\n" }.joined()
        let hostsFile = try namespace.scratch.write(Data(("127.0.0.1 localhost\n" + hostsText).utf8), to: "tinyproxy.hosts")
        try namespace.start([
            "/usr/bin/unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
            "mount --bind \"$0\" /etc/hosts && exec \"$1\" -d -c \"$2\"", hostsFile, executable, conf,
        ], log: "tinyproxy.log", readyWhen: "Accepting connections", server: "tinyproxy")
    }
}
