internal import CLinux

/// The allocator's policy for large buffers.
package enum LargeBuffers {
    /// Gives buffers of `bytes` or more a mapping of their own (glibc's `mallopt(M_MMAP_THRESHOLD)`),
    /// so that they go back to the system when freed. glibc's default threshold rises to the size
    /// of each large block freed, after which such blocks come from the heap and stay resident
    /// (an upload's parts: about 50 MiB more peak RSS on a 314 MiB archive).
    package static func returnToSystem(atLeast bytes: Int) {
        _ = cairn_set_mmap_threshold(Int32(clamping: bytes))
    }

    /// Gives the heap's free memory back to the system (glibc's `malloc_trim(0)`: the top of
    /// the heap and whole free pages inside every arena), at a point where a phase that built
    /// and dropped large tables ends (issue 9: the archiver before it encodes the manifest, the
    /// extractor once the manifest is decoded), so the resident pages of what was freed do not
    /// add to the next phase's peak RSS.
    ///
    /// - Complexity: O(heap size); a few milliseconds.
    package static func returnFreeMemory() {
        _ = cairn_malloc_trim()
    }
}
