import Testing
@testable import MirrorCore

@Test func sourceLocationPrintsFileLineColumn() {
    #expect(SourceLocation(file: "m.yaml", line: 3, column: 7).description == "m.yaml:3:7")
}
