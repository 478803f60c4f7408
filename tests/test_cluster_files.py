"""The files users hand to their schedulers and runners, checked as those would check them: the
PyTorchJob against the Kubeflow training operator's own models (kubeflow-training, which also
types the pod through the Kubernetes client's), rendered from the cluster files the sbatch
script reads too; the GitHub workflows by actionlint."""

from __future__ import annotations

import copy
import runpy
import shutil
import subprocess

import pytest
import yaml

from tests.conftest import ROOT

RENDER = runpy.run_path(str(ROOT / "docker" / "kubernetes" / "render.py"))
MANIFEST = ROOT / "docker" / "kubernetes" / "pytorchjob.yaml"
SBATCH = ROOT / "docker" / "slurm" / "dlbench.sbatch"


def _operator_roundtrip(data: dict) -> dict:
    """The manifest as the operator's models read it and write it back: a key they do not know
    is dropped, a value of the wrong type changes, a required field missing raises."""
    from kubeflow.training.api_client import ApiClient

    client = ApiClient()
    job = client._ApiClient__deserialize(copy.deepcopy(data), "KubeflowOrgV1PyTorchJob")
    return client.sanitize_for_serialization(job)


def test_the_pytorchjob_is_rendered_from_the_cluster_files():
    assert MANIFEST.read_text() == RENDER["render"](), (
        "run: python3 docker/kubernetes/render.py > docker/kubernetes/pytorchjob.yaml"
    )


def test_the_pytorchjob_holds_to_the_training_operators_schema():
    data = yaml.safe_load(MANIFEST.read_text())
    assert _operator_roundtrip(data) == data
    container = data["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    typo = copy.deepcopy(data)
    typo["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0][
        "volumeMount"
    ] = container["volumeMounts"]
    assert _operator_roundtrip(typo) != typo  # an unknown key does not pass
    unnamed = copy.deepcopy(data)
    del unnamed["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0][
        "name"
    ]
    with pytest.raises(ValueError, match="name"):
        _operator_roundtrip(unnamed)


def test_slurm_and_kubernetes_run_the_same_arguments_environment_and_mount():
    args, env = RENDER["run_args"](), RENDER["run_env"]()
    data = yaml.safe_load(MANIFEST.read_text())
    for replica in data["spec"]["pytorchReplicaSpecs"].values():
        [container] = replica["template"]["spec"]["containers"]
        given = container["args"][container["args"].index("dlbench") + 1 :]
        assert given[: len(args)] == args
        assert {e["name"]: e["value"] for e in container["env"]} == env
        assert env["DLBENCH_RESULTS"] in [m["mountPath"] for m in container["volumeMounts"]]
    script = SBATCH.read_text()
    assert "mapfile -t run_args < docker/cluster/run.args" in script
    assert "source docker/cluster/run.env" in script
    assert ':$DLBENCH_RESULTS"' in script  # pyxis mounts results where the PyTorchJob does


def _actionlint() -> str:
    found = shutil.which("actionlint", path=str(ROOT / ".venv" / "bin")) or shutil.which(
        "actionlint"
    )
    assert found, "actionlint missing: pip install -e '.[test]'"
    return found


def test_actionlint_passes_the_workflows():
    workflows = sorted(str(p) for p in (ROOT / ".github" / "workflows").glob("*.yml"))
    out = subprocess.run([_actionlint(), "-no-color", *workflows], capture_output=True,
                         text=True, cwd=ROOT)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr


def test_actionlint_fails_a_broken_workflow(tmp_path):
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    text = (ROOT / ".github" / "workflows" / "gpu.yml").read_text()
    (workflows / "gpu.yml").write_text(text.replace("github.sha", "github.shaa", 1))
    broken = workflows / "gpu.yml"
    out = subprocess.run([_actionlint(), "-no-color", str(broken)], capture_output=True,
                         text=True, cwd=ROOT)  # fmt: skip
    assert out.returncode == 1 and "shaa" in out.stdout
