"""--attention: the SDPA kernel asked for runs, for the whole run, and keys the compile caches."""

from __future__ import annotations

import pytest
import torch

from dlbench.config.fields import ATTENTION_KERNELS
from dlbench.engine.acceleration.attention import SDPA_BACKENDS, attention_kernel
from tests.conftest import read_rows, run_cli


@pytest.mark.e2e
def test_the_kernel_asked_for_runs_and_the_row_says_so(csv_path):
    args = ["--model", "llm_tiny", "--seq-len", "16", "--accelerator", "cpu", "--batch-size", "2"]
    args += ["--n-iters", "2", "--warmup-steps", "1", "--output", str(csv_path)]
    for choice in ("math", "flash"):
        out = run_cli("train", *args, "--attention", choice)
        assert out.returncode == 0, out.stderr
    math_row, flash_row = read_rows(csv_path)
    assert (math_row["attention"], math_row["attention_backend"]) == ("math", "math")
    assert (flash_row["attention"], flash_row["attention_backend"]) == ("flash", "flash_cpu")


def test_the_choice_holds_inside_keys_the_compile_caches_and_is_undone_after():
    before = (torch.backends.cuda.flash_sdp_enabled(), torch.backends.cuda.math_sdp_enabled())
    tag = torch.compiler.config.cache_key_tag
    with attention_kernel("math"):
        assert not torch.backends.cuda.flash_sdp_enabled()
        assert torch.backends.cuda.math_sdp_enabled()
        # a compile cached under another kernel must miss, not be reused as it was traced
        assert "attention=math" in torch.compiler.config.cache_key_tag
    after = (torch.backends.cuda.flash_sdp_enabled(), torch.backends.cuda.math_sdp_enabled())
    assert after == before and torch.compiler.config.cache_key_tag == tag
    with attention_kernel(None):
        assert torch.compiler.config.cache_key_tag == tag


def test_every_choice_the_flag_accepts_has_its_kernel():
    assert tuple(SDPA_BACKENDS) == ATTENTION_KERNELS
