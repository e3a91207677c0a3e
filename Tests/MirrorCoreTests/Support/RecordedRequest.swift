import Foundation

/// One request as `FaultServer` received it, recorded before it was answered.
struct RecordedRequest: Sendable, CustomStringConvertible {
    var method: String
    /// The request target exactly as sent, query included.
    var target: String
    var version: String
    var headers: HeaderFields
    var body: Data
    /// When the end of the request's header block arrived.
    var receivedAt: ContinuousClock.Instant
    /// Which accepted connection carried it, counting from 1 in accept order: equal numbers mean
    /// the client reused a connection.
    var connection: Int

    /// The target without its query string: what routes match against.
    var path: String {
        String(target.prefix { $0 != "?" })
    }

    /// Whether the client asked for the connection to stay open after this request.
    var wantsKeepAlive: Bool {
        let tokens = headers.values("Connection")
            .flatMap { $0.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        if tokens.contains("close") { return false }
        return version == "HTTP/1.1" || tokens.contains("keep-alive")
    }

    var description: String {
        "\(method) \(target) \(version) [connection \(connection)]"
            + headers.map { "\n  \($0.name): \($0.value)" }.joined()
    }
}

/// Parses the request line and header block of an HTTP/1.x request.
enum RequestHeadParser {
    struct Head {
        var method: String
        var target: String
        var version: String
        var headers: HeaderFields
    }

    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    /// `block` is everything before the blank line that ends the head, without that CRLF CRLF.
    static func parse(_ block: Data) throws -> Head {
        // Latin-1 maps every byte to a character, so odd bytes in a header never fail the parse.
        guard let text = String(data: block, encoding: .isoLatin1) else { throw Malformed(description: "undecodable head") }
        var lines = text.components(separatedBy: "\r\n")
        let requestLine = lines.removeFirst().split(separator: " ", omittingEmptySubsequences: false)
        guard requestLine.count == 3, !requestLine[0].isEmpty, !requestLine[1].isEmpty,
              requestLine[2].hasPrefix("HTTP/1.")
        else { throw Malformed(description: "bad request line \(requestLine.joined(separator: " "))") }

        var headers = HeaderFields()
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else {
                throw Malformed(description: "bad header line \(line)")
            }
            let name = String(line[..<colon])
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers.append(name, value)
        }
        return Head(method: String(requestLine[0]), target: String(requestLine[1]),
                    version: String(requestLine[2]), headers: headers)
    }
}
