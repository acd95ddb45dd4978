import CairnMigrationTesting

/// The tree comparer the tests use is the one `CairnMigrationTesting` ships to apps, so the rule
/// "two trees are equal" is written once.
public typealias TreeSnapshot = CairnMigrationTesting.TreeSnapshot
