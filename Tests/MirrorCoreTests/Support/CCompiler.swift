import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Builds one of the project's C sources (the link emulator, the test shims) with `cc`, once
/// per version of the source: the output's directory name carries a hash of it, so that test
/// runs leave one build behind, not one each.
enum CCompiler {
    struct Unavailable: Error, CustomStringConvertible {
        var description: String
    }

    /// The package's directory.
    static let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// Compiles `source` (a path in the package) into a file named `output` and returns its
    /// path; `arguments` go before the source (`-shared -fPIC`), `libraries` after it.
    static func build(_ source: String, into output: String, arguments: [String] = ["-O2"], libraries: [String] = []) -> Result<String, Unavailable> {
        let sourcePath = package.appendingPathComponent(source).path
        guard let text = FileManager.default.contents(atPath: sourcePath) else {
            return .failure(Unavailable(description: "cannot read \(sourcePath)"))
        }
        guard let compiler = ["/usr/bin/cc", "/usr/bin/gcc", "/usr/bin/clang"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            return .failure(Unavailable(description: "no C compiler (cc) to build \(source): install it with `apt-get install -y gcc` (make test does this)"))
        }
        // FNV-1a over the source and the command: a stable name for this build of it.
        let command = Array((arguments + libraries).joined(separator: " ").utf8)
        let hash = (text + command).reduce(UInt64(0xcbf2_9ce4_8422_2325)) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 }
        let directory = NSTemporaryDirectory() + "mirror-" + output + "-" + String(hash, radix: 16)
        let built = directory + "/" + output
        if FileManager.default.fileExists(atPath: built) { return .success(built) }
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // Built under a name of this process's own and renamed into place: another test process
        // building it at the same time never uses a half-written file.
        let building = built + ".\(getpid())"
        let compile = Process()
        compile.executableURL = URL(fileURLWithPath: compiler)
        compile.arguments = arguments + ["-o", building, sourcePath] + libraries
        let errors = Pipe()
        compile.standardError = errors
        do {
            try compile.run()
        } catch {
            return .failure(Unavailable(description: "could not run \(compiler): \(error)"))
        }
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        compile.waitUntilExit()
        guard compile.terminationStatus == 0, rename(building, built) == 0 else {
            return .failure(Unavailable(description: "\(compiler) could not build \(sourcePath) into \(built):\n\(message)"))
        }
        return .success(built)
    }
}
