"""Bad input to `dlbench peak`: devices it cannot measure, records it cannot keep: one `error:`
line and exit 2 (1 for a sweep with failed points), no traceback, and the CSV it names keeps
every earlier byte."""

from __future__ import annotations

import pytest

from tests.conftest import refused


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--accelerator", "gpu"], "--accelerator"),  # no GPU on this machine
        (["--accelerator", "cpu", "--devices", "0,x"], "--devices"),
        (["--accelerator", "cpu", "--cache-dir", "/proc/no/such"], "--cache-dir"),
    ],
)
def test_peak_refuses_what_it_cannot_measure_or_keep(dlbench, kept, args, needle):
    refused(dlbench("peak", *args, "--output", kept), needle)
