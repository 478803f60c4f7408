"""The engine: how a workload is run and timed (devices, precision, the measured loop)."""
