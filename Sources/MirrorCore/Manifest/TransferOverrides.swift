/// The transfer settings one mapping of the manifest sets: `defaults:` or an entry. Keys it
/// leaves out are nil and keep the value they are applied to.
struct TransferOverrides: Equatable {
    var retries: Int?
    var timeout: Duration?
    var headers: [HTTPHeader]?
    var insecure: Bool?
    var ftpTLS: FTPTLS?
    var maxSize: Int64?
    var minSpeed: Int64?
    var minSpeedTime: Duration?
    /// `ca_file`, made absolute.
    var caFile: String?
    var checksums: Checksums?
    /// `segment_min`; `Int64.max` for `off`.
    var segmentMin: Int64?

    /// `checksums`: a checksum file's URL, or `none`, which takes away the one `defaults` names.
    enum Checksums: Equatable {
        case noFile
        case file(RemoteURL)
    }

    /// `base` with these overrides applied. Headers merge by case-insensitive name: a header
    /// named here replaces the one in `base` in its place (taking this spelling of the name),
    /// new names follow in order. Every other key replaces the value in `base` outright.
    func applied(to base: TransferSettings) -> TransferSettings {
        var settings = base
        if let retries { settings.retries = retries }
        if let timeout { settings.timeout = timeout }
        if let insecure { settings.insecure = insecure }
        if let ftpTLS { settings.ftpTLS = ftpTLS }
        if let maxSize { settings.maxSize = maxSize }
        if let minSpeed { settings.minSpeed = minSpeed == 0 ? nil : minSpeed }
        if let minSpeedTime { settings.minSpeedTime = minSpeedTime }
        if let segmentMin { settings.segmentMin = segmentMin }
        switch checksums {
        case .noFile?: settings.checksums = nil
        case .file(let url)?: settings.checksums = url
        case nil: break
        }
        // As curl's --cacert: the file replaces the CAs the environment names, directory too.
        if let caFile { settings.certificateAuthorities = CertificateAuthorities(file: caFile) }
        if let headers { HeaderRules.merge(headers, over: &settings.headers) }
        return settings
    }
}
