import Glibc

/// Why the metrics file could not be written.
public typealias MetricsFileError = AtomicFileError

/// The file `--metrics-file` names, written so that node_exporter's textfile collector never
/// reads half of it: the text goes to a temporary name in the same directory (one that does not
/// end in `.prom`, so the collector skips it), is fsync'd, then renamed over the file.
public struct MetricsFile: Sendable {
    public let path: String

    public init(path: String) {
        self.path = path
    }

    /// `mirror_last_success_timestamp_seconds` of `manifest` in the file as it is now, in
    /// milliseconds; nil when there is no file, no such sample, or it cannot be read.
    public func lastSuccessMilliseconds(manifest: String) -> Int64? {
        guard let text = read() else { return nil }
        let labels = "manifest=\"\(PrometheusText.escapedLabelValue(manifest))\""
        return PrometheusText.sampleMilliseconds(named: RunMetrics.lastSuccessName, labels: labels, in: text)
    }

    /// Replaces the file with `metrics`, atomically: a power loss cannot leave it empty, which
    /// would read as no metrics at all.
    public func write(_ metrics: RunMetrics) throws(MetricsFileError) {
        try AtomicFile.replace(path, with: metrics.text)
    }

    private func read() -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        // The file is ours and small; a huge one is not ours, and is not read to the end.
        while bytes.count < 1 << 20 {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += buffer[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
