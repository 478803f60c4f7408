"""dlbench: true, comparable, cheap deep-learning benchmarks on GPUs."""

__version__ = "0.2.0"
