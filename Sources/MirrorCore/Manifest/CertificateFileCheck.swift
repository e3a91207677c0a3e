import Glibc

/// Checks, before any transfer, that a CA bundle or directory can be used, so that a wrong path
/// is a manifest error naming the key rather than a TLS failure on every entry.
enum CertificateFileCheck {
    /// A bundle larger than this is not a list of certificate authorities.
    static let maximumBundleSize = 64 << 20

    /// Throws unless `path` is a readable regular file holding at least one PEM certificate
    /// (`-----BEGIN CERTIFICATE-----`), the only form libcurl's OpenSSL build reads.
    static func checkBundle(_ path: String) throws(ValueProblem) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw ValueProblem("cannot read `\(path)`: \(reason(errno))") }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw ValueProblem("cannot read `\(path)`: \(reason(errno))") }
        guard status.st_mode & S_IFMT == S_IFREG else {
            throw ValueProblem("`\(path)` is not a regular file; give a PEM file of CA certificates")
        }
        guard status.st_size <= maximumBundleSize else {
            throw ValueProblem("`\(path)` is larger than \(maximumBundleSize >> 20) MiB; give a PEM file of CA certificates")
        }
        var bytes = [UInt8](repeating: 0, count: Int(status.st_size))
        var filled = 0
        while filled < bytes.count {
            let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + filled, $0.count - filled) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw ValueProblem("cannot read `\(path)`: \(reason(errno))") }
            if count == 0 { break }
            filled += count
        }
        let marker = Array("CERTIFICATE-----".utf8)
        guard bytes[..<filled].firstRange(of: marker) != nil else {
            throw ValueProblem("`\(path)` holds no PEM certificate (`-----BEGIN CERTIFICATE-----`); give a PEM file of CA certificates")
        }
    }

    /// Throws unless `path` is a directory this process can read.
    static func checkDirectory(_ path: String) throws(ValueProblem) {
        var status = stat()
        guard stat(path, &status) == 0 else { throw ValueProblem("cannot read `\(path)`: \(reason(errno))") }
        guard status.st_mode & S_IFMT == S_IFDIR else {
            throw ValueProblem("`\(path)` is not a directory; give a directory of hashed CA certificates (`openssl rehash`)")
        }
        guard access(path, R_OK | X_OK) == 0 else { throw ValueProblem("cannot read `\(path)`: \(reason(errno))") }
    }

    private static func reason(_ code: Int32) -> String {
        String(cString: strerror(code))
    }
}
