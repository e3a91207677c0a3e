import Foundation
import Testing
@testable import MirrorCore

/// One sync scenario, written as curl's and wget's suites write theirs: what the server answers
/// (the fault server's scripted replies in order, or files nginx serves), the files under the
/// root before, the run (through the library's `ManifestRunner` or the built `mirror`), then
/// the requests the server saw, the files after and the reports or the exit code.
///
/// ```swift
/// let scenario = try SyncScenario(.faultServer, before: ["a.bin.part": data.prefix(100_000)])
/// scenario.server.route("/a.bin", replies: [.status(503), .file(data, etag: "\"a\"")])
/// let reports = try await scenario.sync(.files(.url(scenario.url("/a.bin"))))
/// #expect(scenario.server.requests.map(\.method) == ["GET", "GET"])
/// #expect(scenario.files() == ["a.bin"])
/// ```
///
/// Everything lives in one private directory: manifests at its top, destinations under `root/`,
/// what nginx serves under `site/`. Servers other than these two (Apache, lighttpd, vsftpd, a
/// second host) are started by the test, which points the manifest at them.
final class SyncScenario: Sendable {
    /// What answers the scenario's requests.
    enum Origin: Sendable {
        /// No server of the scenario's own.
        case none
        /// The fault-injecting server (`server`), scripted by the test.
        case faultServer
        /// The fault server inside `namespace`, reached only by a `mirror` run in there (`run`
        /// with `launcher`).
        case faultServerInside(NetworkNamespace)
        /// nginx (`nginx`) serving `site`: files by their path under the site.
        case nginx(site: [String: Data], options: NginxOptions = .init())
    }

    /// How a run through the library is set up; every field has the scenario's default.
    struct Settings: Sendable {
        /// Transfers in flight at once; nil: the manifest's `concurrency`.
        var concurrency: Int?
        var retryPolicy: RetryPolicy = SyncScenario.quickRetries
        var events: (@Sendable (RunEvent) -> Void)?
        var progress: SyncProgress?
        /// nil: the library's default.
        var connectivityCheckInterval: Duration?
        /// `--prune` for `syncAndPrune`; nil: no prune.
        var prune: PruneSettings?
        /// Connections opened before the runner is made, as the command line opens them
        /// (`EarlyConnections.open`).
        var early: EarlyConnections?
        /// The blob cache the run uses, as the command line chooses it (`BlobCache.chosen`).
        var cache: BlobCache?
    }

    /// Backoff short enough that retries cost the tests nothing; its length is never asserted.
    static let quickRetries = RetryPolicy(base: .milliseconds(5), cap: .milliseconds(20))

    let directory: TemporaryDirectory
    private let faultServer: FaultServer?
    private let nginxServer: NginxServer?

    /// - Parameter files: what is under the root before the run, by path relative to it.
    init(_ origin: Origin = .none, before files: [String: Data] = [:]) throws {
        // libcurl reads proxy settings from the environment; loopback must stay direct.
        setenv("no_proxy", "*", 1)
        directory = try TemporaryDirectory(prefix: "mirror-scenario")
        try FileManager.default.createDirectory(atPath: directory.path("root"), withIntermediateDirectories: true)
        for (dest, data) in files { try directory.write(data, to: "root/" + dest) }
        switch origin {
        case .none:
            faultServer = nil
            nginxServer = nil
        case .faultServer:
            faultServer = try FaultServer.start()
            nginxServer = nil
        case .faultServerInside(let namespace):
            faultServer = try FaultServer.start(in: namespace)
            nginxServer = nil
        case .nginx(let site, let options):
            for (path, data) in site { try directory.write(data, to: "site/" + path) }
            try FileManager.default.createDirectory(atPath: directory.path("site"), withIntermediateDirectories: true)
            faultServer = nil
            nginxServer = try NginxServer.start(serving: directory.path("site"), options: options)
        }
    }

    /// The fault server of a `.faultServer` scenario.
    var server: FaultServer {
        guard let faultServer else { preconditionFailure("this scenario has no fault server (Origin.faultServer)") }
        return faultServer
    }

    /// The nginx of an `.nginx` scenario.
    var nginx: NginxServer {
        guard let nginxServer else { preconditionFailure("this scenario serves nothing through nginx (Origin.nginx)") }
        return nginxServer
    }

    /// The URL of `path` on the scenario's server.
    func url(_ path: String) -> String {
        if let faultServer { return faultServer.url(path) }
        return nginx.url(path)
    }

    // MARK: Before the run

    /// The absolute path of the root, where destinations live.
    var root: String { directory.path("root") }

    /// The absolute path of `relative` under the root.
    func rootPath(_ relative: String) -> String { directory.path("root/" + relative) }

    /// Writes `data` at `dest` under the root, making its directories.
    @discardableResult
    func put(_ data: Data, at dest: String) throws -> String {
        try directory.write(data, to: "root/" + dest)
    }

    /// What nginx serves at `path` (relative to the site).
    func served(_ path: String) -> Data { directory.contents(of: "site/" + path)! }

    /// Puts a copy of the served file `path` at `dest`, dated as the server dates it (as mirror,
    /// `wget -N` or `curl -R` leave a download): with no record, that date is what makes it a
    /// known version.
    func putCopy(ofServed path: String, at dest: String) throws {
        try put(served(path), at: dest)
        let date = try FileManager.default.attributesOfItem(atPath: directory.path("site/" + path))[.modificationDate]
        try FileManager.default.setAttributes([.modificationDate: date as Any], ofItemAtPath: rootPath(dest))
    }

    /// Writes `record` into the root's state store, as an earlier run would have.
    func save(_ record: StateRecord) throws {
        let store = try #require(StateStore.open(root: root, mode: .readWrite).store)
        try store.save(record)
        store.close()
    }

    // MARK: The run, through the library

    /// Parses `manifest` as the file `test.yaml` in the scenario's directory, with no environment.
    func load(_ manifest: ManifestText) throws -> Manifest {
        try load(text: manifest.text)
    }

    func load(text: String) throws -> Manifest {
        try ManifestLoader.parse(text: text, path: directory.path("test.yaml"), baseDirectory: directory.path, environment: [:])
    }

    func runOptions(_ manifest: Manifest, _ settings: Settings = Settings()) -> RunOptions {
        var options = RunOptions(
            concurrency: settings.concurrency ?? manifest.concurrency, retryPolicy: settings.retryPolicy,
            events: settings.events, progress: settings.progress)
        if let interval = settings.connectivityCheckInterval { options.connectivityCheckInterval = interval }
        options.prune = settings.prune
        options.earlyConnections = settings.early
        options.cache = settings.cache
        return options
    }

    func runner(_ manifest: Manifest, _ settings: Settings = Settings()) -> ManifestRunner {
        ManifestRunner(manifest: manifest, options: runOptions(manifest, settings))
    }

    /// What `mirror verify` runs.
    func verifier(_ manifest: Manifest, _ settings: Settings = Settings()) -> Verifier {
        Verifier(manifest: manifest, options: runOptions(manifest, settings))
    }

    func runner(_ manifest: ManifestText, _ settings: Settings = Settings()) throws -> ManifestRunner {
        runner(try load(manifest), settings)
    }

    func sync(_ manifest: Manifest, _ settings: Settings = Settings()) async throws -> [EntryReport] {
        try await runner(manifest, settings).sync()
    }

    func sync(_ manifest: ManifestText, _ settings: Settings = Settings()) async throws -> [EntryReport] {
        try await runner(load(manifest), settings).sync()
    }

    /// A sync with `--prune` (or with `settings.prune` when given).
    func syncAndPrune(_ manifest: ManifestText, _ settings: Settings = Settings(prune: PruneSettings())) async throws -> SyncResult {
        try await runner(load(manifest), settings).syncAndPrune()
    }

    // MARK: The run, through the binary

    /// Writes `manifest` (or any `text`) as the file `name` in the scenario's directory; returns
    /// its absolute path.
    @discardableResult
    func write(_ manifest: ManifestText, to name: String = "m.yaml") throws -> String {
        try write(text: manifest.text, to: name)
    }

    @discardableResult
    func write(text: String, to name: String = "m.yaml") throws -> String {
        try directory.write(Data(text.utf8), to: name)
    }

    /// The text of the file `name` in the scenario's directory (a manifest `mirror lock` edited).
    func text(of name: String) -> String {
        String(decoding: directory.contents(of: name) ?? Data(), as: UTF8.self)
    }

    /// Runs `mirror arguments` to completion in the scenario's directory, or in `workingDirectory`
    /// (see `MirrorBinary.start`).
    func run(_ arguments: [String], in workingDirectory: String? = nil, environment: [String: String] = [:],
             umask: mode_t? = nil, launcher: [String] = []) throws -> MirrorBinary.Result {
        try MirrorBinary.run(arguments, in: workingDirectory ?? directory.path, environment: environment, umask: umask,
                             launcher: launcher)
    }

    /// Starts `mirror arguments` in the scenario's directory, for a test that acts while it runs.
    func start(_ arguments: [String], environment: [String: String] = [:], standardOutput: FileHandle? = nil,
               standardError: FileHandle? = nil, launcher: [String] = [], timeout: Duration = .seconds(60)) throws -> MirrorBinary.Running {
        try MirrorBinary.start(arguments, in: directory.path, environment: environment, standardOutput: standardOutput,
                               standardError: standardError, launcher: launcher, timeout: timeout)
    }

    // MARK: After the run

    /// The file at `dest` under the root, or nil.
    func local(_ dest: String) -> Data? { directory.contents(of: "root/" + dest) }

    /// Every file and directory under the root but mirror's own `.mirror/`: what a user sees.
    func files() -> [String] { directory.files("root") }

    /// Every file and directory under the root with its size, to prove that nothing changed.
    func snapshot() -> [String] {
        files().map { relative in
            let size = (try? FileManager.default.attributesOfItem(atPath: rootPath(relative))[.size] as? Int) ?? -1
            return "\(relative) \(size)"
        }
    }

    /// What the root's state store holds for `dest`.
    func record(_ dest: String) throws -> StateRecord? {
        try StateStore.open(root: root, mode: .readOnly).store?.record(for: dest)
    }

    /// nginx's log once it has stopped growing: it writes a line just after each response, so
    /// the last line can trail the client's return by a moment.
    func nginxRequests() throws -> [LoggedRequest] {
        var last = try nginx.requests()
        let deadline = ContinuousClock.now + .seconds(2)
        while ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.05)
            let now = try nginx.requests()
            if now.count == last.count { return now }
            last = now
        }
        return last
    }
}

extension ManifestText {
    /// A manifest of `entries` with the defaults: root `root`, no top-level settings.
    static func files(_ entries: Entry...) -> ManifestText { ManifestText(entries: entries) }
}

extension ManifestText.Entry {
    static func url(_ url: String, dest: String? = nil, _ lines: String...) -> Self {
        Self(url, dest: dest, lines: lines)
    }
}
