/// A set of an entry's source indices (its URL, then its mirrors): those below 64, nearly all
/// there are, as bits of one word, any others in a `Set`. Every entry's driver is made with
/// one (`EntryDriver.Prepared.conditional`), and a `Set<Int>` was an allocation an entry.
struct SourceIndexSet: Equatable, Sendable, ExpressibleByArrayLiteral {
    private var low: UInt64 = 0
    private var high: Set<Int> = []

    init() {}

    init(arrayLiteral elements: Int...) {
        self.init(elements)
    }

    init(_ indices: some Sequence<Int>) {
        for index in indices { insert(index) }
    }

    mutating func insert(_ index: Int) {
        if (0..<64).contains(index) {
            low |= 1 << UInt64(index)
        } else {
            high.insert(index)
        }
    }

    func contains(_ index: Int) -> Bool {
        (0..<64).contains(index) ? low & (1 << UInt64(index)) != 0 : high.contains(index)
    }
}
