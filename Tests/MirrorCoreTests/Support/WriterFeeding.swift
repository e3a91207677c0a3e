import Foundation
import Testing
@testable import MirrorCore

extension PartialFileWriter {
    /// Hands `body` over the way libcurl does, 16 KiB at a time, then ends the body; requires
    /// every piece to be taken.
    func receive(_ body: Data) throws {
        var sent = 0
        while sent < body.count {
            let piece = body[(body.startIndex + sent)..<(body.startIndex + min(body.count, sent + 16384))]
            let accepted = piece.withUnsafeBytes { write($0) }
            try #require(accepted, "write failed: \(String(describing: failure))")
            sent += piece.count
        }
        end()
    }
}
