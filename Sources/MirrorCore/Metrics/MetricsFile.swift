/// Why the metrics file could not be written.
public typealias MetricsFileError = OutputFileError

/// The file `--metrics-file` names, written through `OutputFile`: a regular file is replaced
/// so that node_exporter's textfile collector never reads half of it (the text goes to a
/// temporary name in the same directory, one that does not end in `.prom`, so the collector
/// skips it, is fsync'd, then renamed over the file).
public struct MetricsFile: Sendable {
    public let path: String

    public init(path: String) {
        self.path = path
    }

    /// `mirror_last_success_timestamp_seconds` of `manifest` in the file as it is now, in
    /// milliseconds; nil when there is no file, no such sample, or it cannot be read. Only a
    /// file that the write replaces is read (never a FIFO, a device or a standard stream).
    public func lastSuccessMilliseconds(manifest: String) -> Int64? {
        // The file is ours and small; a huge one is not ours, and is not read to the end.
        guard let bytes = OutputFile(path: path).currentContents(limit: 1 << 20) else { return nil }
        let text = String(decoding: bytes, as: UTF8.self)
        let labels = "manifest=\"\(PrometheusText.escapedLabelValue(manifest))\""
        return PrometheusText.sampleMilliseconds(named: RunMetrics.lastSuccessName, labels: labels, in: text)
    }

    /// Writes `metrics` to the file: a regular file is replaced atomically, so a power loss
    /// cannot leave it empty, which would read as no metrics at all.
    public func write(_ metrics: RunMetrics) throws(MetricsFileError) {
        try OutputFile(path: path).write(metrics.text)
    }
}
