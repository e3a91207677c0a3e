import Foundation
import Testing
@testable import MirrorCore

/// FTP and both forms of FTPS against a real vsftpd.
@Suite(.serialized)
struct FTPTests {
    @Test func aSameSizeChangeIsSeenThroughTheFilesTime() async throws {
        let site = try TemporaryDirectory(prefix: "mirror-ftp-site")
        let old = randomData(count: 100_000, seed: 80)
        let new = randomData(count: 100_000, seed: 81)
        let path = try site.write(old, to: "f.bin")
        let firstTime = Date(timeIntervalSince1970: 1_700_000_000)
        try FileManager.default.setAttributes([.modificationDate: firstTime], ofItemAtPath: path)
        let ftp = try await VsftpdServer.start(serving: site)
        let work = try SyncScenario()
        let manifest = try work.load(.files(.url(ftp.url("/f.bin"), dest: "f.bin", "retries: 1")))

        let first = try await work.sync(manifest)
        #expect(first[0].outcome == .transferred)
        #expect(work.local("f.bin")?.fingerprint == old.fingerprint)
        #expect(try work.record("f.bin")?.complete?.validators.lastModified == "Tue, 14 Nov 2023 22:13:20 GMT")
        let localTime = try FileManager.default.attributesOfItem(atPath: work.directory.path("root/f.bin"))[.modificationDate] as? Date
        #expect(localTime == firstTime, "DEST takes the server's file time")
        let unchanged = try await work.sync(manifest)
        #expect(unchanged[0].outcome == .skipped)

        try site.write(new, to: "f.bin")
        try FileManager.default.setAttributes([.modificationDate: firstTime + 60], ofItemAtPath: path)
        let changed = try await work.sync(manifest)

        #expect(changed[0].outcome == .transferred, "\(changed[0].action)")
        #expect(changed[0].action.name == "replace")
        #expect(work.local("f.bin")?.fingerprint == new.fingerprint)
        #expect(ftp.commands.contains("MDTM f.bin"), "\(ftp.commands)")
    }

    @Test func plainFTPResumesAPartialFile() async throws {
        let site = try TemporaryDirectory(prefix: "mirror-ftp-site")
        let data = randomData(count: 300_000, seed: 82)
        try site.write(data, to: "r.bin")
        let ftp = try await VsftpdServer.start(serving: site)
        let work = try SyncScenario()
        try work.put(data.prefix(200_000), at: "r.bin.part")

        let reports = try await work.sync(.files(.url(ftp.url("/r.bin"), dest: "r.bin", "retries: 1")))

        #expect(reports[0].outcome == .transferred)
        #expect(reports[0].bytesTransferred == 100_000)
        #expect(work.local("r.bin")?.fingerprint == data.fingerprint)
        #expect(ftp.commands.contains("REST \(200_000 - 65_536)"), "\(ftp.commands)")
    }

    /// An entry's `rate_limit` holds an FTP download too: 640 KiB at 256 KiB/s, of which the first
    /// 16 KiB chunk goes through at once, cannot end in under 2.4 s, whatever the load.
    @Test func anFTPDownloadKeepsToItsRateLimit() async throws {
        let site = try TemporaryDirectory(prefix: "mirror-ftp-site")
        let data = randomData(count: 640 * 1024, seed: 83)
        try site.write(data, to: "slow.bin")
        let ftp = try await VsftpdServer.start(serving: site)
        let work = try SyncScenario()

        let started = ContinuousClock.now
        let reports = try await work.sync(.files(.url(ftp.url("/slow.bin"), dest: "slow.bin", "rate_limit: 256KiB", "retries: 0")))
        let elapsed = ContinuousClock.now - started

        #expect(reports[0].outcome == .transferred, "\(reports[0])")
        #expect(work.local("slow.bin")?.fingerprint == data.fingerprint)
        #expect(elapsed >= .milliseconds(2_200), "640 KiB at 256 KiB/s took \(elapsed)")
    }

    @Test func explicitFTPSWithFtpTLSRequired() async throws {
        let site = try TemporaryDirectory(prefix: "mirror-ftp-site")
        let data = randomData(count: 150_000, seed: 83)
        try site.write(data, to: "s.bin")
        let ftp = try await VsftpdServer.start(serving: site, tls: .explicitRequired)
        let work = try SyncScenario()

        // Plain FTP to a server that insists on TLS: refused at login.
        let plain = try await work.sync(.files(.url(ftp.url("/s.bin"), dest: "plain.bin", "retries: 1")))
        guard case .failed = plain[0].outcome else {
            Issue.record("plain FTP to a TLS-only server should fail: \(plain[0].outcome)")
            return
        }

        let secured = try await work.sync(.files(.url(
            ftp.url("/s.bin"), dest: "s.bin", "retries: 1", "ftp_tls: required", "ca_file: \(try #require(ftp.authority).caCertificate)")))

        #expect(secured[0].outcome == .transferred, "\(secured[0].outcome)")
        #expect(work.local("s.bin")?.fingerprint == data.fingerprint)
        #expect(ftp.commands.contains("AUTH TLS"), "\(ftp.commands)")
        #expect(ftp.commands.contains("PROT P"), "the data connection is protected too: \(ftp.commands)")
        #expect(work.local("plain.bin") == nil)
    }

    @Test func ftpTLSTryGoesOnInTheClearWithAServerWithoutTLS() async throws {
        let site = try TemporaryDirectory(prefix: "mirror-ftp-site")
        let data = randomData(count: 20_000, seed: 86)
        try site.write(data, to: "t.bin")
        let ftp = try await VsftpdServer.start(serving: site)
        let work = try SyncScenario()

        let tried = try await work.sync(.files(.url(ftp.url("/t.bin"), dest: "t.bin", "retries: 1", "ftp_tls: try")))
        let required = try await work.sync(.files(.url(ftp.url("/t.bin"), dest: "r.bin", "retries: 1", "ftp_tls: required")))

        #expect(tried[0].outcome == .transferred, "\(tried[0].outcome)")
        #expect(work.local("t.bin")?.fingerprint == data.fingerprint)
        #expect(ftp.commands.contains("AUTH TLS"), "TLS was asked for: \(ftp.commands)")
        guard case .failed = required[0].outcome else {
            Issue.record("ftp_tls: required must not fall back to plain FTP: \(required[0].outcome)")
            return
        }
        #expect(work.local("r.bin") == nil)
    }

    @Test func explicitFTPSIsVerifiedLikeHTTPS() async throws {
        let site = try TemporaryDirectory(prefix: "mirror-ftp-site")
        try site.write(randomData(count: 1_000, seed: 84), to: "v.bin")
        let ftp = try await VsftpdServer.start(serving: site, tls: .explicitRequired)
        let work = try SyncScenario()

        let reports = try await work.sync(.files(.url(ftp.url("/v.bin"), dest: "v.bin", "retries: 1", "ftp_tls: required")))

        guard case .failed(let failure) = reports[0].outcome else {
            Issue.record("a certificate of an unknown CA must not be trusted without ca_file")
            return
        }
        #expect(!failure.isRetryable, "\(failure)")
        #expect(work.local("v.bin") == nil)
    }

    @Test func implicitFTPS() async throws {
        let site = try TemporaryDirectory(prefix: "mirror-ftp-site")
        let data = randomData(count: 120_000, seed: 85)
        try site.write(data, to: "i.bin")
        let ftp = try await VsftpdServer.start(serving: site, tls: .implicit)
        let work = try SyncScenario()

        let reports = try await work.sync(.files(.url(ftp.url("/i.bin", scheme: "ftps"), dest: "i.bin", "retries: 1", "ca_file: \(try #require(ftp.authority).caCertificate)")))

        #expect(reports[0].outcome == .transferred, "\(reports[0].outcome)")
        #expect(work.local("i.bin")?.fingerprint == data.fingerprint)
        #expect(ftp.commands.contains("RETR i.bin"), "\(ftp.commands)")
    }
}
