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
        guard try containsCertificate(descriptor, path: path) else {
            throw ValueProblem("`\(path)` holds no PEM certificate (`-----BEGIN CERTIFICATE-----`); give a PEM file of CA certificates")
        }
    }

    /// Whether the file open on `descriptor` holds the PEM marker, read a block at a time up to
    /// the first one: a system bundle (Debian's is 210 KiB) has one in its first lines, and
    /// reading the whole file took a millisecond of every run's start.
    private static func containsCertificate(_ descriptor: Int32, path: String) throws(ValueProblem) -> Bool {
        let marker = Array("CERTIFICATE-----".utf8)
        let blockSize = 16 << 10
        // The block, after the last `marker.count - 1` bytes of the one before it: a marker
        // that straddles two reads is found whole.
        var buffer = [UInt8](repeating: 0, count: marker.count - 1 + blockSize)
        var kept = 0
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + kept, blockSize) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw ValueProblem("cannot read `\(path)`: \(reason(errno))") }
            if count == 0 { return false }
            let filled = kept + count
            if buffer.withUnsafeBytes({ contains(marker, in: UnsafeRawBufferPointer(rebasing: $0[..<filled])) }) { return true }
            kept = min(filled, marker.count - 1)
            buffer.withUnsafeMutableBytes { bytes in
                _ = memmove(bytes.baseAddress!, bytes.baseAddress! + (filled - kept), kept)
            }
        }
    }

    /// Whether `bytes` holds `needle`: `memchr` for its first byte, `memcmp` for the rest.
    private static func contains(_ needle: [UInt8], in bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress, bytes.count >= needle.count else { return false }
        return needle.withUnsafeBytes { needle in
            var start = 0
            let last = bytes.count - needle.count
            while start <= last, let hit = memchr(base + start, Int32(needle[0]), last - start + 1) {
                let offset = base.distance(to: UnsafeRawPointer(hit))
                if memcmp(base + offset, needle.baseAddress!, needle.count) == 0 { return true }
                start = offset + 1
            }
            return false
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

/// The CA bundles one manifest load has checked, and what was wrong with each: the environment's
/// is checked by every reading of the top level (the provisional one `ManifestStream` makes
/// before `files`, and the final one), and many entries may name one `ca_file`. Shared by the
/// decoders of one load, on the thread that loads it.
final class CertificateChecks {
    private var bundles: [String: Result<Void, ValueProblem>] = [:]

    /// `CertificateFileCheck.checkBundle`, once per path.
    func checkBundle(_ path: String) throws(ValueProblem) {
        let outcome = bundles[path] ?? Result { () throws(ValueProblem) in try CertificateFileCheck.checkBundle(path) }
        bundles[path] = outcome
        try outcome.get()
    }
}
