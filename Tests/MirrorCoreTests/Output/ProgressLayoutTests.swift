import Testing
@testable import mirror

/// The progress block as a table: a frame and a width in, the exact lines out.
struct ProgressLayoutTests {
    static let debianPath = "pool/main/l/linux-signed-amd64/linux-image-6.1.0-18-amd64-unsigned_6.1.76-1_amd64.deb"

    static func frame(received: Int64 = 0, remaining: Int64 = 0, unknown: Int = 0, done: Int = 0, total: Int = 3,
                      rate: Double = 0, transfers: [ProgressFrame.Transfer] = []) -> ProgressFrame {
        ProgressFrame(bytesReceived: received, bytesRemaining: remaining, entriesOfUnknownSize: unknown,
                      entriesDone: done, entriesTotal: total, bytesPerSecond: rate, transfers: transfers)
    }

    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var frame: ProgressFrame
        var width: Int
        var lines: [String]
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "nothing known yet: no 0 B of 0 B", frame: frame(unknown: 3), width: 79,
             lines: ["waiting for the first reply  0/3 files"]),
        Case(name: "total from pins before anything started, ETA from what remains",
             frame: frame(received: 1 << 20, remaining: 3 << 20, done: 1, rate: 524_288), width: 79,
             lines: ["[=====               ]  1.00 MiB of 4.00 MiB  512 KiB/s  ETA 6.0s  1/3 files"]),
        Case(name: "unknown sizes make the total and the ETA lower bounds",
             frame: frame(received: 1 << 20, remaining: 1 << 20, unknown: 2, rate: 1_048_576), width: 100,
             lines: ["[==========          ]  1.00 MiB of 2.00 MiB  + 2 of unknown size  1.00 MiB/s  ETA >1.0s  0/3 files"]),
        Case(name: "narrow: the bar goes first, then the unknown count, the files, the rate",
             frame: frame(received: 1 << 20, remaining: 1 << 20, unknown: 2, rate: 1_048_576), width: 40,
             lines: ["1.00 MiB of 2.00 MiB  ETA >1.0s"]),
        Case(name: "very narrow: the byte count alone, cut", frame: frame(received: 1 << 20, remaining: 1 << 20), width: 12,
             lines: ["1.00 MiB of "]),
        Case(name: "a stalled transfer shows -- for the time left", frame: frame(received: 5, remaining: 5), width: 79,
             lines: ["[==========          ]  5 B of 10 B  0 B/s  ETA --  0/3 files"]),
        Case(name: "per-file percent, bytes and rate; a long dest cut in the middle to the width",
             frame: frame(received: 300, remaining: 700, rate: 100, transfers: [
                .init(dest: debianPath, bytesDone: 300, bytesTotal: 1000, bytesPerSecond: 100),
                .init(dest: "short.bin", bytesDone: 2048, bytesTotal: nil, bytesPerSecond: 0),
             ]), width: 79,
             lines: [
                "[======              ]  300 B of 1000 B  100 B/s  ETA 7.0s  0/3 files",
                "  pool/main/l/li...-unsigned_6.1.76-1_amd64.deb  30%   300 B of 1000 B  100 B/s",
                "  short.bin  2.00 KiB  0 B/s",
             ]),
        Case(name: "a server's escape sequence in a dest is shown escaped and still fits",
             frame: frame(received: 1, remaining: 1, transfers: [
                .init(dest: "a\u{1B}[2Jb", bytesDone: 1, bytesTotal: 2, bytesPerSecond: 0),
             ]), width: 40,
             lines: ["1 B of 2 B  0 B/s  ETA --  0/3 files", "  a\\x1B[2Jb  50%   1 B of 2 B  0 B/s"]),
        Case(name: "more transfers than shown",
             frame: frame(received: 0, remaining: 7, transfers: (1...8).map { .init(dest: "f\($0)", bytesDone: 0, bytesTotal: 1, bytesPerSecond: 0) }),
             width: 30,
             lines: ["0 B of 7 B  0 B/s  ETA --"] + (1...6).map { "  f\($0)  0%    0 B of 1 B  0 B/s" } + ["  ... and 2 more"]),
    ]

    @Test(arguments: cases)
    func progressLinesForAFrameAndAWidth(_ example: Case) {
        #expect(ProgressLayout.lines(example.frame, width: example.width) == example.lines)
    }

    /// Whatever the frame, no line is wider than the terminal: a wrapped line breaks the
    /// redraw in place.
    @Test func noProgressLineIsEverWiderThanTheTerminal() {
        let dests = ["", "a", Self.debianPath, String(repeating: "界", count: 60), "e\u{301}" + String(repeating: "x/", count: 50)]
        let counts: [Int64] = [0, 1, 1023, 1 << 40, .max]
        for width in 1...120 {
            for dest in dests {
                for count in counts {
                    let frame = Self.frame(received: count, remaining: count, unknown: Int(count % 3), done: 1, total: 100_000,
                                           rate: Double(count) / 3, transfers: [.init(dest: dest, bytesDone: count, bytesTotal: count, bytesPerSecond: 0.3)])
                    for line in ProgressLayout.lines(frame, width: width) {
                        #expect(TerminalText.columns(line) <= width, "width \(width): \(line)")
                        #expect(!line.contains("0 B of 0 B"))
                    }
                }
            }
        }
    }

    @Test func terminalStyleFollowsTERM() {
        #expect(ProgressDisplay.style(stderrIsTerminal: false, term: "xterm-256color") == nil)
        #expect(ProgressDisplay.style(stderrIsTerminal: true, term: "xterm-256color") == .redraw)
        #expect(ProgressDisplay.style(stderrIsTerminal: true, term: "dumb") == .plainLines)
        #expect(ProgressDisplay.style(stderrIsTerminal: true, term: nil) == .plainLines)
        #expect(ProgressDisplay.style(stderrIsTerminal: true, term: "") == .plainLines)
    }

    /// A steady 100,000 bytes a second, sampled as often as the redrawn block does (every 0.2 s)
    /// or as seldom as a dumb terminal's plain line (every 5 s) or less: from the second sample
    /// on, the window measures that rate. (It kept only samples younger than its span, so a
    /// display sampling less often than that had one sample left and showed 0 B/s, ETA --.)
    @Test(arguments: [0.2, 1, 2.9, 3, 5, 10])
    func aRateWindowMeasuresAtAnySamplingInterval(_ interval: Double) {
        var window = RateWindow()
        let start = ContinuousClock.now
        for step in 0..<8 {
            let seconds = interval * Double(step)
            window.add(bytes: Int64(seconds * 100_000), at: start + .milliseconds(Int64(seconds * 1000)))
            if step == 0 {
                #expect(window.bytesPerSecond == 0, "one sample measures nothing")
            } else {
                #expect(abs(window.bytesPerSecond - 100_000) < 1_000, "sampled every \(interval) s, step \(step): \(window.bytesPerSecond)")
            }
        }
    }

    /// The window forgets what is older than its span, so a rate that changes shows soon.
    @Test func aRateWindowFollowsAChangeOfRate() {
        var window = RateWindow()
        let start = ContinuousClock.now
        for tenth in 0...100 {
            // 100,000 bytes a second for 5 s, then nothing.
            let bytes = Int64(min(tenth, 50)) * 10_000
            window.add(bytes: bytes, at: start + .milliseconds(Int64(tenth) * 100))
        }
        #expect(window.bytesPerSecond == 0, "5 s after the transfer stopped: \(window.bytesPerSecond)")
    }
}
