import Foundation
import Testing
@testable import MirrorCore

/// The netrc file as curl's `--netrc-optional` reads it, and which login a URL's host gets.
struct NetrcTests {
    typealias Entry = Netrc.Entry

    @Test(arguments: [
        ("machine a.example login u password p", [Entry(machine: "a.example", login: "u", password: "p")]),
        ("machine a login u\n  password p\nmachine b login v password q",
         [Entry(machine: "a", login: "u", password: "p"), Entry(machine: "b", login: "v", password: "q")]),
        ("MACHINE a LOGIN u PASSWORD p", [Entry(machine: "a", login: "u", password: "p")]),
        ("machine a login u password p\ndefault login anonymous password me@",
         [Entry(machine: "a", login: "u", password: "p"), Entry(machine: nil, login: "anonymous", password: "me@")]),
        ("machine a login \"the user\" password \"pa ss\\\"wo\\\\rd\\t\"",
         [Entry(machine: "a", login: "the user", password: "pa ss\"wo\\rd\t")]),
        ("# a comment line login x\nmachine a login u password p#not-a-comment",
         [Entry(machine: "a", login: "u", password: "p#not-a-comment")]),
        ("machine a login u password p\r\nmachine b login v password q\r\n",
         [Entry(machine: "a", login: "u", password: "p"), Entry(machine: "b", login: "v", password: "q")]),
        ("macdef init\ncd /pub\nmachine hidden login h password h\n\nmachine a login u password p",
         [Entry(machine: "a", login: "u", password: "p")]),
        ("machine a account acct login u password p port 21", [Entry(machine: "a", login: "u", password: "p")]),
        ("machine a login u", [Entry(machine: "a", login: "u", password: nil)]),
        ("", []),
    ] as [(String, [Entry])])
    func parses(_ text: String, _ entries: [Entry]) throws {
        #expect(try Netrc.parse(Array(text.utf8)).entries == entries)
    }

    @Test(arguments: [
        ("machine a login \"unterminated", 1, "a quoted token has no closing `\"`"),
        ("machine a login u\npassword", 2, "`password` is not followed by a value"),
        ("machine", 1, "`machine` is not followed by a value"),
    ])
    func refuses(_ text: String, _ line: Int, _ message: String) {
        #expect(throws: Netrc.SyntaxError(line: line, message: message)) { try Netrc.parse(Array(text.utf8)) }
    }

    @Test func aSyntaxErrorNamesTheFileAndLineButNoToken() throws {
        let directory = try TemporaryDirectory(prefix: "mirror-netrc")
        let path = try directory.write(Data("machine a login u password \"s3cret".utf8), to: "netrc")
        #expect(throws: NetrcFile.Problem(message: "the netrc file `\(path)`, line 1: a quoted token has no closing `\"`")) {
            try NetrcFile.load(environment: ["NETRC": path])
        }
        #expect(try NetrcFile.load(environment: ["NETRC": directory.path("absent")]) == nil, "a missing netrc means no logins")
    }

    @Test(arguments: [
        // host, user in the URL, expected login
        ("a.example", nil, NetrcLogin(user: "ua", password: "pa")),
        ("A.EXAMPLE", nil, NetrcLogin(user: "ua", password: "pa")),
        ("b.example", nil, NetrcLogin(user: "ub1", password: "pb1")),  // a machine entry before default
        ("b.example", "ub2", NetrcLogin(user: "ub2", password: "pb2")),
        ("b.example", "nobody", nil),
        ("c.example", nil, NetrcLogin(user: "anonymous", password: "guest")),
        ("a.example.evil", nil, NetrcLogin(user: "anonymous", password: "guest")),
    ] as [(String, String?, NetrcLogin?)])
    func picksTheLoginAsCurlDoes(_ host: String, _ user: String?, _ expected: NetrcLogin?) throws {
        let netrc = try Netrc.parse(Array("""
            machine a.example login ua password pa
            default login anonymous password guest
            machine b.example login ub1 password pb1
            machine b.example login ub2 password pb2
            """.utf8))
        #expect(netrc.login(forHost: host, user: user) == expected)
    }

    @Test func theManifestGivesEachDownloadURLItsHostsLoginAndNeverPrintsIt() throws {
        let directory = try TemporaryDirectory(prefix: "mirror-netrc")
        let netrc = try directory.write(Data("""
            machine files.example login deploy password n3trc-pw
            machine mirror.example login mirror password m1rror-pw
            """.utf8), to: "netrc")
        let manifest = try ManifestLoader.parse(text: """
            version: 1
            connectivity:
              probe: https://files.example/
            files:
              - url: https://files.example/a.bin
                mirrors: [https://mirror.example/a.bin, https://other.example/a.bin]
              - url: https://someone:own-pw@files.example/b.bin
              - url: https://deploy@files.example/c.bin
              - url: https://else@files.example/d.bin
            """, path: "m.yaml", baseDirectory: "/", environment: ["NETRC": netrc])
        let logins = manifest.entries.map { $0.url.login }
        #expect(logins == [NetrcLogin(user: "deploy", password: "n3trc-pw"), nil,
                           NetrcLogin(user: "deploy", password: "n3trc-pw"), nil])
        #expect(manifest.entries[0].mirrors.map(\.login) == [NetrcLogin(user: "mirror", password: "m1rror-pw"), nil])
        #expect(manifest.connectivity.probe?.login == nil)
        #expect(!"\(manifest.entries[0].url) \(logins)".contains("n3trc-pw"))
    }
}
