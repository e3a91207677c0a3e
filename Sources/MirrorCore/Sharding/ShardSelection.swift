/// One shard of a manifest: shard `index` of `count` (`--shard K/N`, 0 ≤ K < N).
public struct ShardSelection: Sendable, Hashable, CustomStringConvertible {
    public let index: Int
    public let count: Int

    /// The largest N accepted: far more machines than anyone runs, small enough that the
    /// per-shard totals of `plan` stay a short table.
    public static let maximumCount = 100_000

    public init?(index: Int, count: Int) {
        guard count >= 1, count <= Self.maximumCount, index >= 0, index < count else { return nil }
        self.index = index
        self.count = count
    }

    /// Reads `K/N` as written on the command line: two decimal numbers, 0 ≤ K < N.
    public init?(parsing text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let index = Self.decimal(parts[0]), let count = Self.decimal(parts[1]) else { return nil }
        self.init(index: index, count: count)
    }

    /// `K/N`, as `--shard` takes it and `plan` shows it.
    public var description: String { "\(index)/\(count)" }

    /// The name part of this shard's lock and state store under `ROOT/.mirror/`: `shard-K-of-N`.
    var fileNamePart: String { "shard-\(index)-of-\(count)" }

    /// Only plain ASCII digits: no sign, no spaces, no `0x`.
    static func decimal(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.count <= 9, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return Int(text)
    }
}
