import Foundation

/// dnsmasq as the resolver inside a `NetworkNamespace`, on 127.0.0.1:53 there: it answers
/// for `domain` alone, from `addresses`, and says NXDOMAIN (authoritatively) for every other
/// name in it; names outside it are refused.
enum Dnsmasq {
    struct Unavailable: Error, CustomStringConvertible {
        var description: String
    }

    static let executable = "/usr/sbin/dnsmasq"

    /// Starts it inside `namespace` and returns once it answers; `namespace.stop()` ends it.
    static func start(in namespace: NetworkNamespace, domain: String, addresses: [String: String]) throws {
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw Unavailable(description: "dnsmasq not found: install it with `apt-get install -y dnsmasq-base` (make test does this)")
        }
        var arguments = [
            executable, "--no-daemon", "--no-resolv", "--no-hosts", "--conf-file=/dev/null", "--user=root",
            "--listen-address=127.0.0.1", "--bind-interfaces", "--port=53", "--log-facility=-",
            "--pid-file=" + namespace.scratch.path("dnsmasq.pid"), "--local=/\(domain)/",
        ]
        arguments += addresses.map { "--address=/\($0.key)/\($0.value)" }
        try namespace.start(arguments, log: "dnsmasq.log", readyWhen: "started", server: "dnsmasq")
    }
}
