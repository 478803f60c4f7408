"""The reference command (benchmarks/reference.sh) in a dry run on the CPU: every dlbench command
it would run on a GPU parses with dlbench's own options and validates into a config (nothing is
measured), so a renamed flag or a plan that no longer loads fails here, not on a lent GPU."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from dlbench.cli import app

ROOT = Path(__file__).resolve().parents[1]
PARTS = (
    "peak",
    "default",
    "decode",
    "jpeg",
    "validate",
    "fp8",
    "serve",
    "serve-llm",
    "multi",
    "docs",
)


def _dry_run(*parts: str, jpeg: Path = Path("/nonexistent/jpeg")) -> list[str]:
    out = subprocess.run(
        ["bash", "benchmarks/reference.sh", *parts],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
        env={**os.environ, "DRY_RUN": "1", "REFERENCE_DIR": "/nonexistent/reference",
             "JPEG_DIR": str(jpeg)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout == ""
    return [line.removeprefix("+ ") for line in out.stderr.splitlines()]


@pytest.fixture
def executed(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, object]]:
    """What each command would have run, instead of running it."""
    import dlbench.data.loader_rows
    import dlbench.data.make
    import dlbench.engine.validate
    import dlbench.run

    calls: list[tuple[str, object]] = []

    def record(name: str, value: int = 0):
        return lambda first, *args, **kwargs: calls.append((name, first)) or value

    monkeypatch.setattr(dlbench.run, "execute", record("execute"))
    monkeypatch.setattr(dlbench.engine.validate, "execute_validate", record("validate"))
    monkeypatch.setattr(dlbench.data.loader_rows, "run_loader_sweep", record("data"))
    import dlbench.peak.run

    monkeypatch.setattr(dlbench.peak.run, "run_peak", record("peak", []))
    import dlbench.serve.run
    import dlbench.serve.summary

    monkeypatch.setattr(dlbench.serve.run, "execute_serve", record("serve", []))
    monkeypatch.setattr(dlbench.serve.summary, "show_serve", lambda row, output=None: None)
    import dlbench.sweep.outcome
    import dlbench.sweep.runner

    def plan_only(runner, console=None):  # the scaling plan, not its points
        calls.append(("scaling", runner.plan.runs[0]["models"][0]))
        return dlbench.sweep.outcome.SweepOutcome()

    monkeypatch.setattr(dlbench.sweep.runner.SweepRunner, "run", plan_only)
    import dlbench.analysis.scaling

    monkeypatch.setattr(dlbench.analysis.scaling, "record_scaling", lambda *a: pd.DataFrame())

    def make_images(folder: Path, spec: object) -> int:  # the folder, not 12,000 files
        folder.mkdir(parents=True)
        calls.append(("make-data", spec))
        return 0

    monkeypatch.setattr(dlbench.data.make, "make_images", make_images)
    return calls


def _model(called: object) -> object:
    """The model a recorded call ran: a RunConfig's or a serve run's, else what the call got."""
    workload = getattr(called, "workload", None)
    return getattr(workload, "model", getattr(called, "model", called))


def test_every_command_of_the_reference_parses_and_validates(executed, tmp_path: Path) -> None:
    lines = _dry_run(*PARTS, jpeg=tmp_path / "jpeg")
    commands = [shlex.split(line)[1:] for line in lines if line.startswith("dlbench ")]
    assert [c[0] for c in commands] == [
        "peak", "sweep", "infer", "make-data", "train", "train", "train", "data", "validate",
        "validate", "sweep", "validate", "sweep", "sweep", "sweep", "serve", "peak", "scaling",
        "scaling", "scaling", "validate", "validate", "validate", "validate", "validate",
        "train", "train", "train", "train", "train", "train", "train",
    ]  # fmt: skip
    pairs = [c for c in commands if c[0] == "validate" and "--devices" in c
             and c[c.index("--devices") + 1] == "2"]  # fmt: skip
    assert [c[c.index("--model") + 1] for c in pairs] == ["resnet50", "llm_1b"]  # DDP, FSDP
    scaling = [c for c in commands if c[0] == "scaling" and c[c.index("--model") + 1] != "llm_1b"]
    assert all(c[c.index("--n-iters") + 1] == "100" for c in scaling)  # the bare loop's steps
    launched = [shlex.split(line)[1:] for line in lines if line.startswith("torchrun ")]
    bare = [words for words in launched if "benchmarks/bare_ddp.py" in words]
    assert [words[words.index("--nproc-per-node") + 1] for words in bare] == ["1", "2", "4"]
    nodes = [words for words in launched if "-m" in words]
    assert len(nodes) == 2 and nodes[0] == nodes[1]  # two launchers, one job
    commands.append(nodes[0][nodes[0].index("-m") + 2 :])  # its dlbench command parses too
    assert lines[-2:] == [
        "python3 benchmarks/readme_table.py --write",
        "bash benchmarks/example_report.sh",
    ]
    runner = CliRunner()
    for words in commands:
        if words[0] == "sweep":
            words = [*words, "--dry-run"]  # the plan loads and its points validate
        result = runner.invoke(app, words)
        assert result.exit_code == 0, (words, result.output)
    assert executed[0] == ("peak", "auto")  # every GPU, before the plan that divides by it
    models = [_model(first) for name, first in executed[1:] if name != "make-data"]
    assert models == ["llm_8b", "resnet50", "resnet50", "resnet50",
                      f"folder:{tmp_path}/jpeg/images", "resnet50", "vit", "llm_1b", "llm_8b",
                      "auto", "resnet50", "vit", "llm_1b", "resnet50", "vit", "resnet50",
                      "llm_1b", "llm_1b", *["llm_8b"] * 7, "resnet50"]  # fmt: skip
    fp8 = [
        first
        for name, first in executed
        if name in ("execute", "validate")
        and getattr(first, "acceleration", None)
        and first.acceleration.precision == "fp8"
    ]
    assert [c.workload.model for c in fp8] == ["llm_1b", "llm_8b", "llm_8b", "llm_8b"]
    assert [c.acceleration.fp8_recipe for c in fp8][-1] == "tensorwise_with_head"
    decodes = [first.data.decode for name, first in executed if name == "execute"]
    assert decodes[2:4] == ["gpu", "cpu"]  # the JPEG part; the last is the two-node run


def test_the_default_parts_are_the_gpu_ones_and_a_wrong_part_exits_2() -> None:
    lines = _dry_run()
    assert not any("readme_table" in line for line in lines)
    assert lines[0].startswith("dlbench peak") and lines[1].startswith("dlbench sweep default")
    for env in ({"DRY_RUN": "1"}, {}):  # a real run checks its parts before it touches a GPU
        environ = {k: v for k, v in os.environ.items() if k != "DRY_RUN"}
        out = subprocess.run(["bash", "benchmarks/reference.sh", "peak", "nonsense"],
                             capture_output=True, text=True, cwd=ROOT,
                             env={**environ, **env})  # fmt: skip
        assert out.returncode == 2 and out.stderr.startswith("usage:"), out.stderr


@pytest.mark.e2e
def test_the_example_report_builds_from_the_reference_rows(tmp_path: Path) -> None:
    out = subprocess.run(
        ["bash", "benchmarks/example_report.sh"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
        env={**os.environ, "REPORT_DIR": str(tmp_path / "report"), "SCREENSHOT": "0",
             "PYTHON": sys.executable, "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    text = (tmp_path / "report" / "report.md").read_text()
    assert "How these machines compare" in text
    assert (tmp_path / "report" / "report.pdf").stat().st_size > 0


@pytest.mark.e2e
def test_the_bare_ddp_yardstick_runs_under_torchrun_and_writes_a_row_per_model(tmp_path: Path):
    """benchmarks/bare_ddp.py on two CPU ranks (gloo): the loop the reference holds dlbench's
    DDP rows to, one row per model, the global rate over the slowest rank's window."""
    csv = tmp_path / "bare.csv"
    out = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         "benchmarks/bare_ddp.py", "--model", "test_resnet,test_vit", "--batch-size", "2",
         "--steps", "2", "--warmup", "1", "--output", str(csv)],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    rows = pd.read_csv(csv)
    assert list(rows["model"]) == ["test_resnet", "test_vit"]
    assert list(rows["world_size"]) == [2, 2] and list(rows["num_nodes"]) == [1, 1]
    for r in rows.to_dict("records"):
        assert r["images_per_s"] == pytest.approx(2 * 2 * 2 / r["window_s"])
