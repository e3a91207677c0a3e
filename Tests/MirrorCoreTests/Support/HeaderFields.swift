/// HTTP header fields in the order they were sent, with case-insensitive lookup by name.
struct HeaderFields: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral, CustomStringConvertible {
    struct Field: Sendable, Equatable {
        var name: String
        var value: String
    }

    private(set) var fields: [Field] = []

    init() {}

    init(_ pairs: [(String, String)]) {
        fields = pairs.map { Field(name: $0.0, value: $0.1) }
    }

    init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    /// The value of the first field called `name` (any case); setting replaces every field of
    /// that name with one field at the position of the first, or removes them all for nil.
    subscript(name: String) -> String? {
        get { fields.first { $0.name.lowercased() == name.lowercased() }?.value }
        set {
            let position = fields.firstIndex { $0.name.lowercased() == name.lowercased() }
            fields.removeAll { $0.name.lowercased() == name.lowercased() }
            guard let newValue else { return }
            fields.insert(Field(name: name, value: newValue), at: Swift.min(position ?? fields.count, fields.count))
        }
    }

    /// Every value sent under `name` (any case), in order.
    func values(_ name: String) -> [String] {
        fields.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
    }

    func contains(_ name: String) -> Bool { self[name] != nil }

    /// Adds a field after the others, keeping any existing field of the same name.
    mutating func append(_ name: String, _ value: String) {
        fields.append(Field(name: name, value: value))
    }

    func makeIterator() -> IndexingIterator<[Field]> { fields.makeIterator() }

    var description: String {
        fields.map { "\($0.name): \($0.value)" }.joined(separator: "\n")
    }
}
