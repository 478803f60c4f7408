"""The environment a row records so that two rows can be told apart: the container it ran in."""

from __future__ import annotations

from dlbench.results.environment import container


def test_the_container_and_its_image_are_recorded_where_the_engine_tells(tmp_path):
    assert container(tmp_path, {}) == {"container": "", "container_image": ""}
    (tmp_path / ".dockerenv").write_text("")
    assert container(tmp_path, {}) == {"container": "docker", "container_image": ""}
    given = {"DLBENCH_CONTAINER_IMAGE": "dlbench:cuda12"}  # what the compose file sets
    assert container(tmp_path, given)["container_image"] == "dlbench:cuda12"
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / ".containerenv").write_text(
        'engine="podman-4.3.1"\nimage="localhost/dlbench:cuda12"\nimageid="9f1c2e"\n'
    )
    assert container(tmp_path) == {"container": "podman", "container_image": "9f1c2e"}


def test_a_ranks_gpu_is_its_local_rank_where_a_launcher_set_one():
    """Its cache folder and facts follow its own GPU (before, every rank named GPU 0's)."""
    from dlbench.results.environment import rank_gpu_index

    assert rank_gpu_index({}) == 0
    assert rank_gpu_index({"LOCAL_RANK": "3"}) == 3
    assert rank_gpu_index({"SLURM_LOCALID": "2"}) == 2
    assert rank_gpu_index({"LOCAL_RANK": "1", "SLURM_LOCALID": "2"}) == 1
