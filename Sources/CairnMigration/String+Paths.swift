extension String {
    /// The path without trailing slashes (`/` stays `/`).
    package var trimmingSlashes: String {
        var path = self
        while path.count > 1, path.hasSuffix("/") { path.removeLast() }
        return path
    }
}
