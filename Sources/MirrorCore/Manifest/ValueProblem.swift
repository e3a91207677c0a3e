/// Why one manifest value is unusable, phrased to follow the key it concerns
/// (`files[0].sha256: expected 64 hexadecimal digits, found 63 characters`).
struct ValueProblem: Error, Equatable {
    var message: String

    init(_ message: String) {
        self.message = message
    }
}
