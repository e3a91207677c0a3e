/// The parts of the Prometheus text exposition format (version 0.0.4) that `RunMetrics`
/// writes and reads back.
enum PrometheusText {
    /// A label value: backslash, double quote and line feed escaped, as the format requires.
    static func escapedLabelValue(_ value: String) -> String {
        var escaped = ""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\\": escaped += "\\\\"
            case "\"": escaped += "\\\""
            case "\n": escaped += "\\n"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    /// HELP text: backslash and line feed escaped.
    static func escapedHelp(_ text: String) -> String {
        text.replacing("\\", with: "\\\\").replacing("\n", with: "\\n")
    }

    /// Milliseconds as decimal seconds, e.g. `1763863823.042`; exact, no floating point.
    static func seconds(milliseconds: Int64) -> String {
        let sign = milliseconds < 0 ? "-" : ""
        let magnitude = milliseconds.magnitude
        let fraction = String(magnitude % 1000)
        return sign + String(magnitude / 1000) + "." + String(repeating: "0", count: 3 - fraction.count) + fraction
    }

    /// The value of the sample `name{labels}` in `text`, in milliseconds, when it is there and
    /// is a finite number; `labels` is the exact text between the braces.
    static func sampleMilliseconds(named name: String, labels: String, in text: String) -> Int64? {
        let prefix = "\(name){\(labels)} "
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) where line.hasPrefix(prefix) {
            // A value may be followed by a timestamp; mirror writes none, a hand edit might.
            let field = line.dropFirst(prefix.count).split(separator: " ").first.map(String.init) ?? ""
            guard let value = Double(field), value.isFinite, abs(value) < 1e15 else { return nil }
            return Int64((value * 1000).rounded())
        }
        return nil
    }
}
