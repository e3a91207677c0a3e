/// The entry's plain GET when its file may be fetched in segments: the partial file's writer
/// (`PartialFileWriter`, which keeps every rule of a contiguous download), watched. When the
/// reply's head offers a version worth splitting (`SegmentReply.version(ofLead:…)`), it says
/// so once (`onSplittable`, on the engine's thread but not inside libcurl's callback); once a
/// `SegmentedTransfer` has taken the download over, it stops at the end of stream 0's range.
final class SegmentLead: ResponseBodySink, @unchecked Sendable {
    let writer: PartialFileWriter
    private let splittable: (ResponseHead) -> SegmentVersion?
    private let onSplittable: (SegmentLead, SegmentVersion) -> Void
    /// Set once the download is segmented: it says where this stream ends.
    var transfer: SegmentedTransfer?
    private(set) var reachedEnd = false
    /// The request is over (as one stream): too late to split it.
    var finished = false
    private var reportedAt: Int64 = 0
    private var pacedAt: Int64 = 0
    /// Bytes between two looks at the lead's pace while it runs alone.
    static let paceEvery: Int64 = 256 << 10

    init(writer: PartialFileWriter, splittable: @escaping (ResponseHead) -> SegmentVersion?, onSplittable: @escaping (SegmentLead, SegmentVersion) -> Void) {
        self.writer = writer
        self.splittable = splittable
        self.onSplittable = onSplittable
    }

    /// Bytes written to the file from 0 on, not counting what the writer still buffers.
    var position: Int64 { writer.flushedPosition }

    func begin(_ head: ResponseHead) -> BodyDisposition {
        let disposition = writer.begin(head)
        // A body held in memory is short, never split (a `segmentMin` below the hold limit is
        // refused by the manifest and the command line, not by every caller of the library).
        if disposition == .write, !writer.holding, case .write(from: 0, _)? = writer.placement, let version = splittable(head) {
            onSplittable(self, version)
        }
        return disposition
    }

    func write(_ incoming: UnsafeRawBufferPointer) -> Bool {
        guard let transfer, let end = transfer.leadEnd else { return writer.write(incoming) }
        if !transfer.isSegmenting {
            // Still a plain download, paced: the pace needs no durability, only bytes received.
            guard writer.write(incoming) else { return false }
            if writer.position - pacedAt >= Self.paceEvery {
                pacedAt = writer.position
                transfer.postLeadPace(pacedAt)
            }
            report(to: transfer)
            return true
        }
        let room = end - writer.position
        if room <= 0 {
            reachedEnd = true
            return false
        }
        let fits = incoming.count <= room
        let bytes = fits ? incoming : UnsafeRawBufferPointer(rebasing: incoming[0..<Int(room)])
        guard writer.write(bytes) else { return false }
        if writer.position >= end {
            reachedEnd = true
            // The rest is other streams': stop, unless the body ends here anyway.
            return end == transfer.version.total && fits
        }
        report(to: transfer)
        return true
    }

    private func report(to transfer: SegmentedTransfer) {
        if writer.flushedPosition - reportedAt >= SegmentedTransfer.reportEvery {
            reportedAt = writer.flushedPosition
            transfer.postLeadProgress(reportedAt)
        }
    }

    func end() {
        writer.end()
    }
}
