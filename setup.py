"""Builds bake the commit they are built from into the package (BUILD_INFO.json), since a wheel
or an image has no `.git` to ask at run time (dlbench.provenance). Everything else about the
package is in pyproject.toml."""

import importlib.util
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("provenance", ROOT / "src/dlbench/provenance.py")
provenance = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = provenance  # its dataclass looks its module up while it is made
_spec.loader.exec_module(provenance)


class BuildPyWithCommit(build_py):
    """build_py, then BUILD_INFO.json from git where the source is a checkout; a source
    without `.git` (the image's copy) keeps the BUILD_INFO.json its build wrote."""

    def run(self) -> None:
        super().run()
        identity = provenance.from_git(ROOT / "src" / "dlbench")
        if identity is not None:
            target = Path(self.build_lib) / "dlbench" / provenance.BUILD_INFO.name
            provenance.write_build_info(target, identity)


setup(cmdclass={"build_py": BuildPyWithCommit})
