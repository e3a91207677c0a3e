import Foundation

/// A certificate authority of a test's own, made with the `openssl` command: its certificate
/// (`caCertificate`), and a server certificate it signed for `IP:127.0.0.1` with its key.
/// Everything lives in a private temporary directory.
final class PrivateCA: Sendable {
    let directory: TemporaryDirectory

    var caCertificate: String { directory.path("ca.pem") }
    var serverTLS: NginxTLS { NginxTLS(certificate: directory.path("server.pem"), key: directory.path("server.key")) }

    /// - Parameter name: the CA's common name, so that two CAs of one test differ.
    init(name: String = "mirror test CA") throws {
        directory = try TemporaryDirectory(prefix: "mirror-ca")
        // A configuration of our own, so that the system's openssl.cnf adds nothing.
        let configuration = """
            [req]
            distinguished_name = name
            [name]
            [authority]
            basicConstraints = critical,CA:TRUE
            keyUsage = critical,keyCertSign,cRLSign
            subjectKeyIdentifier = hash
            [server]
            basicConstraints = critical,CA:FALSE
            keyUsage = critical,digitalSignature,keyEncipherment
            extendedKeyUsage = serverAuth
            subjectAltName = IP:127.0.0.1
            authorityKeyIdentifier = keyid

            """
        try directory.write(Data(configuration.utf8), to: "openssl.cnf")
        let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        try run(["req", "-config", "openssl.cnf", "-x509", "-extensions", "authority", "-days", "2",
                 "-subj", "/CN=\(name)", "-keyout", "ca.key", "-out", "ca.pem"] + key)
        try run(["req", "-config", "openssl.cnf", "-new", "-subj", "/CN=127.0.0.1",
                 "-keyout", "server.key", "-out", "server.csr"] + key)
        try run(["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial", "2",
                 "-days", "2", "-extfile", "openssl.cnf", "-extensions", "server", "-out", "server.pem"])
    }

    /// A directory holding the CA certificate under its hash name (`openssl rehash`), the form
    /// `SSL_CERT_DIR` and `CURLOPT_CAPATH` read.
    func hashedDirectory() throws -> String {
        try FileManager.default.createDirectory(atPath: directory.path("hashed"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: caCertificate, toPath: directory.path("hashed/ca.pem"))
        try run(["rehash", directory.path("hashed")])
        return directory.path("hashed")
    }

    private func run(_ arguments: [String]) throws {
        try OpenSSL.run(arguments, in: directory)
    }
}
