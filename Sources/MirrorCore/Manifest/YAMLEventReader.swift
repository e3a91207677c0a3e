import CYAML

/// A position as libyaml's marks give it.
struct YAMLMark {
    /// Counting from 1.
    var line: Int
    var column: Int
    /// Unicode scalars (a CR LF is two) from the start of the text, after any byte order mark.
    var characterOffset: Int

    init(_ mark: yaml_mark_t) {
        line = Int(mark.line) + 1
        column = Int(mark.column) + 1
        characterOffset = Int(mark.index)
    }

    init(line: Int, column: Int, characterOffset: Int) {
        self.line = line
        self.column = column
        self.characterOffset = characterOffset
    }
}

/// One of libyaml's parsing events, copied out of the C event.
enum YAMLEvent {
    /// What every node event carries besides its content.
    struct NodeStart {
        var anchor: String?
        /// The resolved tag's bytes; nil when the node has none, or only the non-specific `!`.
        var tag: [UInt8]?
        /// Where the node starts, its anchor and tag included.
        var start: YAMLMark
    }

    case streamStart
    case streamEnd
    case documentStart(YAMLMark)
    case documentEnd
    case alias(name: String, start: YAMLMark, end: YAMLMark)
    case scalar(NodeStart, text: String, isPlain: Bool, end: YAMLMark)
    case collectionStart(NodeStart, isSequence: Bool, isFlow: Bool)
    case collectionEnd(end: YAMLMark)
}

/// libyaml's parser over bytes in memory or over a file, read one event at a time: a caller
/// that has seen enough stops it there, before libyaml scans the rest of the text.
struct YAMLEventReader: ~Copyable {
    private enum Input {
        case memory(UnsafeBufferPointer<UInt8>)
        case file(YAMLFileInput)
    }

    private let parser: UnsafeMutablePointer<yaml_parser_t>
    private let input: Input
    private let file: String

    /// - Parameter input: must stay valid as long as the reader.
    /// - Throws: `ManifestError` when libyaml cannot start (out of memory).
    init(input: UnsafeBufferPointer<UInt8>, file: String) throws(ManifestError) {
        parser = try Self.makeParser(file: file)
        yaml_parser_set_input_string(parser, input.baseAddress, input.count)
        self.input = .memory(input)
        self.file = file
    }

    /// Reads the file from its start, as libyaml needs the text.
    ///
    /// - Throws: `ManifestError` when libyaml cannot start (out of memory).
    init(input: YAMLFileInput, file: String) throws(ManifestError) {
        parser = try Self.makeParser(file: file)
        yaml_parser_set_input(parser, YAMLFileInput.readHandler, Unmanaged.passUnretained(input).toOpaque())
        self.input = .file(input)
        self.file = file
    }

    private static func makeParser(file: String) throws(ManifestError) -> UnsafeMutablePointer<yaml_parser_t> {
        let parser = UnsafeMutablePointer<yaml_parser_t>.allocate(capacity: 1)
        parser.initialize(to: yaml_parser_t())
        guard yaml_parser_initialize(parser) != 0 else {
            parser.deallocate()
            throw ManifestError(ManifestDiagnostic(
                location: SourceLocation(file: file, line: 1, column: 1), key: nil,
                message: "cannot start the YAML parser (out of memory)"))
        }
        return parser
    }

    deinit {
        yaml_parser_delete(parser)
        parser.deallocate()
    }

    /// The length of the input in bytes (for a file, when it was opened).
    var inputCount: Int {
        switch input {
        case .memory(let bytes): bytes.count
        case .file(let file): file.size
        }
    }

    /// How many bytes of the input libyaml has taken in so far.
    var bytesTaken: Int {
        switch input {
        case .memory:
            let string = parser.pointee.input.string
            guard let start = string.start, let current = string.current else { return 0 }
            return current - start
        case .file(let file):
            return file.taken
        }
    }

    /// How far libyaml's scanner has come, in Unicode scalars from the start (`YAMLMark`): no
    /// further than a few tokens past the last event, where the bytes it has read in run up to
    /// its read-ahead (16 KiB) beyond. Never more than the bytes before it.
    var charactersScanned: Int {
        Int(parser.pointee.mark.index)
    }

    /// The next event.
    ///
    /// - Throws: `ManifestError` with libyaml's syntax or reading error, where it is.
    mutating func next() throws(ManifestError) -> YAMLEvent {
        var event = yaml_event_t()
        guard yaml_parser_parse(parser, &event) != 0 else {
            throw ManifestError(syntaxError())
        }
        defer { yaml_event_delete(&event) }
        let start = YAMLMark(event.start_mark)
        let end = YAMLMark(event.end_mark)
        switch event.type {
        case YAML_STREAM_START_EVENT:
            return .streamStart
        case YAML_DOCUMENT_START_EVENT:
            return .documentStart(start)
        case YAML_DOCUMENT_END_EVENT:
            return .documentEnd
        case YAML_ALIAS_EVENT:
            return .alias(name: Self.string(event.data.alias.anchor), start: start, end: end)
        case YAML_SCALAR_EVENT:
            let scalar = event.data.scalar
            let text = String(decoding: UnsafeBufferPointer(start: scalar.value, count: scalar.length), as: UTF8.self)
            return .scalar(
                Self.nodeStart(anchor: scalar.anchor, tag: scalar.tag, start: start),
                text: text, isPlain: scalar.style == YAML_PLAIN_SCALAR_STYLE, end: end)
        case YAML_SEQUENCE_START_EVENT:
            let sequence = event.data.sequence_start
            return .collectionStart(
                Self.nodeStart(anchor: sequence.anchor, tag: sequence.tag, start: start),
                isSequence: true, isFlow: sequence.style == YAML_FLOW_SEQUENCE_STYLE)
        case YAML_MAPPING_START_EVENT:
            let mapping = event.data.mapping_start
            return .collectionStart(
                Self.nodeStart(anchor: mapping.anchor, tag: mapping.tag, start: start),
                isSequence: false, isFlow: mapping.style == YAML_FLOW_MAPPING_STYLE)
        case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
            return .collectionEnd(end: end)
        default:
            return .streamEnd
        }
    }

    private static func nodeStart(
        anchor: UnsafeMutablePointer<yaml_char_t>?, tag: UnsafeMutablePointer<yaml_char_t>?, start: YAMLMark
    ) -> YAMLEvent.NodeStart {
        var tagBytes: [UInt8]?
        if let tag {
            let bytes = Array(UnsafeBufferPointer(start: tag, count: strlen(tag)))
            // libyaml's own loader reads the non-specific tag `!` as no tag at all.
            if bytes != [UInt8(ascii: "!")] { tagBytes = bytes }
        }
        return YAMLEvent.NodeStart(anchor: anchor.map { string($0) }, tag: tagBytes, start: start)
    }

    private static func string(_ pointer: UnsafeMutablePointer<yaml_char_t>?) -> String {
        guard let pointer else { return "" }
        return String(decoding: UnsafeBufferPointer(start: pointer, count: strlen(pointer)), as: UTF8.self)
    }

    private static func strlen(_ pointer: UnsafeMutablePointer<yaml_char_t>) -> Int {
        var length = 0
        while pointer[length] != 0 { length += 1 }
        return length
    }

    private func syntaxError() -> ManifestDiagnostic {
        let problem = parser.pointee.problem.map { String(cString: $0) } ?? "unknown error"
        switch parser.pointee.error {
        case YAML_MEMORY_ERROR:
            return ManifestDiagnostic(
                location: SourceLocation(file: file, line: 1, column: 1), key: nil,
                message: "out of memory while parsing YAML")
        case YAML_READER_ERROR:
            if case .file(let input) = input, let failure = input.failure {
                return ManifestLoader.unreadable(file, failure)
            }
            // The reader reports a byte offset rather than a mark.
            var message = "cannot read the file as YAML text: \(problem)"
            if parser.pointee.problem_value >= 0 {
                message += " (byte value \(parser.pointee.problem_value))"
            }
            return ManifestDiagnostic(
                location: location(ofByteOffset: parser.pointee.problem_offset), key: nil, message: message)
        default:
            var message = "invalid YAML: \(problem)"
            if let context = parser.pointee.context.map({ String(cString: $0) }) {
                let mark = YAMLMark(parser.pointee.context_mark)
                message += " (\(context) at line \(mark.line), column \(mark.column))"
            }
            let mark = YAMLMark(parser.pointee.problem_mark)
            return ManifestDiagnostic(
                location: SourceLocation(file: file, line: mark.line, column: mark.column), key: nil, message: message)
        }
    }

    /// The line and column of a byte offset, counted as libyaml counts its marks: lines end at
    /// every `YAMLLineBreak`, columns count characters, and a leading byte order mark is not there.
    private func location(ofByteOffset offset: Int) -> SourceLocation {
        switch input {
        case .memory(let bytes):
            return location(ofByteOffset: offset, in: bytes)
        case .file(let file):
            return file.prefix(offset).withUnsafeBufferPointer { location(ofByteOffset: offset, in: $0) }
        }
    }

    private func location(ofByteOffset offset: Int, in input: UnsafeBufferPointer<UInt8>) -> SourceLocation {
        var line = 1
        var column = 1
        var index = input.starts(with: YAMLLineBreak.byteOrderMark) ? YAMLLineBreak.byteOrderMark.count : 0
        let end = min(offset, input.count)
        while index < end {
            if let length = YAMLLineBreak.length(in: input, at: index) {
                line += 1
                column = 1
                index += length
                continue
            }
            if YAMLLineBreak.startsCharacter(input[index]) { column += 1 }
            index += 1
        }
        return SourceLocation(file: file, line: line, column: column)
    }
}
