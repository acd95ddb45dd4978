import Cairn
import Foundation
import Glibc

/// Moves a container's directories aside before an import and puts them back if it fails.
///
/// For each protected directory `<parent>/<name>` (``MigrationDataContainer/protectedDirectories``):
/// an existing one is renamed to `<parent>/.<name>.cairn-aside-<import id>` (same directory, so
/// same file system: one `rename(2)`, nothing copied); a missing one gets the marker file
/// `.<name>.cairn-absent-<import id>`. The importer then finds the container root empty (with
/// its mode) and nothing else: the documents, application support and group directories do not
/// exist, their parents do, so it can move a whole directory into place. On failure
/// what the importer wrote is renamed to `.<name>.cairn-discard-<id>` and removed (it is import
/// output, never user data), and the aside directory is renamed back. On success the aside
/// directories are removed, after the success status was written durably. User data is never
/// deleted as a recovery step.
///
/// A killed import leaves the aside names behind; ``recoverInterrupted(_:)`` (run at the start
/// of every import session) finishes what was decided: removes them when the container's status
/// says this import succeeded, else restores them.
struct ContainerGuard {
    struct Slot {
        var path: String
        var parent: String
        var name: String
        var existed: Bool
    }

    let importID: String
    private(set) var slots: [Slot] = []

    static func asidePath(_ slot: Slot, _ id: String) -> String { slot.parent + "/.\(slot.name).cairn-aside-" + id }
    static func absentPath(_ slot: Slot, _ id: String) -> String { slot.parent + "/.\(slot.name).cairn-absent-" + id }
    static func discardPath(_ slot: Slot, _ id: String) -> String { slot.parent + "/.\(slot.name).cairn-discard-" + id }

    static func slots(of container: MigrationDataContainer) -> [Slot] {
        container.protectedDirectories.map { url in
            let path = url.path(percentEncoded: false).trimmingSlashes
            let parent = (path as NSString).deletingLastPathComponent
            var info = stat()
            let existed = lstat(path, &info) == 0
            return Slot(path: path, parent: parent, name: (path as NSString).lastPathComponent, existed: existed)
        }
    }

    /// Moves every protected directory aside; creates the container root again, empty, and the
    /// parents of the documents and application support directories, but not those directories.
    ///
    /// - Throws: `.invalidArgument` when a protected path is not a directory; `.io` (naming the
    ///   path) when a rename fails, after putting back what was moved.
    static func moveAside(_ container: MigrationDataContainer, importID: String) throws(CairnError) -> ContainerGuard {
        var guarded = ContainerGuard(importID: importID)
        let root = container.containerRootDirectory.standardizedFileURL.path(percentEncoded: false).trimmingSlashes
        do {
            for var slot in slots(of: container) {
                if mkdir(slot.parent, 0o700) != 0, errno != EEXIST {
                    try FileManager.default.createDirectory(atPath: slot.parent, withIntermediateDirectories: true)
                }
                var info = stat()
                if lstat(slot.path, &info) == 0 {
                    guard info.st_mode & S_IFMT == S_IFDIR else {
                        throw CairnError(.invalidArgument, "a container directory is not a directory", path: slot.path)
                    }
                    slot.existed = true
                    let aside = asidePath(slot, importID)
                    guard rename(slot.path, aside) == 0 else { throw DurableFile.failure("cannot move aside", slot.path) }
                    guarded.slots.append(slot)
                    guard slot.path != root || mkdir(slot.path, info.st_mode & 0o7777) == 0 else {
                        throw DurableFile.failure("cannot create the empty directory", slot.path)
                    }
                } else {
                    slot.existed = false
                    let marker = absentPath(slot, importID)
                    let fd = open(marker, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
                    guard fd >= 0 else { throw DurableFile.failure("cannot create the marker", marker) }
                    close(fd)
                    guarded.slots.append(slot)
                    guard slot.path != root || mkdir(slot.path, 0o700) == 0 else { throw DurableFile.failure("cannot create", slot.path) }
                }
                try DurableFile.syncDirectory(slot.parent)
            }
            for url in [container.containerRootDirectory, container.documentsDirectory.deletingLastPathComponent(),
                container.applicationSupportDirectory.deletingLastPathComponent()] {
                try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
            }
        } catch {
            let failure = (error as? CairnError) ?? CairnError(
                .io, "cannot prepare the container", path: container.containerRootDirectory.path, cause: "\(error)",
                underlyingCause: Errno(foundationError: error).map { .errno($0) })
            try guarded.restore()
            throw failure
        }
        return guarded
    }

    /// Puts every moved-aside directory back; what the importer wrote is removed.
    ///
    /// - Throws: `.io` naming the first directory that could not be put back (the others are
    ///   still restored; its data stays at the aside name).
    func restore() throws(CairnError) {
        var first: CairnError?
        for slot in slots.reversed() {
            var info = stat()
            let discard = Self.discardPath(slot, importID)
            if lstat(slot.path, &info) == 0 {
                if rename(slot.path, discard) != 0 {
                    first = first ?? DurableFile.failure("cannot move the imported data away", slot.path)
                    continue
                }
            }
            if slot.existed {
                if rename(Self.asidePath(slot, importID), slot.path) != 0 {
                    first = first ?? DurableFile.failure("cannot put the container directory back", slot.path)
                    continue
                }
            } else {
                unlink(Self.absentPath(slot, importID))
            }
            try? DurableFile.syncDirectory(slot.parent)
            try? FileManager.default.removeItem(atPath: discard)
        }
        if let first { throw first }
    }

    /// Removes the moved-aside directories after a recorded success.
    func commit() {
        for slot in slots {
            if slot.existed {
                try? FileManager.default.removeItem(atPath: Self.asidePath(slot, importID))
            } else {
                unlink(Self.absentPath(slot, importID))
            }
        }
    }

    /// Finishes an import a killed process left behind (see the type's discussion).
    ///
    /// - Throws: `.io` when a directory cannot be put back.
    static func recoverInterrupted(_ container: MigrationDataContainer) throws(CairnError) {
        let status = try? StoredImportStatus.read(in: container)
        for slot in slots(of: container) {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: slot.parent)) ?? []
            for name in names {
                for (prefix, existed) in [(".\(slot.name).cairn-aside-", true), (".\(slot.name).cairn-absent-", false)]
                where name.hasPrefix(prefix) {
                    let id = String(name.dropFirst(prefix.count))
                    var recovered = ContainerGuard(importID: id)
                    var moved = slot
                    moved.existed = existed
                    recovered.slots = [moved]
                    if let status, status.importID == id, status.outcome == "success" {
                        recovered.commit()
                    } else {
                        try recovered.restore()
                    }
                }
                if name.hasPrefix(".\(slot.name).cairn-discard-") {
                    try? FileManager.default.removeItem(atPath: slot.parent + "/" + name)
                }
            }
        }
    }
}
