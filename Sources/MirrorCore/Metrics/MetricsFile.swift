import Glibc

/// Why the metrics file could not be written.
public struct MetricsFileError: Error, Sendable, CustomStringConvertible {
    public var path: String
    public var operation: String
    public var errno: Int32

    public var description: String {
        "cannot \(operation) \(path): \(String(cString: strerror(errno)))"
    }
}

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

    /// Replaces the file with `metrics`, atomically.
    public func write(_ metrics: RunMetrics) throws(MetricsFileError) {
        let temporary = temporaryPath
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o666)
        guard fd >= 0 else { throw MetricsFileError(path: temporary, operation: "create", errno: errno) }
        var failure: MetricsFileError?
        let bytes = Array(metrics.text.utf8)
        var offset = 0
        while offset < bytes.count, failure == nil {
            let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno != EINTR { failure = MetricsFileError(path: temporary, operation: "write", errno: errno) }
            } else {
                offset += written
            }
        }
        // A renamed file that a power loss could leave empty would read as no metrics at all.
        if failure == nil, fsync(fd) != 0 { failure = MetricsFileError(path: temporary, operation: "fsync", errno: errno) }
        if close(fd) != 0, failure == nil { failure = MetricsFileError(path: temporary, operation: "close", errno: errno) }
        if failure == nil, rename(temporary, path) != 0 {
            failure = MetricsFileError(path: path, operation: "rename \(temporary) to", errno: errno)
        }
        if let failure {
            unlink(temporary)
            throw failure
        }
    }

    /// `DIR/.NAME.PID.tmp` beside `DIR/NAME`.
    var temporaryPath: String {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { String(path[...$0]) } ?? ""
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        return "\(directory).\(name).\(getpid()).tmp"
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
