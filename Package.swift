// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Cairn",
    products: [
        .library(name: "Cairn", targets: ["Cairn"]),
        .library(name: "CairnMigration", targets: ["CairnMigration"]),
        .library(name: "CairnMigrationTesting", targets: ["CairnMigrationTesting"]),
        .executable(name: "cairn", targets: ["cairn"]),
    ],
    targets: [
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CLZ4", pkgConfig: "liblz4", providers: [.apt(["liblz4-dev"])]),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CZstd", pkgConfig: "libzstd", providers: [.apt(["libzstd-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(name: "CLinux", path: "Sources/CLinux"),
        .systemLibrary(name: "CFuzzer", path: "Sources/CFuzzer"),
        .target(
            name: "Cairn",
            dependencies: ["CZlib", "CLZ4", "CCrypto", "CZstd", "CCurl", "CLinux", "CSQLite", "CSodium"]
        ),
        .target(name: "CairnCorpus", dependencies: ["Cairn"]),
        .target(name: "CairnMigration", dependencies: ["Cairn"]),
        .target(name: "CairnMigrationTesting", dependencies: ["CairnMigration", "Cairn"]),
        .executableTarget(name: "cairn-migration-sample", dependencies: ["CairnMigration", "Cairn"], path: "Sources/CairnMigrationSample"),
        .executableTarget(name: "cairn", dependencies: ["Cairn", "CairnCorpus"]),
        .executableTarget(
            name: "cairn-bench",
            dependencies: ["Cairn", "CairnCorpus", "CairnTestSupport", "CZlib", "CLZ4", "CCrypto", "CZstd", "CSQLite"],
            path: "Benchmarks/CairnBench"
        ),
        .executableTarget(
            name: "cairn-fuzz",
            dependencies: ["Cairn", "CFuzzer"],
            path: "Tests/Fuzz/CairnFuzz"
        ),
        .target(
            name: "CairnTestSupport",
            dependencies: ["Cairn", "CairnCorpus", "CairnMigrationTesting"],
            path: "Tests/CairnTestSupport",
            resources: [.copy("fault-proxy.py")]
        ),
        .testTarget(
            name: "CairnBenchTests",
            dependencies: ["cairn-bench", "CairnTestSupport", "cairn"],
            path: "Benchmarks/CairnBenchTests"
        ),
        .testTarget(
            name: "CairnTests",
            dependencies: ["Cairn", "CairnTestSupport", "cairn", "cairn-fuzz"],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(
            name: "CairnMigrationTests",
            dependencies: ["CairnMigration", "CairnMigrationTesting", "CairnTestSupport", "cairn-migration-sample", "CSQLite"],
            resources: [.copy("Fixtures")]
        ),
    ]
)
