import Cairn

extension CairnError {
    /// This error with `path` set to the archive when it names nothing yet.
    func naming(_ archive: String) -> CairnError {
        var copy = self
        if copy.path == nil { copy.path = archive }
        return copy
    }
}
