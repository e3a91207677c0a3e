import FoundationEssentials
import Testing
@testable import MirrorCore

// The plain-URL reading (`URLParts.plain`) must agree with `URLComponents` on every URL it
// takes, and leave every other one to it.

private func componentsParts(_ text: String) -> URLParts? {
    URLComponents(string: text, encodingInvalidCharacters: false).map(URLParts.init)
}

@Test(arguments: [
    "http://127.0.0.1:43789/link/l00000",
    "https://example.org/a/b.tar.gz",
    "HTTP://Example.ORG/x",
    "ftp://h/pub/x.iso;type=i",
    "h+t.p-1://h/x",
    "http://h",
    "http://h/",
    "http://h//x",
    "http://h/./x",
    "http://h/a:b@c!$&'()*+,;=",
    "http://a_b~c.-d/x",
    "http://1.2.3.999/x",
    "http://h:0/x",
    "http://h:0080/x",
    "http://h:99999/x",
    "http://h:65535",
])
func plainURLsAreReadAsURLComponentsReadsThem(_ text: String) throws {
    let plain = try #require(URLParts.plain(text))
    #expect(plain == componentsParts(text))
    #expect(URLParts(parsing: text) == plain)
}

@Test(arguments: [
    "http://u:p@h/x",
    "http://u@h/x",
    "http://[::1]:8443/x",
    "http://h/x?q=1",
    "http://h/x#f",
    "http://h/a%20b",
    "http://h/a%zz",
    "http://h/a b",
    "http://h:/x",
    "http://h:123456/x",
    "http://h:12a/x",
    "http:///x",
    "http:/h/x",
    "http:h/x",
    "//h/x",
    "1http://h/x",
    "file:///x",
    "http://h/é",
    "http://hé/x",
    "http://a!b/x",
    "http://h x/",
    "https://${HOST}/x",
    "",
])
func otherURLsAreLeftToURLComponents(_ text: String) {
    #expect(URLParts.plain(text) == nil)
    #expect(URLParts(parsing: text) == componentsParts(text))
}

/// Every URL of up to four characters after `http://` over an alphabet of the characters the
/// plain reading decides on: it takes one only when `URLComponents` reads it the same way.
@Test func plainReadingAgreesWithURLComponentsExhaustively() {
    let alphabet = Array("a1-._~:/@!%?#[] é")
    var texts = [""]
    for _ in 0..<4 {
        texts += texts.filter { $0.count == texts.last!.count }.flatMap { prefix in alphabet.map { prefix + String($0) } }
    }
    var taken = 0
    for suffix in texts {
        let text = "http://" + suffix
        guard let plain = URLParts.plain(text) else { continue }
        taken += 1
        #expect(plain == componentsParts(text), "\(text)")
    }
    #expect(taken > 1_000)
}
