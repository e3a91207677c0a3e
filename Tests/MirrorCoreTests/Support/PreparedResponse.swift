import Foundation

/// Exactly what `FaultServer` will do for one request: the bytes of the head, the body and how to
/// pace it, and whether the connection survives. Computed without I/O, so the rules (HEAD has no
/// body, broken framing closes the connection) are testable on their own.
struct PreparedResponse: Sendable {
    enum Action: Sendable {
        case respond(status: Int, headers: HeaderFields)
        case raw(Data)
        case closeWithoutResponse
        case resetConnection
    }

    var action: Action
    /// The body as it would be sent in full; `bodyToSend` applies the cut.
    var body: Data = Data()
    /// False for HEAD and for statuses that never carry a body (1xx, 204, 304).
    var sendsBody = false
    var closesConnection = true
    var delayBeforeHeaders: Duration = .zero
    var pause: FaultReply.Pause?
    var drip: FaultReply.Drip?
    var cutAfterBodyBytes: Int?
    var chunkSize: Int?

    var status: Int? {
        if case .respond(let status, _) = action { return status }
        return nil
    }

    var headers: HeaderFields {
        if case .respond(_, let headers) = action { return headers }
        return HeaderFields()
    }

    /// The body bytes that actually go out (before chunk framing).
    var bodyToSend: Data {
        guard sendsBody else { return Data() }
        guard let cut = cutAfterBodyBytes else { return body }
        return body.prefix(max(0, cut))
    }

    /// Status line and header block, ending with the blank line; empty for non-HTTP actions.
    var headBytes: Data {
        guard case .respond(let status, let headers) = action else { return Data() }
        var text = "HTTP/1.1 \(status) \(Self.reasonPhrase(status))\r\n"
        for field in headers {
            text += "\(field.name): \(field.value)\r\n"
        }
        text += "\r\n"
        return Data(text.utf8)
    }

    static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 204: "No Content"
        case 206: "Partial Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 303: "See Other"
        case 304: "Not Modified"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 410: "Gone"
        case 416: "Range Not Satisfiable"
        case 429: "Too Many Requests"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        default: "Status \(status)"
        }
    }
}

extension FaultReply {
    /// The response this reply gives `request`.
    func prepare(for request: RecordedRequest) -> PreparedResponse {
        let status: Int
        var headers: HeaderFields
        let body: Data
        switch content {
        case .raw(let bytes):
            return PreparedResponse(action: .raw(bytes), delayBeforeHeaders: delayBeforeHeaders)
        case .closeWithoutResponse:
            return PreparedResponse(action: .closeWithoutResponse, delayBeforeHeaders: delayBeforeHeaders)
        case .resetConnection:
            return PreparedResponse(action: .resetConnection, delayBeforeHeaders: delayBeforeHeaders)
        case .file(let file):
            (status, headers, body) = file.answer(method: request.method, request: request.headers,
                                                  misreport: rangeMisreport)
        case .status(let code, let scripted, let scriptedBody):
            (status, headers, body) = (code, scripted, scriptedBody)
        }

        // RFC 9110 §6.4.1: these never have content, whatever the headers say.
        let statusAllowsBody = !(100..<200).contains(status) && status != 204 && status != 304
        let sendsBody = statusAllowsBody && request.method != "HEAD"
        if statusAllowsBody {
            if chunkSize != nil {
                headers["Content-Length"] = nil
                headers["Transfer-Encoding"] = "chunked"
            } else if !headers.contains("Content-Length") && !headers.contains("Transfer-Encoding") {
                headers["Content-Length"] = String(body.count)
            }
        }
        for override in headerOverrides {
            headers[override.name] = override.value
        }

        var closes = !request.wantsKeepAlive || cutAfterBodyBytes != nil
            || headers.values("Connection").contains { $0.lowercased().contains("close") }
        if sendsBody && chunkSize == nil {
            // Without a Content-Length matching the body, the client can only find the end of
            // this response by the connection closing.
            closes = closes || headers["Content-Length"].flatMap { Int($0) } != body.count
        }
        if chunkSize != nil && headers["Transfer-Encoding"]?.lowercased() != "chunked" {
            closes = true
        }
        if closes && !headers.contains("Connection") {
            headers["Connection"] = "close"
        }

        return PreparedResponse(action: .respond(status: status, headers: headers), body: body,
                                sendsBody: sendsBody, closesConnection: closes,
                                delayBeforeHeaders: delayBeforeHeaders, pause: pause, drip: drip,
                                cutAfterBodyBytes: cutAfterBodyBytes,
                                chunkSize: statusAllowsBody ? chunkSize : nil)
    }
}
