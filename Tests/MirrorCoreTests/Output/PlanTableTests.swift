import Testing
@testable import mirror
@testable import MirrorCore

/// The plan table lines its columns up as a terminal shows them.
struct PlanTableTests {
    /// A dest of wide characters (CJK, most emoji) takes two terminal columns a character: the
    /// columns after it start at the same place on every line.
    @Test func columnsLineUpInTerminalColumnsNotCharacters() {
        let plan = ["データ.bin", "ab.bin", "📦📦.bin"].map {
            PlannedEntry(dest: $0, url: "http://h/\($0)", action: .restart(reason: "why"), localSize: 10, remoteSize: 5)
        }
        let lines = PlanTable.render(plan).split(separator: "\n").filter { $0.contains("why") }
        #expect(lines.count == 3)
        let starts = lines.map { line in TerminalText.columns(String(line[..<line.range(of: "why")!.lowerBound])) }
        #expect(Set(starts).count == 1, "\(lines)")
    }
}
