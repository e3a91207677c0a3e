/// Receives the reply to a conditional GET: its head is judged first (`judge`, which asks the
/// entry's machine and answers with the sink that takes the body, a partial file's writer or
/// the lead of a segmented download around one, or nil when the body is not wanted), and only
/// then is a partial file opened and written. A reply judged without its
/// body (a 304, or a 200 of the version already on disk) leaves no file behind.
///
/// Used by one thread at a time (see `ResponseBodySink`).
final class ConditionalBodySink: ResponseBodySink, @unchecked Sendable {
    /// Called once, with the final reply's head, on the engine's thread.
    let judge: (ResponseHead) throws(TransferFailure) -> (any ResponseBodySink)?
    private(set) var head: ResponseHead?
    /// The sink the judgement chose; nil while none did.
    private(set) var body: (any ResponseBodySink)?
    /// Why no writer could be made for a body that was wanted.
    private(set) var failure: TransferFailure?

    init(judge: @escaping (ResponseHead) throws(TransferFailure) -> (any ResponseBodySink)?) {
        self.judge = judge
    }

    func begin(_ head: ResponseHead) -> BodyDisposition {
        self.head = head
        do {
            guard let body = try judge(head) else { return ConditionalReply.abandoning(head) }
            self.body = body
            return body.begin(head)
        } catch {
            failure = error
            return .abort
        }
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        body?.write(bytes) ?? false
    }

    func end() {
        body?.end()
    }
}
