import Testing
@testable import MirrorCore

/// An entry's conditional sources as bits below 64 and a set above: the same answers as a set.
struct SourceIndexSetTests {
    @Test("holds exactly the indices put in, below 64 and above", arguments: [
        [Int](),
        [0],
        [0, 1, 2],
        [63],
        [0, 63, 64],
        [64, 65, 1000],
        Array(0..<70),
    ])
    func sameAsASet(_ indices: [Int]) {
        var set = SourceIndexSet()
        for index in indices { set.insert(index) }
        let expected = Set(indices)
        for index in 0..<1100 {
            #expect(set.contains(index) == expected.contains(index), "index \(index) of \(indices)")
        }
        var literal: SourceIndexSet = []
        for index in indices.reversed() { literal.insert(index) }
        #expect(literal == set)
    }

    @Test func aLiteralIsTheSetOfItsElements() {
        let set: SourceIndexSet = [2, 70]
        #expect(set.contains(2) && set.contains(70))
        #expect(!set.contains(0) && !set.contains(64) && !set.contains(71))
        #expect(set != [2])
    }
}
