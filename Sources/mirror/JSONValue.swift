/// A JSON value whose objects keep their keys in the order written, so `--json` output reads
/// the same every run (Foundation's encoder on Linux does not keep key order).
enum JSONValue {
    case string(String)
    case int(Int64)
    case bool(Bool)
    case null
    case array([JSONValue])
    case object([(String, JSONValue)])

    static func string(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }
    static func int(_ value: Int64?) -> JSONValue { value.map(JSONValue.int) ?? .null }
    static func int(_ value: Int) -> JSONValue { .int(Int64(value)) }

    var text: String {
        var output = ""
        write(to: &output)
        return output
    }

    private func write(to output: inout String) {
        switch self {
        case .string(let value): Self.writeString(value, to: &output)
        case .int(let value): output += String(value)
        case .bool(let value): output += value ? "true" : "false"
        case .null: output += "null"
        case .array(let values):
            output += "["
            for (index, value) in values.enumerated() {
                if index > 0 { output += "," }
                value.write(to: &output)
            }
            output += "]"
        case .object(let members):
            output += "{"
            for (index, (key, value)) in members.enumerated() {
                if index > 0 { output += "," }
                Self.writeString(key, to: &output)
                output += ":"
                value.write(to: &output)
            }
            output += "}"
        }
    }

    private static func writeString(_ value: String, to output: inout String) {
        output += "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            // Every control character, not only the C0 ones JSON requires: the document is
            // often read on a terminal, and DEL or a C1 CSI there is as live as ESC.
            case _ where TerminalText.isControl(scalar):
                let hex = String(scalar.value, radix: 16)
                output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: output.unicodeScalars.append(scalar)
            }
        }
        output += "\""
    }
}
