import Foundation

/// The `openssl` command, with which tests make their keys and certificates.
enum OpenSSL {
    struct Missing: Error, CustomStringConvertible {
        var description: String { "openssl not found: install it with `apt-get install -y openssl` (make test does this)" }
    }

    struct Failed: Error, CustomStringConvertible {
        var arguments: [String]
        var output: String
        var description: String { "openssl \(arguments.joined(separator: " ")) failed:\n\(output)" }
    }

    /// The path of the `openssl` executable.
    static func executable() throws -> String {
        guard let found = ["/usr/bin/openssl", "/usr/local/bin/openssl"].first(where: { FileManager.default.isExecutableFile(atPath: $0) })
        else { throw Missing() }
        return found
    }

    /// Runs `openssl arguments` in `directory` to completion; its output goes to `openssl.log`
    /// there and into the error when it fails.
    static func run(_ arguments: [String], in directory: TemporaryDirectory) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try executable())
        process.arguments = arguments
        process.currentDirectoryURL = directory.url
        let output = try directory.write(Data(), to: "openssl.log")
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Failed(arguments: arguments, output: String(decoding: directory.contents(of: "openssl.log") ?? Data(), as: UTF8.self))
        }
    }
}
