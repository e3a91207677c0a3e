import Foundation

/// Debian's prometheus-node-exporter on 127.0.0.1 and a random port with only its textfile
/// collector, reading the `*.prom` files of `textfileDirectory`, as a monitored host runs it.
/// Stopped by its pid when `stop()` is called or the value is released.
final class NodeExporter: Sendable {
    static let candidates = ["/usr/bin/prometheus-node-exporter", "/usr/bin/node_exporter"]
    let server: ServerProcess

    private init(server: ServerProcess) {
        self.server = server
    }

    static func start(textfileDirectory: String) async throws -> NodeExporter {
        let executable = try ServerProcess.locate(
            "node_exporter", among: candidates, install: "apt-get install -y prometheus-node-exporter")
        let server = try await ServerProcess.start("node_exporter", executable: executable, logs: []) { port, _ in
            [
                "--collector.disable-defaults", "--collector.textfile",
                "--collector.textfile.directory=\(textfileDirectory)",
                "--web.listen-address=127.0.0.1:\(port)",
            ]
        }
        return NodeExporter(server: server)
    }

    func stop() { server.stop() }

    /// One scrape of `/metrics`, parsed.
    func scrape() throws -> Scrape {
        let result = try CurlCommand.run(["--silent", "--show-error", "--fail", "http://127.0.0.1:\(server.port)/metrics"])
        guard result.exitCode == 0 else { throw ScrapeFailed(description: result.description) }
        return Scrape(text: result.output)
    }

    struct ScrapeFailed: Error, CustomStringConvertible {
        var description: String
    }

    /// What a scrape returned: samples by their series, `name{labels}` exactly as exposed.
    struct Scrape: CustomStringConvertible {
        var text: String

        /// The value of the series `name{labels}`; `labels` as node_exporter writes them
        /// (sorted by name, values escaped).
        func value(_ name: String, _ labels: String = "") -> Double? {
            let series = labels.isEmpty ? name : "\(name){\(labels)}"
            for line in text.split(separator: "\n") where !line.hasPrefix("#") {
                guard let space = line.lastIndex(of: " "), line[..<space] == series else { continue }
                return Double(line[line.index(after: space)...])
            }
            return nil
        }

        /// Every line that is about `mirror_` metrics, comments included.
        var mirrorLines: [String] { text.split(separator: "\n").map(String.init).filter { $0.contains("mirror_") } }

        var description: String { mirrorLines.joined(separator: "\n") }
    }
}
