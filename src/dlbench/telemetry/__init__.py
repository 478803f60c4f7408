"""Telemetry: what the hardware did during the measured window (power, energy, clocks, heat)."""
