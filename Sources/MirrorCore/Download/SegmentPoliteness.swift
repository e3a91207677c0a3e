/// The hosts of a run that asked for fewer connections (a 429 or 503 to a segment, a reset
/// connection, a range answered with the whole file): from then on, one stream per file to
/// them, for the rest of the run. Touched only on the transfer engine's thread.
final class SegmentPoliteness: @unchecked Sendable {
    private var folded: Set<String> = []

    func isFolded(_ host: String) -> Bool { folded.contains(host) }

    func fold(_ host: String) { folded.insert(host) }
}
