/// Runs `body` over `items` with at most `width` running at once; results keep the
/// items' order.
func boundedMap<Item: Sendable, Result: Sendable>(
    _ items: [Item], width: Int, _ body: @escaping @Sendable (Item) async -> Result
) async -> [Result] {
    await withTaskGroup(of: (Int, Result).self) { group in
        var results = [Result?](repeating: nil, count: items.count)
        var next = 0
        while next < min(max(width, 1), items.count) {
            let index = next
            group.addTask { (index, await body(items[index])) }
            next += 1
        }
        for await (index, result) in group {
            results[index] = result
            if next < items.count {
                let index = next
                group.addTask { (index, await body(items[index])) }
                next += 1
            }
        }
        return results.map { $0! }
    }
}
