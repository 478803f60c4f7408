"""Caches that outlive the process: a second run of a compiled step is served from the cache
(compile_cache=hit), a run with another key (GPU, driver, torch, dlbench) or --no-cache is not,
and a cache folder that cannot be made is one error line."""

from __future__ import annotations

import json
import os

import pytest

from dlbench.caches import cache_key, use_caches
from tests.conftest import cli_env, read_rows, refused, run_cli

COMPILED = ["infer", "--accelerator", "cpu", "--model", "steady", "--batch-size", "4",
            "--n-iters", "5", "--warmup-steps", "1", "--compile"]  # fmt: skip
ENVIRONMENT = {
    "gpu_name": "NVIDIA H100 80GB HBM3",
    "driver": "580.159.04",
    "torch": "2.11.0+cu130",
    "dlbench": "0.2.0",
    "dlbench_commit": "01c63f2" + "0" * 33,
}


@pytest.mark.e2e
def test_a_second_run_is_served_from_the_cache_and_no_cache_is_cold(tmp_path):
    csv, cache = tmp_path / "rows.csv", tmp_path / "cache"
    for flags in (["--cache-dir", str(cache)], ["--cache-dir", str(cache)], ["--no-cache"]):
        out = run_cli(*COMPILED, *flags, "--output", csv)
        assert out.returncode == 0, out.stderr
    cold, warm, uncached = read_rows(csv)
    assert (cold["compile_cache"], warm["compile_cache"], uncached["compile_cache"]) == (
        "miss", "hit", "miss"
    )  # fmt: skip
    [folder] = cache.iterdir()
    assert cold["cache_dir"] == warm["cache_dir"] == str(folder) and uncached["cache_dir"] == ""
    assert folder.name.startswith("cpu-torch") and (folder / "inductor").is_dir()


@pytest.mark.parametrize(
    ("column", "other"),
    [
        ("gpu_name", "NVIDIA H200"),
        ("driver", "590.1"),
        ("torch", "2.12.0"),
        ("dlbench", "0.3.0"),
        ("dlbench_commit", "a738ff6" + "0" * 33),
    ],
)
def test_a_cache_from_another_gpu_driver_torch_or_dlbench_is_never_read(column, other):
    assert cache_key({**ENVIRONMENT, column: other}) != cache_key(ENVIRONMENT)


def test_the_key_names_what_made_the_cache():
    assert cache_key(ENVIRONMENT) == (
        "nvidia-h100-80gb-hbm3-580.159.04-torch2.11.0-cu130-dlbench0.2.0-01c63f2"
    )
    assert cache_key({**ENVIRONMENT, "gpu_name": "", "driver": ""}).startswith("cpu-torch")


def test_the_caches_are_where_torch_and_triton_look(tmp_path, monkeypatch):
    for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TRITON_CACHE_AUTOTUNING"):
        monkeypatch.delenv(name, raising=False)
    folder = use_caches(tmp_path, ENVIRONMENT)
    assert folder == tmp_path / cache_key(ENVIRONMENT) and folder.is_dir()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(folder / "inductor")
    assert os.environ["TRITON_CACHE_DIR"] == str(folder / "triton")
    assert os.environ["TRITON_CACHE_AUTOTUNING"] == "1"  # the decode kernels' tuned shapes too
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    assert cache_dir() == str(folder / "inductor")


def test_a_cache_folder_that_cannot_be_made_is_one_error_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    out = run_cli(*COMPILED, "--cache-dir", str(blocker), "--output", tmp_path / "rows.csv")
    assert out.returncode == 2
    [line] = out.stderr.strip().splitlines()[-1:]
    assert line.startswith("error: --cache-dir: cannot use") and "Traceback" not in out.stderr
    assert not (tmp_path / "rows.csv").exists()


@pytest.mark.e2e
def test_a_default_cache_folder_that_cannot_be_made_costs_a_warning_and_a_cold_run(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")  # as a container user whose home is not writable
    env = {**cli_env(), "XDG_CACHE_HOME": str(blocker)}
    env.pop("DLBENCH_CACHE_DIR", None)
    out = run_cli(*COMPILED, "--output", tmp_path / "rows.csv", env=env)
    assert out.returncode == 0, out.stderr
    assert f"warning: the default cache folder {blocker / 'dlbench'} cannot" in out.stderr
    [row] = read_rows(tmp_path / "rows.csv")
    assert (row["compile_cache"], row["cache_dir"]) == ("miss", "")


@pytest.mark.parametrize(
    ("named", "why"),
    [
        ("a-file", "a file, not a folder"),  # issue 63: the run went cold without a word
        ("a-file/cache", "Not a directory"),
        ("cache\nwith a break", "control character"),
        ("cache\twith a tab", "control character"),
    ],
)
def test_a_cache_variable_that_cannot_be_used_is_one_warning_naming_it_then_a_cold_run(
    tmp_path, monkeypatch, capsys, named, why
):
    from dlbench.config import RunConfig
    from dlbench.engine.acceleration.compile_cache import open_caches

    (tmp_path / "a-file").write_text("not a folder")
    path = tmp_path / named
    monkeypatch.setenv("DLBENCH_CACHE_DIR", str(path))
    assert open_caches(RunConfig.of(accelerator="cpu"), {"gpu_name": "x"}) is None  # cold
    [line] = capsys.readouterr().err.strip().splitlines()
    shown = str(path).encode("unicode_escape").decode()
    assert line.startswith(f"warning: DLBENCH_CACHE_DIR={shown} cannot hold the caches")
    assert why in line and "cold" in line
    assert not (tmp_path / "cache\nwith a break").exists()


@pytest.mark.e2e
def test_a_sweep_says_once_before_its_points_that_the_cache_variable_cannot_be_used(
    dlbench, tmp_path, monkeypatch
):
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("DLBENCH_CACHE_DIR", str(tmp_path / "a-file"))
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "name: one\nfixed: {accelerator: cpu, n_iters: 2, warmup_steps: 0, width: 32, "
        "height: 32}\nruns:\n  - models: [timm:test_resnet]\n    batch_sizes: [2]\n"
    )
    code, _, err = dlbench("sweep", plan, "--output", tmp_path / "rows.csv", "--isolation",
                           "process", "--invalid-ok")  # fmt: skip  # 2 steps: few_steps
    assert code == 0, err
    assert err.count("DLBENCH_CACHE_DIR=") == 1 and "a file, not a folder" in err


def test_a_cache_dir_flag_with_a_control_character_is_refused(dlbench, kept, tmp_path):
    refused(dlbench(*COMPILED, "--cache-dir", tmp_path / "a\nb", "--output", kept),
            "--cache-dir", "control character")  # fmt: skip


def test_a_flop_count_is_kept_in_the_folder_and_served_without_counting(tmp_path, monkeypatch):
    from dlbench.workloads import flops, get_workload

    workload = get_workload("timm:test_resnet")
    shape = workload.shape(32, 32, None)
    counted = flops.recorded_flops_per_sample(workload, shape, "train", tmp_path)
    assert counted is not None and counted.per_sample > 0
    assert (tmp_path / flops.FLOPS_FILE).is_file()

    def no_count(*_):
        raise AssertionError("counted again")

    monkeypatch.setattr(flops, "flops_per_sample", no_count)
    assert flops.recorded_flops_per_sample(workload, shape, "train", tmp_path) == counted
    with pytest.raises(AssertionError):  # another mode is another count
        flops.recorded_flops_per_sample(workload, shape, "infer", tmp_path)
    monkeypatch.undo()
    [key] = json.loads((tmp_path / flops.FLOPS_FILE).read_text())
    (tmp_path / flops.FLOPS_FILE).write_text(json.dumps({key: {"per_sample": "many"}}))
    assert flops.recorded_flops_per_sample(workload, shape, "train", tmp_path) == counted
    assert json.loads((tmp_path / flops.FLOPS_FILE).read_text())[key]["per_sample"] > 0


def test_the_caches_fix_the_ptxas_before_any_kernel_compiles(tmp_path, monkeypatch):
    """Triton's cache keys name the ptxas, which inductor switches to torch's own the first
    time it compiles: opening the caches makes that choice at once, so a worker that compiled
    nothing yet keys its kernels as one that did."""
    from torch._inductor.runtime import compile_tasks

    chosen: list[bool] = []
    monkeypatch.setattr(compile_tasks, "_set_triton_ptxas_path", lambda: chosen.append(True))
    for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TRITON_CACHE_AUTOTUNING"):
        monkeypatch.delenv(name, raising=False)
    use_caches(tmp_path, ENVIRONMENT)
    assert chosen == [True]
    use_caches(tmp_path, {**ENVIRONMENT, "gpu_name": ""})  # a CPU: no Triton, no choice
    assert chosen == [True]
