/// Stands before the sink of a GET sent as a stream of an HTTP/2 connection (the partial file's
/// writer, or a conditional GET's sink, which judges the head after this guard lets it on).
/// When the reply's head shows a body that may not come on a stream
/// (`RequestBudget.staysOnStream`: a large or unstated length), it takes a connection permit if
/// one is free (`takeConnection`); otherwise it stops the request before the writer sees
/// anything, and `needsConnection` says the GET is to be sent again once one is held.
final class StreamBodyGuard: ResponseBodySink, @unchecked Sendable {
    private let inner: any ResponseBodySink
    private let takeConnection: () -> Bool
    private(set) var needsConnection = false

    init(_ inner: any ResponseBodySink, takeConnection: @escaping () -> Bool) {
        self.inner = inner
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
        return inner.begin(head)
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> Bool { inner.write(bytes) }

    func end() {
        if !needsConnection { inner.end() }
    }
}
