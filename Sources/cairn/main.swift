// Placeholder; the CLI lands in a later commit.
