import Glibc

/// Whether two texts are the same UTF-8 bytes. Never `String`'s `==`, which is Unicode's
/// canonical equivalence: two byte sequences a server sent are two different values even when
/// they are equal Strings. Compared with `memcmp` over the contiguous UTF-8 of each (the
/// generic `utf8.elementsEqual` took about 2,000 instructions for a 30-byte validator, and
/// every conditional reply compares several).
enum SameBytes {
    static func of(_ one: String, _ other: String) -> Bool {
        of(one[...], other[...])
    }

    static func of(_ one: Substring, _ other: Substring) -> Bool {
        guard one.utf8.count == other.utf8.count else { return false }
        var one = one
        var other = other
        return one.withUTF8 { first in other.withUTF8 { second in equal(first, second) } }
    }

    private static func equal(_ first: UnsafeBufferPointer<UInt8>, _ second: UnsafeBufferPointer<UInt8>) -> Bool {
        guard first.count == second.count else { return false }
        guard let a = first.baseAddress, let b = second.baseAddress, first.count > 0 else { return true }
        return memcmp(a, b, first.count) == 0
    }
}
