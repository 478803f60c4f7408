"""The engine: how a workload is run and timed, in rooms by job (timing, acceleration,
distribution, scenarios), with the runners that make a whole measurement on top."""
