"""Timing: the measured loop, its device clock, the profiled pass after the window and the step
breakdown."""
