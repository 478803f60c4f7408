"""Input pipelines: synthetic in-memory batches (the default) or real files read, decoded and
augmented by a DataLoader (`--data folder:PATH`, `--data text:PATH`), the loader measured alone
(`dlbench data`), and a generator of small data sets for tests and demos (`dlbench make-data`)."""
