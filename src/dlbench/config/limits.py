"""Ranges and measurement constants a run is checked and timed against: each stated once."""

MAX_COUNT = 2**31 - 1  # sizes and counts: beyond a C int they overflow below with a traceback
MAX_STEPS = 10**6  # measured or warm-up steps: the step timer holds one slot per step
MAX_WORKERS = 256  # loader processes: more is a fork bomb, not a setting
MAX_PROCESSES = 100  # fresh processes a point is measured in: more is a typo
MAX_REPEATS = 1000  # repeats of a validation or a sweep point: more is a typo, not a plan
GATE_ROUNDS = 5  # dlbench gate: runs a side (docs/decisions.md#change-verdict)
MAX_PRICE = 1e6  # dollars an hour for a machine: more is a typo
# With GPU telemetry on, the window lasts at least this long: NVML's energy counter moves in
# steps, timed by the sampler, and a shorter window reads the energy less surely
# (docs/decisions.md#energy-window).
DEFAULT_MIN_TIME_S = 1.25
# ... and the warm-up keeps the GPU busy this long first where the energy comes from sampled
# power: NVML's power reading is a trailing average, so a window opening on an idle GPU
# integrates too little (docs/decisions.md#power-warmup) ...
POWER_AVERAGING_S = 1.0
# ... or this long where it comes from the energy counter, which reports a step late: more than
# a step (a tenth of a second on an H100), so the step the window starts from counted a busy GPU.
COUNTER_LEAD_S = 0.25
# A step-time spread needs this many measured steps (a standard deviation of fewer is uncertain
# by over a quarter); --n-iters' default too. On a GPU DEFAULT_MIN_TIME_S usually decides.
MIN_SPREAD_STEPS = 10
# A CPU row whose window other processes took more than this share (%) of the machine's CPU
# time from measured a shared machine: the next run's figure need not agree (the verdict's
# host_busy; --max-host-busy replaces it; docs/decisions.md#cpu-rows).
HOST_OTHER_CPU_PCT = 10.0
# Fixed warm-up before the check for settled steps: the first step builds (cuDNN's plans, the
# allocator's pools), the second makes the optimizer's state; on a GPU the warm-up then goes on
# until steps settle (engine.timing.warmup.STEADY_PCT): more only costs
# (docs/decisions.md#warmup-default).
DEFAULT_WARMUP_STEPS = 3
# A clock this close under its base is no low clock: on Hopper the base NVML reports is the
# highest clock, and the power cap's brief steps fall between the samples that would name them
# (docs/decisions.md#clock-margin).
CLOCK_MARGIN_PCT = 2.0
# A rank that waits longer than this in a collective ends the run (--collective-timeout):
# longer than any step or compilation a rank may run alone, far shorter than PyTorch's default.
DEFAULT_COLLECTIVE_TIMEOUT_S = 300.0
DEFAULT_POINT_TIMEOUT_S = 900.0  # seconds a sweep's point may run unless its plan says
# A sweep's worker (a fresh one after a point timed out or died) has this long for its imports
# before the point it was handed counts a second: a point's timeout is its own seconds, never
# a loaded host's import of torch.
WORKER_START_TIMEOUT_S = 300.0
