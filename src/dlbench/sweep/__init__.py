"""Sweeps: a grid of isolated runs, auto batch size, and power-limit control with restore."""
