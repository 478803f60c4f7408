"""The built image, run as a user would: podman in place of docker, a non-root user that owns
the mounted results folder, no network. docker/ci-build.sh builds the image and runs these
(`pytest -m image`); DLBENCH_IMAGE names the image."""

from __future__ import annotations

import csv
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import dlbench
from tests.conftest import ROOT

IMAGE = os.environ.get("DLBENCH_IMAGE", "dlbench:cuda12")
USER = (4242, 4242)  # not the image's own uid 1000: any --user must work
TINY = [
    "--accelerator",
    "cpu",
    "--model",
    "mobilenet_v3",
    "--batch-size",
    "2",
    "--width",
    "64",
    "--height",
    "64",
    "--n-iters",
    "2",
    "--warmup-steps",
    "1",
]

pytestmark = [
    pytest.mark.image,
    pytest.mark.skipif(shutil.which("podman") is None, reason="needs podman"),
]


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """The host folder mounted at /workdir/results, owned by the calling (non-root) user."""
    folder = tmp_path / "results"
    folder.mkdir()
    os.chown(folder, *USER)
    return folder


def podman_run(results: Path, *args: str, image: str = IMAGE) -> subprocess.CompletedProcess:
    """`docker run` as the README gives it, with podman, as USER, without network."""
    command = [
        "podman",
        "run",
        "--rm",
        "--pull=never",
        "--network",
        "none",
        "--user",
        f"{USER[0]}:{USER[1]}",
        "-v",
        f"{results}:/workdir/results",
        image,
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=900)


def _owned_by_user(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        assert (path.stat().st_uid, path.stat().st_gid) == USER, path


def test_train_and_inference_write_rows_owned_by_the_calling_user(results):
    for command in ("src.train", "src.inference"):
        out = podman_run(results, command, *TINY)
        assert out.returncode == 0, out.stderr[-2000:]
    rows = _rows(results / "benchmark.csv")
    assert [(r["mode"], r["status"], r["model"]) for r in rows] == [
        ("train", "ok", "mobilenet_v3"),
        ("infer", "ok", "mobilenet_v3"),
    ]
    assert all(float(r["images_per_s"]) > 0 for r in rows)
    _owned_by_user(results)
    # the image has no .git: its rows name the commit docker/ci-build.sh built it from
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True)
    assert {r["dlbench_commit"] for r in rows} == {head.stdout.strip()}
    assert {r["dlbench"] for r in rows} == {dlbench.__version__}


def test_a_two_point_sweep_and_a_report_run_in_the_image(results):
    plan = results / "two.yaml"
    plan.write_text(
        "name: two\nfixed: {accelerator: cpu, n_iters: 2, warmup_steps: 1}\n"
        "runs: [{models: [mobilenet_v3], modes: [train, infer], batch_sizes: [2],"
        " resolutions: [[64, 64]]}]\n"
    )
    os.chown(plan, *USER)
    # two steps a point measure nothing to trust (few_steps): a sweep of only such points says so
    # and exits 4, --invalid-ok 0; what is tried here is the image running a sweep and a report
    sweep = ["sweep", "results/two.yaml", "--output", "results/sweep.csv"]
    out = podman_run(results, *sweep)
    assert out.returncode == 4 and "every point measured (2) is INVALID" in out.stderr, out.stderr
    out = podman_run(results, *sweep[:-2], "--output", "results/sweep2.csv", "--invalid-ok")
    assert out.returncode == 0, out.stderr[-2000:]
    rows = _rows(results / "sweep.csv")
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert all("few_steps" in r["verdict_reasons"] for r in rows)
    out = podman_run(results, "report", "results/sweep.csv", "--out", "results/report")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "mobilenet_v3" in (results / "report" / "report.html").read_text()
    _owned_by_user(results)


def test_the_image_ships_the_published_rows_the_launch_shapes_and_loadgen(results):
    """What a run reads beside its code travels in the package: the published rows every row is
    held against, the GEMV's launch-shape tables; and dlbench serve runs under MLPerf's LoadGen,
    its logs beside the CSV, with no network."""
    check = (
        "from dlbench.results.published import PACKAGED_DIR, published_files;"
        "from dlbench.workloads.launch_shapes import PACKAGED;"
        "print(len(published_files(PACKAGED_DIR)), len(list(PACKAGED.glob('*.json'))))"
    )
    out = subprocess.run(
        ["podman", "run", "--rm", "--pull=never", "--network", "none", "--entrypoint",
         "python3", IMAGE, "-c", check], capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    files, tables = map(int, out.stdout.split())
    assert files >= 20 and tables >= 2, out.stderr
    serve = ["serve", "--accelerator", "cpu", "--model", "mobilenet_v3", "--width", "64",
             "--height", "64", "--precision", "32", "--no-compile", "--max-batch", "2",
             "--scenario", "single-stream", "--min-duration", "0.3", "--queries", "16"]  # fmt: skip
    out = podman_run(results, *serve)
    assert out.returncode == 0, out.stderr[-2000:]
    [row] = _rows(results / "benchmark.csv")
    assert row["serve_loadgen"].startswith("mlcommons-loadgen ")
    assert (results / row["serve_loadgen_log"]).is_file()
    _owned_by_user(results)


def test_the_image_holds_no_output_and_no_root_owned_files_where_runs_write():
    out = subprocess.run(
        ["podman", "run", "--rm", "--pull=never", "--network", "none", "--entrypoint", "find",
         IMAGE, "/workdir", "-mindepth", "1", "-not", "-path", "/workdir/results"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0 and out.stdout == "", out.stdout + out.stderr
    user = subprocess.run(
        ["podman", "image", "inspect", IMAGE, "--format", "{{.Config.User}}"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert user.stdout.strip() == "1000:1000"


def _readme_docker_runs() -> list[list[str]]:
    """The README's `docker run` lines for podman on a machine without a GPU: the engine and
    the calling user swapped in, `--gpus all` left out (a CPU run takes --accelerator cpu)."""
    runs = []
    for line in (ROOT / "README.md").read_text().splitlines():
        if line.startswith("docker run "):
            line = line.replace('"$(id -u):$(id -g)"', f"{USER[0]}:{USER[1]}")
            words = [w for w in shlex.split(line) if w not in ("--gpus", "all")]
            runs.append(["podman", *words[1:]])
    assert len(runs) >= 2
    return runs


def test_the_readme_docker_run_lines_run_with_the_engine_swapped(results):
    for words in _readme_docker_runs():
        image = next(i for i, w in enumerate(words) if w.startswith("dlbench:"))
        words = [w.replace("$PWD/results", str(results)) for w in words]
        command = [*words[:2], "--pull=never", "--network", "none", *words[2:image]]
        command += [IMAGE, *words[image + 1 :], *TINY, "--precision", "32"]
        out = subprocess.run(command, capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, (command, out.stderr[-2000:])
    assert [r["status"] for r in _rows(results / "benchmark.csv")] == ["ok", "ok"]
    _owned_by_user(results)
    left = subprocess.run(
        ["podman", "ps", "--all", "--quiet", "--filter", f"ancestor={IMAGE}"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert left.stdout.strip() == "", "the README's docker run lines left containers behind"


def test_compose_sweep_and_report_services_run_with_the_cpu_override(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    for name in ("docker-compose.yml", "docker-compose.cpu.yml"):
        shutil.copy(ROOT / name, project / name)
    (project / "results").mkdir()
    os.chown(project / "results", *USER)
    compose = [
        str(Path(sys.executable).parent / "podman-compose"),
        "-f",
        "docker-compose.yml",
        "-f",
        "docker-compose.cpu.yml",
    ]
    env = {**os.environ, "UID": str(USER[0]), "GID": str(USER[1]), "DLBENCH_IMAGE": IMAGE}
    for service in ("sweep", "report"):
        out = subprocess.run(
            [*compose, "run", "--rm", service],
            cwd=project, env=env, capture_output=True, text=True, timeout=1200,
        )  # fmt: skip
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    rows = _rows(project / "results" / "sweep.csv")
    assert len(rows) == 5 and {r["status"] for r in rows} == {"ok"}  # the quick plan
    assert (project / "results" / "report" / "report.html").is_file()
    _owned_by_user(project / "results")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (('ENTRYPOINT ["dlbench"]', 'ENTRYPOINT ["dlbench-typo"]'), "smoke run failed"),
        (("COPY . /opt/dlbench/\n", ""), "build of"),  # dlbench itself is missing
    ],
)
def test_a_broken_dockerfile_fails_the_ci_script(tmp_path, change, expected):
    broken = tmp_path / "Dockerfile.broken"
    text = (ROOT / "Dockerfile.cuda12").read_text()
    assert change[0] in text
    broken.write_text(text.replace(*change))
    env = {**os.environ, "DOCKERFILE": str(broken), "IMAGE": "dlbench:broken"}
    try:
        out = subprocess.run(
            [str(ROOT / "docker" / "ci-build.sh"), "--smoke"],
            env=env, capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
    finally:
        subprocess.run(["podman", "rmi", "-f", "dlbench:broken"], capture_output=True)
    assert out.returncode != 0, out.stdout[-2000:]
    assert re.search(expected, out.stdout + out.stderr), out.stdout[-2000:]
    working = subprocess.run(["buildah", "containers", "--quiet"], capture_output=True, text=True)
    assert working.stdout.strip() == "", "a failed build left its working container"
