"""dlbench: true, comparable, cheap deep-learning benchmarks on GPUs."""

__version__ = "0.1.0"
