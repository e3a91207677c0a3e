/// Stands before the partial file's writer for a GET sent as a stream of an HTTP/2 connection.
/// When the reply's head shows a body that may not come on a stream
/// (`RequestBudget.staysOnStream`: a large or unstated length), it takes a connection permit if
/// one is free (`takeConnection`); otherwise it stops the request before the writer sees
/// anything, and `needsConnection` says the GET is to be sent again once one is held.
final class StreamBodyGuard: ResponseBodySink, @unchecked Sendable {
    private let writer: PartialFileWriter
    private let takeConnection: () -> Bool
    private(set) var needsConnection = false

    init(_ writer: PartialFileWriter, takeConnection: @escaping () -> Bool) {
        self.writer = writer
        self.takeConnection = takeConnection
    }

    func begin(_ head: ResponseHead) -> BodyDisposition {
        let length = head.contentLength ?? head.contentRange.flatMap { range in
            range.first.flatMap { first in range.last.map { $0 - first + 1 } }
        }
        if !RequestBudget.staysOnStream(status: head.status, bodyLength: length), !takeConnection() {
            needsConnection = true
            return .abort
        }
        return writer.begin(head)
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> Bool { writer.write(bytes) }

    func end() {
        if !needsConnection { writer.end() }
    }
}
