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
