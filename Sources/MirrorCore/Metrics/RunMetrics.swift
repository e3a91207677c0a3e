/// What one `sync` run tells a monitoring system, as node_exporter's textfile collector reads
/// it: the Prometheus text exposition format, every sample labelled with the manifest, no
/// timestamps (the collector refuses them).
public struct RunMetrics: Sendable, Equatable {
    /// The manifest's path, the value of every sample's `manifest` label.
    public var manifest: String
    /// When the run ended, in milliseconds since 1970 (UTC).
    public var endedAtMilliseconds: Int64
    /// When the last run that exited 0 ended; nil before the first one.
    public var lastSuccessMilliseconds: Int64?
    public var durationMilliseconds: Int64
    public var exitCode: Int32
    public var transferred = 0
    public var skipped = 0
    /// Entries that failed, interrupted ones included.
    public var failed = 0
    public var bytesTransferred: Int64 = 0
    /// Attempts beyond each entry's first, over all its sources (a fallback to a mirror counts).
    public var retries = 0
    /// What the blob cache did, when the run used one.
    public var cache: CacheCounts?

    public init(manifest: String, endedAtMilliseconds: Int64, lastSuccessMilliseconds: Int64?,
                durationMilliseconds: Int64, exitCode: Int32, reports: [EntryReport]) {
        self.manifest = manifest
        self.endedAtMilliseconds = endedAtMilliseconds
        self.durationMilliseconds = durationMilliseconds
        self.exitCode = exitCode
        self.lastSuccessMilliseconds = exitCode == 0 ? endedAtMilliseconds : lastSuccessMilliseconds
        for report in reports {
            switch report.outcome {
            case .transferred: transferred += 1
            case .skipped: skipped += 1
            case .failed: failed += 1
            }
            bytesTransferred = bytesTransferred.saturatingAdding(report.bytesTransferred)
            retries = retries.saturatingAdding(max(0, report.attempts - 1))
        }
    }

    static let lastSuccessName = "mirror_last_success_timestamp_seconds"

    /// The exposition text: HELP and TYPE before each family, one sample a line.
    public var text: String {
        let label = "manifest=\"\(PrometheusText.escapedLabelValue(manifest))\""
        var text = ""
        func family(_ name: String, _ type: String, _ help: String, _ samples: [(labels: String, value: String)]) {
            text += "# HELP \(name) \(PrometheusText.escapedHelp(help))\n# TYPE \(name) \(type)\n"
            for sample in samples { text += "\(name){\(sample.labels)} \(sample.value)\n" }
        }
        family("mirror_last_run_timestamp_seconds", "gauge", "Unix time the last mirror sync of the manifest ended.",
               [(label, PrometheusText.seconds(milliseconds: endedAtMilliseconds))])
        if let lastSuccessMilliseconds {
            family(Self.lastSuccessName, "gauge", "Unix time the last mirror sync of the manifest that exited 0 ended.",
                   [(label, PrometheusText.seconds(milliseconds: lastSuccessMilliseconds))])
        }
        family("mirror_run_duration_seconds", "gauge", "How long the last mirror sync of the manifest took.",
               [(label, PrometheusText.seconds(milliseconds: durationMilliseconds))])
        family("mirror_exit_code", "gauge", "Exit status of the last mirror sync of the manifest (0 success, 1 entries failed, 2 usage or manifest error, 3 locked, 4 unreachable, 130/143 interrupted).",
               [(label, String(exitCode))])
        family("mirror_entries", "gauge", "Entries of the last mirror sync by result.", [
            ("\(label),result=\"transferred\"", String(transferred)),
            ("\(label),result=\"skipped\"", String(skipped)),
            ("\(label),result=\"failed\"", String(failed)),
        ])
        family("mirror_bytes_transferred", "gauge", "Body bytes received by the last mirror sync.",
               [(label, String(bytesTransferred))])
        family("mirror_retries", "gauge", "Attempts beyond each entry's first in the last mirror sync, fallbacks to mirrors included.",
               [(label, String(retries))])
        if let cache {
            family("mirror_cache_hits", "gauge", "Entries the last mirror sync placed from the blob cache, with no request.",
                   [(label, String(cache.hits))])
            family("mirror_cache_misses", "gauge", "Files the last mirror sync downloaded and put into the blob cache.",
                   [(label, String(cache.misses))])
            family("mirror_cache_bytes_placed", "gauge", "Bytes the last mirror sync placed from the blob cache instead of downloading them.",
                   [(label, String(cache.bytesPlaced))])
            family("mirror_cache_evictions", "gauge", "Blobs the last mirror sync evicted from the blob cache (cache_max_size, cache_max_age).",
                   [(label, String(cache.evicted))])
        }
        return text
    }
}
