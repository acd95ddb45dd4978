// Placeholder: the benchmark harness lands in a later commit.
