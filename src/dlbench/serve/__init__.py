"""`dlbench serve`: a model served under load (MLPerf's single-stream, server and offline
scenarios) through a dynamic batcher; latencies from each query's scheduled arrival."""
