extension FileStatus.Kind: CustomStringConvertible {
    /// The kind in words, as messages print it ("block device", "FIFO"), never the Swift case
    /// name (`blockDevice`).
    package var description: String {
        switch self {
        case .regular: "regular file"
        case .directory: "directory"
        case .symlink: "symlink"
        case .fifo: "FIFO"
        case .socket: "socket"
        case .characterDevice: "character device"
        case .blockDevice: "block device"
        case .unknown: "unknown file type"
        }
    }
}
