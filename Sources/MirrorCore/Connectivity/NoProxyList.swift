import Glibc

/// A `no_proxy` value: the hosts that are reached directly although a proxy is set, matched
/// as libcurl matches them.
///
/// - `*` alone: every host.
/// - Entries are separated by commas and blanks.
/// - A name matches itself and every name below it (`example.org` and `.example.org` both
///   match `example.org` and `a.example.org`, not `notexample.org`), case-insensitively, a
///   trailing dot ignored on either side.
/// - An IP address host matches an equal address or a CIDR range (`10.0.0.0/8`, `fd00::/8`);
///   names are never resolved to addresses for this.
struct NoProxyList: Sendable {
    private let everything: Bool
    private let entries: [Substring]

    init(_ text: String) {
        everything = text == "*"
        entries = text.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" })
    }

    func excludes(host: String) -> Bool {
        if everything { return true }
        var name = Substring(host)
        if name.hasPrefix("[") && name.hasSuffix("]") { name = name.dropFirst().dropLast() }
        if let address = IPAddress(name) {
            return entries.contains { address.isWithin($0) }
        }
        if name.hasSuffix(".") { name = name.dropLast() }
        let lowered = name.lowercased()
        return entries.contains { entry in
            var entry = Substring(entry.lowercased())
            if entry.hasSuffix(".") { entry = entry.dropLast() }
            if entry.hasPrefix(".") { entry = entry.dropFirst() }
            guard !entry.isEmpty else { return false }
            return lowered == entry || lowered.hasSuffix("." + entry)
        }
    }
}

/// An IPv4 or IPv6 address as its bytes, for CIDR matching.
private struct IPAddress {
    var bytes: [UInt8]

    init?(_ text: Substring) {
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, String(text), &v4) == 1 {
            bytes = withUnsafeBytes(of: v4) { Array($0) }
        } else if inet_pton(AF_INET6, String(text), &v6) == 1 {
            bytes = withUnsafeBytes(of: v6) { Array($0) }
        } else {
            return nil
        }
    }

    /// Whether this address equals `entry`, or lies in it when it is `address/bits`.
    func isWithin(_ entry: Substring) -> Bool {
        let parts = entry.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let network = IPAddress(parts[0]), network.bytes.count == bytes.count else { return false }
        var bits = bytes.count * 8
        if parts.count == 2 {
            guard let prefix = Int(parts[1]), (0...bits).contains(prefix) else { return false }
            bits = prefix
        }
        for index in bytes.indices {
            let remaining = bits - index * 8
            if remaining <= 0 { break }
            let mask: UInt8 = remaining >= 8 ? 0xff : ~(0xff >> UInt8(remaining))
            if bytes[index] & mask != network.bytes[index] & mask { return false }
        }
        return true
    }
}
