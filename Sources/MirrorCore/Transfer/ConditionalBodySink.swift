/// Receives the reply to a conditional GET: its head is judged first (`judge`, which asks the
/// entry's machine and answers with the writer that takes the body, or nil when the body is not
/// wanted), and only then is a partial file opened and written. A reply judged without its
/// body (a 304, or a 200 of the version already on disk) leaves no file behind.
///
/// Used by one thread at a time (see `ResponseBodySink`).
final class ConditionalBodySink: ResponseBodySink, @unchecked Sendable {
    /// Called once, with the final reply's head, on the engine's thread.
    let judge: (ResponseHead) throws(TransferFailure) -> PartialFileWriter?
    private(set) var head: ResponseHead?
    /// The writer the judgement chose; nil while none did.
    private(set) var writer: PartialFileWriter?
    /// Why no writer could be made for a body that was wanted.
    private(set) var failure: TransferFailure?

    init(judge: @escaping (ResponseHead) throws(TransferFailure) -> PartialFileWriter?) {
        self.judge = judge
    }

    func begin(_ head: ResponseHead) -> BodyDisposition {
        self.head = head
        do {
            guard let writer = try judge(head) else { return ConditionalReply.abandoning(head) }
            self.writer = writer
            return writer.begin(head)
        } catch {
            failure = error
            return .abort
        }
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        writer?.write(bytes) ?? false
    }

    func end() {
        writer?.end()
    }
}
