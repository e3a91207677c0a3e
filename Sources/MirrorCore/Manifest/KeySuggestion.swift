/// "Did you mean" for mistyped keys.
enum KeySuggestion {
    /// The candidate closest to `word`, if it is close enough to be a likely typo: at most two
    /// edits, and fewer than half of the candidate's characters. Case is ignored. Ties go to the
    /// earlier candidate.
    static func closest(to word: String, among candidates: [String]) -> String? {
        let typed = Array(word.lowercased())
        var best: (candidate: String, distance: Int)?
        for candidate in candidates {
            let distance = editDistance(typed, Array(candidate.lowercased()))
            guard distance <= 2, distance * 2 < candidate.count else { continue }
            if best == nil || distance < best!.distance {
                best = (candidate, distance)
            }
        }
        return best?.candidate
    }

    /// Edits (insert, delete, substitute, swap two neighbours) that turn `a` into `b`: the
    /// optimal string alignment distance, so `sah256` is one edit from `sha256`.
    static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var twoRowsBack = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let substitution = a[i - 1] == b[j - 1] ? 0 : 1
                var distance = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + substitution)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    distance = min(distance, twoRowsBack[j - 2] + 1)
                }
                current[j] = distance
            }
            (twoRowsBack, previous, current) = (previous, current, twoRowsBack)
        }
        return previous[b.count]
    }
}
