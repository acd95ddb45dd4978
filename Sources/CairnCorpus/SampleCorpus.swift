// Placeholder: the seeded sample-data generator lands in a later commit.
public enum SampleCorpus {}
