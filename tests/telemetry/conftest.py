"""The telemetry tests' fake GPUs: a fake NVML state file for this test, in its environment."""

from __future__ import annotations

import pytest

from tests import fake_nvml


@pytest.fixture
def fake_gpus(tmp_path, monkeypatch):
    def make(*gpus: dict) -> str:
        path = tmp_path / "nvml.json"
        fake_nvml.write_state(path, list(gpus) or [{}])
        for key, value in fake_nvml.environment(path).items():
            monkeypatch.setenv(key, value)
        return str(path)

    return make
