"""Sweeps: a grid of runs in a worker process (or a process each), scaling over device counts,
and power-limit control with restore."""
