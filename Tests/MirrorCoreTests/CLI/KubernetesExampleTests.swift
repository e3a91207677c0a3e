import Foundation
import Testing
@testable import MirrorCore

/// examples/kubernetes (an Indexed Job, its PersistentVolumeClaim and the manifest's ConfigMap)
/// and the Containerfile its image is built from: valid against the Kubernetes schemas, with an
/// exit-code policy that matches mirror(1), a command line the built binary accepts and runs as
/// every index would, and a runtime image that has every library the release binary links.
/// No cluster and no container engine are needed.
@Suite(.serialized)
struct KubernetesExampleTests {
    static let examples = InstallTests.packageRoot + "/examples/kubernetes"
    static let tools = InstallTests.packageRoot + "/.build/python-tools/bin"
    /// The oldest release with every field the Job uses on by default (backoffLimitPerIndex,
    /// podFailurePolicy's FailIndex), and the newest the validator knows.
    static let kubernetesVersions = ["1.31.0", "1.37.0"]

    struct ToolMissing: Error, CustomStringConvertible {
        var path: String
        var description: String {
            "\(path) not found: install kubernetes-validate (PyPI) with `scripts/install-kubernetes-validate.sh`"
                + " (make test runs it through scripts/install-deps.sh; it needs `apt-get install -y python3-venv`)"
        }
    }

    static func tool(_ name: String) throws -> String {
        let path = tools + "/" + name
        guard FileManager.default.isExecutableFile(atPath: path) else { throw ToolMissing(path: path) }
        return path
    }

    /// The example files, sorted by name.
    static func files() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: examples)
            .filter { $0.hasSuffix(".yaml") || $0.hasSuffix(".yml") }.sorted().map { examples + "/" + $0 }
    }

    /// Every YAML document of `path`, as JSON values (read by PyYAML, which kubernetes-validate
    /// brings along).
    static func documents(_ path: String) throws -> [[String: Any]] {
        let result = try ExternalCommand.run(try tool("python"), [
            "-c", "import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))", path,
        ], in: examples)
        try #require(result.status == 0, "\(result)")
        return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]])
    }

    /// The one document of `kind` among every example file.
    static func document(kind: String) throws -> [String: Any] {
        let all = try files().flatMap { try documents($0) }.filter { $0["kind"] as? String == kind }
        try #require(all.count == 1, "one \(kind) expected")
        return all[0]
    }

    static func value(_ object: Any?, _ path: String...) -> Any? {
        path.reduce(object) { ($0 as? [String: Any])?[$1] }
    }

    /// The Job's `mirror` container.
    static func container(_ job: [String: Any]) throws -> [String: Any] {
        let containers = try #require(value(job, "spec", "template", "spec", "containers") as? [[String: Any]])
        return try #require(containers.first { $0["name"] as? String == "mirror" }, "a container named mirror")
    }

    @Test func everyDocumentPassesTheKubernetesSchema() throws {
        let validator = try Self.tool("kubernetes-validate")
        let files = try Self.files()
        let documentCount = try files.map { try Self.documents($0).count }.reduce(0, +)
        #expect(documentCount >= 3, "a Job, a PersistentVolumeClaim and a ConfigMap: \(files)")
        for version in Self.kubernetesVersions {
            // --strict: a field the schema does not know is an error, not ignored.
            let result = try ExternalCommand.run(validator, ["--strict", "--kubernetes-version", version] + files, in: Self.examples)
            #expect(result.status == 0, "\(result)")
            let passed = result.stdout.split(separator: "\n").filter { $0.contains(" passed for resource ") }
            #expect(passed.count == documentCount, "every document checked against \(version): \(result)")
        }

        // The validator does reject a misspelt field: the check above can fail.
        let scratch = try TemporaryDirectory(prefix: "mirror-kubernetes")
        let job = try String(contentsOfFile: Self.examples + "/job.yaml", encoding: .utf8)
        let misspelt = try scratch.write(Data(job.replacingOccurrences(of: "backoffLimitPerIndex:", with: "backoffLimitPerIndx:").utf8),
                                         to: "job.yaml")
        let rejected = try ExternalCommand.run(validator, ["--strict", "--kubernetes-version", "1.31.0", misspelt], in: scratch.path)
        #expect(rejected.status != 0, "\(rejected)")
    }

    /// The failure policy follows mirror(1)'s EXIT STATUS: 2 (usage or manifest: every index
    /// would fail alike) fails the Job, 1 (an entry failed after mirror's own retries) fails
    /// the index, 3 (the shard's lock is held) and 4 (network unreachable) are retried against
    /// backoffLimitPerIndex, and an eviction (SIGTERM, 143) is retried without counting.
    @Test func theIndexedJobShardsByCompletionIndexAndMapsMirrorsExitCodes() throws {
        let job = try Self.document(kind: "Job")
        let spec = try #require(job["spec"] as? [String: Any])
        #expect(spec["completionMode"] as? String == "Indexed")
        let completions = try #require(spec["completions"] as? Int)
        #expect(try #require(spec["parallelism"] as? Int) <= completions)
        #expect(try #require(spec["backoffLimitPerIndex"] as? Int) > 0)
        #expect(Self.value(spec, "template", "spec", "restartPolicy") as? String == "Never", "podFailurePolicy requires it")

        let rules = try #require(Self.value(spec, "podFailurePolicy", "rules") as? [[String: Any]])
        var actionOfExitCode: [Int: String] = [:]
        for rule in rules {
            guard let exitCodes = rule["onExitCodes"] as? [String: Any] else { continue }
            #expect(exitCodes["containerName"] as? String == "mirror")
            #expect(exitCodes["operator"] as? String == "In")
            for code in exitCodes["values"] as? [Int] ?? [] where actionOfExitCode[code] == nil {
                actionOfExitCode[code] = rule["action"] as? String
            }
        }
        #expect(actionOfExitCode == [2: "FailJob", 1: "FailIndex", 3: "Count", 4: "Count"])
        let disruption = rules.first { rule in
            (rule["onPodConditions"] as? [[String: Any]])?.contains { $0["type"] as? String == "DisruptionTarget" } == true
        }
        #expect(disruption?["action"] as? String == "Ignore")

        let arguments = try #require(try Self.container(job)["args"] as? [String])
        #expect(arguments.first == "sync")
        let shard = try #require(arguments.firstIndex(of: "--shard"))
        #expect(arguments[shard + 1] == "auto")
        let count = try #require(arguments.firstIndex(of: "--shard-count"))
        #expect(arguments[count + 1] == String(completions), "--shard-count must equal completions")

        // The mounts name the claim and the ConfigMap of the other files, and the manifest's path.
        let volumes = try #require(Self.value(spec, "template", "spec", "volumes") as? [[String: Any]])
        let claim = try Self.document(kind: "PersistentVolumeClaim")
        #expect(volumes.contains { Self.value($0, "persistentVolumeClaim", "claimName") as? String == Self.value(claim, "metadata", "name") as? String })
        let configMap = try Self.document(kind: "ConfigMap")
        #expect(volumes.contains { Self.value($0, "configMap", "name") as? String == Self.value(configMap, "metadata", "name") as? String })
        let mounts = try #require(try Self.container(job)["volumeMounts"] as? [[String: Any]])
        let manifestMount = try #require(mounts.first { $0["readOnly"] as? Bool == true }?["mountPath"] as? String)
        let keys = try #require(configMap["data"] as? [String: String]).keys
        #expect(keys.contains { manifestMount + "/" + $0 == arguments.last }, "the manifest argument is the ConfigMap's key: \(arguments)")
    }

    @Test func theConfigMapHoldsAManifestMirrorAccepts() throws {
        let configMap = try Self.document(kind: "ConfigMap")
        let data = try #require(configMap["data"] as? [String: String])
        try #require(data.count == 1, "one manifest")
        let (name, text) = try #require(data.first)
        let manifest = try ManifestLoader.parse(text: text, path: "/etc/mirror/" + name, baseDirectory: "/etc/mirror", environment: [:])
        #expect(!manifest.entries.isEmpty)
    }

    /// Each index's command, run by the built binary with the paths of the pod moved into a
    /// temporary directory and `JOB_COMPLETION_INDEX` set as Kubernetes sets it: every index
    /// exits 0, together they fetch every file once, and their reports merge to success.
    @Test func everyIndexOfTheJobRunsWithTheBuiltBinary() throws {
        let job = try Self.document(kind: "Job")
        let completions = try #require(Self.value(job, "spec", "completions") as? Int)
        let arguments = try #require(try Self.container(job)["args"] as? [String])

        let scenario = try SyncScenario(.nginx(site: Dictionary(uniqueKeysWithValues: (0..<10).map {
            ("d/f\($0).bin", randomData(count: 1_000 + $0 * 5_000, seed: UInt64(900 + $0)))
        })))
        let help = try scenario.run(["sync", "--help"])
        #expect(help.status == 0, "\(help)")
        for flag in arguments where flag.hasPrefix("--") {
            #expect(help.stdout.contains(flag), "`mirror sync --help` lists \(flag)")
        }

        // The pod's /data (the volume) and /etc/mirror (the ConfigMap), moved under the scenario.
        let podRoot = scenario.directory.path("pod")
        let manifestPath = try #require(arguments.last)
        try FileManager.default.createDirectory(atPath: podRoot + "/data", withIntermediateDirectories: true)
        let served = (0..<10).map { "d/f\($0).bin" }
        try scenario.directory.write(Data(ManifestText(root: nil, entries: served.map { .init(scenario.url("/" + $0), dest: $0) }).text.utf8),
                                     to: "pod" + manifestPath)
        for index in 0..<completions {
            let local = arguments.map { argument in
                var argument = argument.replacingOccurrences(of: "$(JOB_COMPLETION_INDEX)", with: String(index))
                if argument.hasPrefix("/") { argument = podRoot + argument }
                return argument
            }
            #expect(!local.contains { $0.contains("$(") }, "only $(JOB_COMPLETION_INDEX) is expanded: \(local)")
            let result = try scenario.run(local, environment: ["JOB_COMPLETION_INDEX": String(index)])
            #expect(result.status == 0, "index \(index): \(result)")
        }
        let rootIndex = try #require(arguments.firstIndex(of: "--root"))
        let root = podRoot + arguments[rootIndex + 1]
        for path in served {
            #expect(FileManager.default.contents(atPath: root + "/" + path) == scenario.served(path), "\(path)")
        }
        #expect(try scenario.nginxRequests().filter { $0.method == "GET" }.count == served.count)

        let reportIndex = try #require(arguments.firstIndex(of: "--report"))
        let reports = (0..<completions).map {
            podRoot + arguments[reportIndex + 1].replacingOccurrences(of: "$(JOB_COMPLETION_INDEX)", with: String($0))
        }
        let merged = try scenario.run(["report"] + reports)
        #expect(merged.status == 0, "\(merged)")
    }

    /// The runtime stage of the Containerfile installs the Debian package of every shared
    /// library the release binary needs (`readelf -d`), but for those debian:bookworm-slim
    /// already has, and the CA certificates.
    @Test func theContainerfileInstallsEveryLibraryTheReleaseBinaryLinks() throws {
        let binary = try InstallTests.releaseBinary()
        let containerfile = try String(contentsOfFile: InstallTests.packageRoot + "/Containerfile", encoding: .utf8)
        let runtimeStage = try #require(containerfile.components(separatedBy: "\nFROM ").last)
        let installed = Self.aptInstalls(runtimeStage)
        #expect(installed.contains("ca-certificates"), "\(installed)")
        // In debian:bookworm-slim: libc6 and libgcc-s1 are essential, libstdc++6 comes with apt.
        let inBase: Set<String> = ["libc6", "libgcc-s1", "libstdc++6"]

        let readelf = try ExternalCommand.executable("readelf", package: "binutils")
        let dynamic = try ExternalCommand.run(readelf, ["--dynamic", binary], in: "/")
        try #require(dynamic.status == 0, "\(dynamic)")
        let needed = dynamic.stdout.split(separator: "\n").compactMap { line -> String? in
            guard line.contains("(NEEDED)"), let open = line.firstIndex(of: "["), let close = line.lastIndex(of: "]") else { return nil }
            return String(line[line.index(after: open)..<close])
        }
        #expect(!needed.contains { $0.hasPrefix("libswift") }, "the Swift runtime is linked in statically: \(needed)")
        let dpkg = try ExternalCommand.executable("dpkg", package: "dpkg")
        for library in needed {
            let owners = try ExternalCommand.run(dpkg, ["--search", "*/" + library], in: "/")
            let packages = Set(owners.stdout.split(separator: "\n").compactMap { line in
                line.split(separator: ":").first.map { String($0).trimmingCharacters(in: .whitespaces) }
            })
            #expect(!packages.isEmpty, "no package has \(library): \(owners)")
            #expect(!packages.isDisjoint(with: installed.union(inBase)),
                    "\(library) (in \(packages.sorted())) is not installed by the Containerfile's runtime stage: \(installed.sorted())")
        }
    }

    /// The packages of the `apt-get install` commands in `stage`.
    static func aptInstalls(_ stage: String) -> Set<String> {
        let joined = stage.replacingOccurrences(of: "\\\n", with: " ")
        var packages: Set<String> = []
        for line in joined.split(separator: "\n") {
            for command in line.components(separatedBy: "&&") {
                let words = command.split(whereSeparator: \.isWhitespace).map(String.init)
                guard let install = words.firstIndex(of: "install"), words[..<install].contains("apt-get") else { continue }
                packages.formUnion(words[(install + 1)...].filter { !$0.hasPrefix("-") })
            }
        }
        return packages
    }
}
