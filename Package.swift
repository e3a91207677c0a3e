// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "mirror",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "mirror", targets: ["mirror"]),
        .library(name: "MirrorCore", targets: ["MirrorCore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        // libcurl (headers from libcurl4-openssl-dev), loaded when first needed: a table of
        // its functions, typed wrappers for the variadic curl_easy_setopt/getinfo, and the
        // TLS handshake watch over the libssl it brings.
        .target(
            name: "CCurl",
            linkerSettings: [.linkedLibrary("dl")]
        ),
        .systemLibrary(
            name: "CYAML",
            pkgConfig: "yaml-0.1",
            providers: [.apt(["libyaml-dev"])]
        ),
        // OpenSSL's libcrypto (headers from libssl-dev), for SHA-256 and SHA-512, loaded when
        // first needed: a table of the few functions used (libssl comes with libcurl).
        .target(
            name: "CCrypto",
            linkerSettings: [.linkedLibrary("dl")]
        ),
        // SQLite, for the state store.
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // Linux calls glibc declares only under _GNU_SOURCE (sync_file_range).
        .systemLibrary(name: "CLinux"),
        // mimalloc, the command's allocator (linked before libc, it serves every malloc of the
        // process: Swift's, libcurl's, SQLite's). glibc's took 9.6 % more instructions on the
        // engine's thread of a no-op sync, most of them in libcurl's allocations per request.
        .systemLibrary(name: "CMimalloc", providers: [.apt(["libmimalloc-dev"])]),
        // The release build leaves out the dynamic checks of exclusive access (as the standard
        // library is built): about 3,000 instructions an entry on the engine's thread. The
        // debug build the tests run keeps every one of them.
        .target(
            name: "MirrorCore",
            dependencies: ["CCurl", "CYAML", "CCrypto", "CSQLite", "CLinux"],
            swiftSettings: [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]
        ),
        .executableTarget(
            name: "mirror",
            dependencies: [
                "MirrorCore",
                "CLinux",
                "CMimalloc",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Unit tests, integration tests against nginx and the fault server on
        // loopback, and CLI tests that run the built `mirror` binary.
        .testTarget(
            name: "MirrorCoreTests",
            dependencies: ["MirrorCore", "mirror", "CSQLite"]
        ),
    ]
)
