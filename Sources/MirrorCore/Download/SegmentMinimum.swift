/// `segment_min` and `sync --segment-min`: the size from which a file may be fetched over
/// several connections.
public enum SegmentMinimum {
    /// Below this a file is never split: a connection's set-up costs more than it gains.
    public static let floor: Int64 = 1 << 20

    /// Why a `--segment-min` value is unusable.
    public struct Problem: Error, CustomStringConvertible {
        public let description: String
    }

    /// `--segment-min`'s value: a size (`ByteCountSyntax`, at least `floor`) or `off`
    /// (`Int64.max`).
    public static func parse(_ text: String) throws(Problem) -> Int64 {
        if text == "off" { return .max }
        let bytes: Int64
        do {
            bytes = try ByteCountSyntax.parse(text)
        } catch {
            throw Problem(description: error.message)
        }
        guard bytes >= floor else { throw Problem(description: "expected a size of at least 1MiB or `off`, found \(bytes) bytes") }
        return bytes
    }
}
