import Foundation

/// What a HEAD with curl says of `url`: its ETag and Last-Modified.
func headValidators(_ url: String) throws -> (etag: String?, lastModified: String?) {
    let result = try CurlCommand.run(["-sI", url])
    var etag: String?, lastModified: String?
    for line in result.output.split(separator: "\r\n") {
        guard let colon = line.firstIndex(of: ":") else { continue }
        let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        switch line[..<colon].lowercased() {
        case "etag": etag = value
        case "last-modified": lastModified = value
        default: break
        }
    }
    return (etag, lastModified)
}
