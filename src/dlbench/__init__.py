"""dlbench: true, comparable, cheap deep-learning benchmarks on GPUs."""

import logging

from dlbench import startup as _startup  # noqa: F401 (the interpreter's start, fixed first)

__version__ = "0.2.0"


def _not_torchaos_enum_notice(record: logging.LogRecord) -> bool:
    """torchao, which transformers imports where it is installed (the fp8 extra), registers its
    enums with torch, and torch 2.11 and later log a deprecation line for each on stderr: not
    the one line a run's error or warning must be."""
    return "is an Enum subclass and is now natively supported" not in record.getMessage()


logging.getLogger("torch.utils._pytree").addFilter(_not_torchaos_enum_notice)


def _not_missing_cuda_home_notice(record: logging.LogRecord) -> bool:
    """torch's extension builder logs where it looks for CUDA as it is imported (inductor and
    Triton import it), on a machine without CUDA too: nothing a CPU run's user can act on."""
    return "No CUDA runtime is found" not in record.getMessage()


logging.getLogger("torch.utils.cpp_extension").addFilter(_not_missing_cuda_home_notice)
