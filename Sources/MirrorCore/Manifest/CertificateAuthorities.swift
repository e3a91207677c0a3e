/// Which certificate authorities TLS connections trust: a PEM bundle and a hashed directory
/// (`c_rehash`/`openssl rehash`). Either nil keeps what libcurl was built with (on Debian, the
/// bundle `/etc/ssl/certs/ca-certificates.crt` and the directory `/etc/ssl/certs`).
public struct CertificateAuthorities: Sendable, Equatable {
    /// Replaces libcurl's CA bundle (`CURLOPT_CAINFO`).
    public var file: String?
    /// Replaces libcurl's CA directory (`CURLOPT_CAPATH`).
    public var directory: String?

    public init(file: String? = nil, directory: String? = nil) {
        self.file = file
        self.directory = directory
    }

    /// A variable of the environment that names certificate authorities.
    public struct Variable: Sendable, Equatable {
        public var name: String
        public var value: String
        public var isDirectory: Bool
    }

    /// The variables curl's command line honours, in its precedence: `CURL_CA_BUNDLE` alone when
    /// set; otherwise `SSL_CERT_FILE` and `SSL_CERT_DIR`, each replacing its own part. Empty
    /// values count as unset. A manifest `ca_file` replaces all of them.
    public static func variables(in environment: [String: String]) -> [Variable] {
        func value(_ name: String) -> String? {
            guard let value = environment[name], !value.isEmpty else { return nil }
            return value
        }
        if let bundle = value("CURL_CA_BUNDLE") {
            return [Variable(name: "CURL_CA_BUNDLE", value: bundle, isDirectory: false)]
        }
        var found: [Variable] = []
        if let file = value("SSL_CERT_FILE") { found.append(Variable(name: "SSL_CERT_FILE", value: file, isDirectory: false)) }
        if let directory = value("SSL_CERT_DIR") { found.append(Variable(name: "SSL_CERT_DIR", value: directory, isDirectory: true)) }
        return found
    }

    /// The authorities `variables` name.
    public init(_ variables: [Variable]) {
        self.init()
        for variable in variables {
            if variable.isDirectory { directory = variable.value } else { file = variable.value }
        }
    }
}
